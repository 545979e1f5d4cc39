"""The echo provider: its adapter and the echo agent program (roost.adapters.echo*)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from roost.adapters.base import BUSY, EXITED, READY, STARTING, LaunchContext
from roost.adapters.echo import EchoAdapter, agent_argv
from roost.adapters.echo_agent import PROMPT, valid_id

CTX = LaunchContext(cwd="/work", mode="pty", env={}, data_dir="/data/echo")
BANNER = "roost echo agent 1 - answers every line with 'echo: <line>'; /exit quits"


# -- adapter -------------------------------------------------------------------------------------


def test_fresh_assigns_a_uuid_identity() -> None:
    launch = EchoAdapter().fresh(CTX)
    assert launch.provider_session is not None
    assert str(uuid.UUID(launch.provider_session)) == launch.provider_session
    assert launch.argv == agent_argv("--session-id", launch.provider_session)
    assert launch.argv[:2] == [sys.executable, "-S"]
    assert launch.env == {"ROOST_ECHO_HOME": "/data/echo"}


def test_fresh_identities_differ() -> None:
    adapter = EchoAdapter()
    assert adapter.fresh(CTX).provider_session != adapter.fresh(CTX).provider_session


def test_resume_uses_the_same_identity() -> None:
    adapter = EchoAdapter()
    session = adapter.fresh(CTX).provider_session
    assert session is not None
    launch = adapter.resume(session, CTX)
    assert launch.argv == agent_argv("--resume", session)
    assert launch.provider_session == session


def test_an_echo_home_in_the_record_env_is_left_alone() -> None:
    ctx = LaunchContext(cwd="/", mode="pty", env={"ROOST_ECHO_HOME": "/mine"}, data_dir="/d")
    assert EchoAdapter().fresh(ctx).env == {}
    assert EchoAdapter().resume("abc", ctx).env == {}


@pytest.mark.parametrize(
    ("screen", "state"),
    [
        ("", STARTING),
        ("\n   \n", STARTING),
        (f"{BANNER}\nsession abc\n{PROMPT}", READY),
        (f"{BANNER}\nsession abc\n{PROMPT}\n\n\n", READY),
        (f"{PROMPT}echo: hi\n{PROMPT}half-typed", READY),
        (f"{BANNER}\nsession abc", BUSY),
        (f"{PROMPT}hello\necho: hello", BUSY),
        ("  echo-ready> ", BUSY),
    ],
)
def test_classify(screen: str, state: str) -> None:
    assert EchoAdapter().classify(screen, exited=False).state == state


@pytest.mark.parametrize("screen", ["", f"{BANNER}\n{PROMPT}", "echo: x"])
def test_classify_exited(screen: str) -> None:
    assert EchoAdapter().classify(screen, exited=True).state == EXITED


# -- the agent program ---------------------------------------------------------------------------


def run_agent(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ROOST_ECHO_HOME": str(home)}
    return subprocess.run(
        agent_argv(*args),
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


def test_fresh_session_answers_and_records_turns(tmp_path: Path) -> None:
    result = run_agent(tmp_path, "--session-id", "s1", stdin="hello\n\nsecond turn\n")
    assert result.returncode == 0, result.stderr
    assert "session s1" in result.stdout
    assert "echo: hello\n" in result.stdout
    assert "echo: second turn\n" in result.stdout
    lines = (tmp_path / "sessions" / "s1.jsonl").read_text().splitlines()
    turns = [json.loads(line) for line in lines]
    assert [(t["user"], t["assistant"]) for t in turns] == [
        ("hello", "echo: hello"),
        ("second turn", "echo: second turn"),
    ]


def test_resume_counts_the_turns(tmp_path: Path) -> None:
    run_agent(tmp_path, "--session-id", "s1", stdin="one\ntwo\nthree\n")
    result = run_agent(tmp_path, "--resume", "s1", stdin="four\n/exit\nnot sent\n")
    assert result.returncode == 0, result.stderr
    assert "resumed s1 (3 turns)" in result.stdout
    assert "echo: four" in result.stdout
    assert "not sent" not in result.stdout
    assert len((tmp_path / "sessions" / "s1.jsonl").read_text().splitlines()) == 4


def test_resume_of_an_unknown_id_fails(tmp_path: Path) -> None:
    result = run_agent(tmp_path, "--resume", "never-made", stdin="hi\n")
    assert result.returncode == 2
    assert "never-made" in result.stderr
    assert "echo: hi" not in result.stdout
    assert not (tmp_path / "sessions" / "never-made.jsonl").exists()


def test_fresh_with_an_existing_id_fails(tmp_path: Path) -> None:
    run_agent(tmp_path, "--session-id", "s1", stdin="one\n")
    result = run_agent(tmp_path, "--session-id", "s1", stdin="two\n")
    assert result.returncode == 2
    assert len((tmp_path / "sessions" / "s1.jsonl").read_text().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--session-id", "a", "--resume", "b"], "not allowed with argument --session-id"),
        (["--session-id"], "argument --session-id: expected one argument"),
        (["--output-format", "text", "-p", "x"], "invalid choice: 'text'"),
        (["--colour"], "unrecognized arguments: --colour"),
        (["stray"], "unrecognized arguments: stray"),
    ],
)
def test_a_bad_command_line_exits_2_with_the_usage(
    tmp_path: Path, args: list[str], said: str
) -> None:
    result = run_agent(tmp_path, *args)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: echo-agent")
    assert said in result.stderr
    assert not (tmp_path / "sessions").exists() or not list((tmp_path / "sessions").iterdir())


def test_options_take_the_equals_form_and_help_exits_0(tmp_path: Path) -> None:
    result = run_agent(tmp_path, "--session-id=s9", "--print=hi", "--output-format=stream-json")
    assert result.returncode == 0, result.stderr
    assert '"session_id": "s9"' in result.stdout and "echo: hi" in result.stdout
    helped = run_agent(tmp_path, "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: echo-agent")


@pytest.mark.parametrize(
    ("session_id", "valid"),
    [
        ("a", True),
        ("A0._-z", True),
        ("x" * 128, True),
        ("x" * 129, False),
        ("", False),
        ("-a", False),
        (".a", False),
        ("a/b", False),
        ("a b", False),
        ("é", False),
        ("a\n", False),
    ],
)
def test_session_ids_are_checked_as_the_pattern_says(session_id: str, valid: bool) -> None:
    assert valid_id(session_id) is valid
    assert valid_id(session_id) is bool(
        re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", session_id)
    )


def test_the_agent_starts_on_what_it_needs_alone(tmp_path: Path) -> None:
    """Every echo session starts one: up to its first answer no argparse, re, json, pathlib,
    uuid, dataclasses or roost module is imported."""
    env = {**os.environ, "ROOST_ECHO_HOME": str(tmp_path)}
    launch = agent_argv()
    probe = (
        "import sys\n"
        "sys.argv = ['echo', '--session-id', 's1']\n"
        f"path = {launch[2]!r}\n"
        "try: exec(compile(open(path).read(), path, 'exec'), {'__name__': '__main__'})\n"
        "except SystemExit: pass\n"
        "heavy = ('argparse', 're', 'json', 'pathlib', 'uuid', 'dataclasses', 'roost', 'inspect')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [launch[0], "-S", "-c", probe],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert "session s1" in result.stdout, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "[]"


def on_a_terminal(home: Path, keystrokes: list[bytes], **env: str) -> tuple[list[str], int, str]:
    """The echo agent on a PTY, typed ``keystrokes`` (each once the prompt before it shows):
    the lines it read (its session file), its exit status and what it showed."""
    import contextlib
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: the agent
        argv = agent_argv("--session-id", "t1")
        os.execve(argv[0], argv, {**os.environ, "ROOST_ECHO_HOME": str(home), **env})
    shown = b""

    def until_prompts(n: int) -> None:
        nonlocal shown
        while shown.count(PROMPT.encode()) < n:
            ready, _, _ = select.select([fd], [], [], 20)
            assert ready, shown[-300:]
            shown += os.read(fd, 65536)

    for n, keys in enumerate(keystrokes, 1):
        until_prompts(n)
        while keys:
            readable, writable, _ = select.select([fd], [fd], [], 20)
            if readable:
                shown += os.read(fd, 65536)
            if writable:
                keys = keys[os.write(fd, keys[:4096]) :]
    with contextlib.suppress(OSError):  # the agent ended: its terminal hung up
        while select.select([fd], [], [], 5)[0] and (more := os.read(fd, 65536)):
            shown += more
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    path = home / "sessions" / "t1.jsonl"
    lines = [json.loads(line)["user"] for line in path.read_text().splitlines()]
    return lines, os.waitstatus_to_exitcode(status), shown.decode("utf-8", "replace")


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX terminal")
def test_the_agent_reads_its_terminal_byte_by_byte_and_edits_the_line(tmp_path: Path) -> None:
    """A line of any length arrives whole (a terminal in canonical mode keeps 4095 bytes of a
    line); Backspace, Ctrl-U and Ctrl-D do what they do at a shell's prompt."""
    long = "0123456789" * 10_000
    typed = [b"abx\x7fc\r", "junk é\x15ok é\x7f\x7f\r".encode(), long.encode() + b"\r", b"\x04"]
    lines, status, shown = on_a_terminal(tmp_path, typed)
    assert lines == ["abc", "ok", long] and status == 0
    assert "echo: abc" in shown and "echo: ok\r\n" in shown
    canonical, _, _ = on_a_terminal(
        tmp_path / "c", [long.encode() + b"\r", b"\x04"], ROOST_ECHO_CANONICAL="1"
    )
    assert canonical == [long[:4095]]  # what the terminal kept of it


# -- fork ----------------------------------------------------------------------------------------


def test_fork_argv_assigns_a_new_identity() -> None:
    launch = EchoAdapter().fork("src-1", CTX)
    new = launch.provider_session
    assert new and new != "src-1"
    assert launch.argv == agent_argv("--resume", "src-1", "--fork-session", "--session-id", new)
    turn = EchoAdapter().fork_turn("src-1", "n-2", "hi", CTX)
    head = agent_argv("-p", "hi", "--output-format", "stream-json")
    assert turn.argv == [*head, "--resume", "src-1", "--fork-session", "--session-id", "n-2"]
    assert turn.provider_session == "n-2"


def test_a_fork_copies_the_history_and_leaves_the_source_as_it_was(tmp_path: Path) -> None:
    run_agent(tmp_path, "--session-id", "s1", stdin="one\ntwo\n")
    source = tmp_path / "sessions" / "s1.jsonl"
    kept = source.read_bytes()
    result = run_agent(
        tmp_path, "--resume", "s1", "--fork-session", "--session-id", "f1", stdin="three\n"
    )
    assert result.returncode == 0, result.stderr
    assert "forked s1 into f1" in result.stdout and "resumed f1 (2 turns)" in result.stdout
    turns = [
        json.loads(x)["user"] for x in (tmp_path / "sessions" / "f1.jsonl").read_text().splitlines()
    ]
    assert turns == ["one", "two", "three"]
    assert source.read_bytes() == kept


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--resume", "missing", "--fork-session"], "no session 'missing' to fork"),
        (["--resume", "s1", "--fork-session", "--session-id", "s1"], "cannot be the fork"),
    ],
)
def test_a_fork_of_nothing_or_onto_a_taken_id_fails(
    tmp_path: Path, args: list[str], said: str
) -> None:
    run_agent(tmp_path, "--session-id", "s1", stdin="one\n")
    kept = (tmp_path / "sessions" / "s1.jsonl").read_bytes()
    result = run_agent(tmp_path, *args, stdin="hi\n")
    assert result.returncode == 2 and said in result.stderr
    assert (tmp_path / "sessions" / "s1.jsonl").read_bytes() == kept
