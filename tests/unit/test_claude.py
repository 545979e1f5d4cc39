"""The claude provider: its adapter (roost.adapters.claude) read against the real CLI's captures
(in the repository: tests/fixtures/provider-captures), and the stand-in program tests/fakes/claude
held to the same shapes."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from roost.actors.supervisor.terminal import Terminal
from roost.adapters.base import (
    ATTENTION,
    ATTENTION_REQUIRED,
    BUSY,
    EXITED,
    READY,
    RESUMED,
    RETRY_FRESH,
    SHELL,
    STARTING,
    Classification,
    LaunchContext,
)
from roost.adapters.claude import ClaudeAdapter, read_screen
from roost.adapters.evidence import Evidence, ProcessInfo
from roost.adapters.registry import adapters
from roost.wire.errors import RoostError
from tests.unit.captures import capture, screens

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "claude"
CTX = LaunchContext(cwd="/srv/work/proj", mode="pty", env={}, data_dir="/data/claude")
SID = "9cff00ce-020d-4f1c-a41b-4094051587e7"
ADAPTER = ClaudeAdapter()
RULE = "─" * 60
IDLE_BOX = f"{RULE}\n\u276f\xa0\n{RULE}\n  ⏵⏵ auto mode on (shift+tab to cycle)"

# What each screen of the real CLI is. Some names mislead: claude-apikey-screen.txt is the
# folder-trust step before the API-key dialog, claude-mock-perm.txt the idle screen after one.
SCREENS: dict[str, tuple[str, str | None]] = {
    "claude-apikey-screen.txt": (ATTENTION, "trust"),
    "claude-apikey-screen2.txt": (ATTENTION, "api-key"),
    "claude-mock-busy.txt": (BUSY, None),
    "claude-mock-done.txt": (READY, None),
    "claude-mock-exit.txt": (EXITED, None),
    "claude-mock-perm.txt": (READY, None),
    "claude-mock-perm2.txt": (ATTENTION, "permission"),
    "claude-mock-resume.txt": (READY, None),
    "claude-mock-resume-lost-exit.txt": (EXITED, None),  # "No conversation found ..."
    "claude-mock-s1.txt": (ATTENTION, "login"),  # theme picker, the first onboarding step
    "claude-mock-s2.txt": (ATTENTION, "login"),  # security notes, "Press Enter to continue"
    "claude-mock-s3.txt": (ATTENTION, "trust"),
    "claude-mock-s4.txt": (READY, None),
    "claude-resume-picker.txt": (ATTENTION, "picker"),
    "claude-screen1.txt": (ATTENTION, "offline"),
    "claude-screen1b.txt": (ATTENTION, "offline"),
    # the start-up question of a user whose settings chose manual mode
    "claude-auto-mode-question.txt": (ATTENTION, "question"),
    "claude-manual-idle.txt": (READY, None),  # after "No, keep manual mode"
    "claude-manual-perm.txt": (ATTENTION, "permission"),  # PERMTEST in manual mode
    # no credentials; only the footer says so
    "claude-noauth-idle.txt": (ATTENTION, "login"),
    # a usage limit (LIMITTEST): a subscriber's login (claude continues by itself at the reset),
    # then the same after the reset with "continue" typed; an API key's (no reset shown)
    "claude-limit-sub.txt": (ATTENTION, "rate-limit"),
    "claude-limit-sub-shortly.txt": (ATTENTION, "rate-limit"),
    "claude-limit-sub-continued.txt": (READY, None),
    "claude-limit-sub-auto.txt": (READY, None),  # claude continued by itself
    "claude-limit-api.txt": (ATTENTION, "rate-limit"),
}


def proc(pid: int, name: str, *cmdline: str, ppid: int = 1, pgid: int | None = None) -> ProcessInfo:
    return ProcessInfo(pid, ppid, pgid or pid, name, f"/bin/{name}", cmdline or (name,), 100.0)


# -- screens of the real CLI ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), sorted(SCREENS.items()))
def test_every_capture_is_classified(name: str, expected: tuple[str, str | None]) -> None:
    seen = ADAPTER.classify(capture(name), exited=False)
    assert (seen.state, seen.reason) == expected
    if seen.state == ATTENTION:
        assert seen.detail  # the line that says why, for the person who must answer


def test_no_capture_is_left_out() -> None:
    assert screens("claude") == set(SCREENS)


def test_an_exited_process_is_exited_whatever_the_screen_and_keeps_why() -> None:
    for name in SCREENS:
        assert ADAPTER.classify(capture(name), exited=True).state == EXITED
    offline = ADAPTER.classify(capture("claude-screen1b.txt"), exited=True)
    assert offline.detail.startswith("offline: Failed to connect to api.anthropic.com")


def test_the_exit_hint_names_the_conversation() -> None:
    assert ADAPTER.discover_identity(capture("claude-mock-exit.txt"), CTX, since=0) == SID
    assert ADAPTER.discover_identity(capture("claude-mock-resume.txt"), CTX, since=0) is None
    shouted = f"Resume this session with:\nclaude --resume {SID.upper()}"
    assert ADAPTER.discover_identity(shouted, CTX, since=0) == SID


def test_a_resumed_idle_session_is_resumed() -> None:
    alive = Evidence(agent=proc(50, "claude"), foreground_pgid=50)
    check = ADAPTER.verify_resume(capture("claude-mock-resume.txt"), SID, [alive])
    assert check.outcome == RESUMED
    picker = ADAPTER.verify_resume(capture("claude-resume-picker.txt"), SID, [alive])
    assert (picker.outcome, picker.reason) == (ATTENTION_REQUIRED, "picker")


# -- synthetic screens ---------------------------------------------------------------------------


def box_screen(*history: str, box: str = IDLE_BOX) -> str:
    return "\n".join([" ▐▛███▛█   Claude Code v2.1.332", "", *history, box, "", ""])


@pytest.mark.parametrize(
    ("screen", "expected"),
    [
        ("", (STARTING, None)),
        ("Welcome to Claude Code v2.1.332\n" + "." * 58, (STARTING, None)),
        (box_screen(), (READY, None)),
        # what the user typed is history, not a dialog
        (
            box_screen("\u276f Do you want to proceed? Yes, I trust this folder", "● Sure."),
            (READY, None),
        ),
        # a half-typed prompt over two lines, in a narrow terminal
        (box_screen(box=f"{'─' * 20}\n\u276f first line\n  second\n{'─' * 20}\n"), (READY, None)),
        # an older footer-less busy screen: the spinner above the box
        (box_screen("\u276f go", "✢ Pondering… (3s · ↑ 12 tokens)"), (BUSY, None)),
        (box_screen("\u276f go", "● Not logged in · Please run /login"), (ATTENTION, "login")),
        (
            box_screen("\u276f go", "  ⎿  API Error: 429 rate_limit_error"),
            (ATTENTION, "rate-limit"),
        ),
        (
            box_screen("\u276f go", "Claude usage limit reached. Your limit will reset at 3pm"),
            (ATTENTION, "rate-limit"),
        ),
        (box_screen("\u276f go", "  ⎿  API Error: Connection error."), (ATTENTION, "offline")),
        # a limit hit earlier, then a prompt that was answered: ready again
        (box_screen("\u276f a", "  ⎿  API Error: 429", "\u276f b", "● Fine."), (READY, None)),
        (
            "It looks like your version of Claude Code (2.0.1) needs an update.\n"
            "A newer version (2.1.0 or higher) is required to continue.",
            (ATTENTION, "update"),
        ),
        (
            " Select login method:\n\n \u276f 1. Claude account with subscription",
            (ATTENTION, "login"),
        ),
        (
            " Do you want to make this edit to app.py?\n \u276f 1. Yes\n   2. No",
            (ATTENTION, "permission"),
        ),
        ("No conversation found with session ID: " + SID, (EXITED, None)),
        # the footer of an idle claude without credentials
        (
            box_screen(box=IDLE_BOX + "        Not logged in · run /login"),
            (ATTENTION, "login"),
        ),
        # another start-up question of claude's own, over a list of choices
        (
            f"{RULE}\n  Switch to the newer model?\n\n  \u276f Yes, switch\n    No, keep it",
            (ATTENTION, "question"),
        ),
        # a choice with no question above it is not one
        (f"{RULE}\n  Loading\n\n  \u276f Yes", (STARTING, None)),
    ],
)
def test_synthetic_screens(screen: str, expected: tuple[str, str | None]) -> None:
    seen = ADAPTER.classify(screen, exited=False)
    assert (seen.state, seen.reason) == expected


def test_busy_footer_wins_over_an_old_message() -> None:
    busy = IDLE_BOX.replace("cycle)", "cycle) · esc to interrupt")
    screen = box_screen(
        "\u276f go", "● Not logged in · Please run /login", "\u276f again", box=busy
    )
    assert ADAPTER.classify(screen, exited=False).state == BUSY


# -- process evidence ----------------------------------------------------------------------------


def test_an_idle_shell_in_front_with_no_claude_is_a_shell() -> None:
    shell = proc(40, "bash")
    seen = ADAPTER.classify("$ ", exited=False, evidence=Evidence(shell, 40))
    assert seen.state == SHELL and "bash" in seen.detail
    proof = [Evidence(shell, 40, taken=1.0), Evidence(shell, 40, taken=2.0)]
    assert ADAPTER.verify_resume("$ ", SID, proof).outcome == RETRY_FRESH


@pytest.mark.parametrize(
    "descendant",
    [
        proc(41, "claude", ppid=40),  # the native binary
        proc(41, "node", "node", "/x/node_modules/@anthropic-ai/claude-code/cli.js", ppid=40),
        proc(41, "python3", "python3", "/repo/tests/fakes/claude", ppid=40),  # the stand-in
        proc(41, "sleep", "sleep", "5", ppid=40),  # a launch wrapper still working
    ],
)
def test_a_shell_that_runs_something_is_not_a_shell(descendant: ProcessInfo) -> None:
    evidence = Evidence(proc(40, "sh", "sh", "-c", "sleep 5; exec claude"), 40, (descendant,))
    assert ADAPTER.classify(box_screen(), exited=False, evidence=evidence).state == READY


def test_claude_in_front_is_read_from_the_screen() -> None:
    evidence = Evidence(proc(40, "claude"), 40)
    assert ADAPTER.classify(box_screen(), exited=False, evidence=evidence).state == READY


# -- argv ----------------------------------------------------------------------------------------


def test_fresh_assigns_a_uuid_up_front() -> None:
    launch = ADAPTER.fresh(CTX)
    assert launch.provider_session and str(uuid.UUID(launch.provider_session)) == (
        launch.provider_session
    )
    assert launch.argv == ["claude", "--session-id", launch.provider_session]
    assert launch.env == {}
    assert ADAPTER.fresh(CTX).provider_session != launch.provider_session


def test_the_binary_comes_from_the_record_env() -> None:
    ctx = LaunchContext(cwd="/p", mode="stream", env={"ROOST_CLAUDE_BIN": "/opt/c"}, data_dir="/d")
    assert ADAPTER.fresh(ctx).argv[0] == "/opt/c"
    assert ADAPTER.resume(SID, ctx).argv == ["/opt/c", "--resume", SID]
    assert ADAPTER.turn(SID, "hi", ctx, first=True).argv[0] == "/opt/c"


def test_resume_keeps_the_identity_and_refuses_a_non_uuid() -> None:
    launch = ADAPTER.resume(SID, CTX)
    assert launch.argv == ["claude", "--resume", SID] and launch.provider_session == SID
    with pytest.raises(RoostError) as err:
        ADAPTER.resume("my session", CTX)  # claude would open its picker on a search term
    assert err.value.code == "bad-request"


def test_turn_argv() -> None:
    first = ADAPTER.turn(SID, "-v is not a flag", CTX, first=True)
    head = ["claude", "-p", "--output-format", "stream-json", "--verbose"]
    assert first.argv == [*head, "--session-id", SID, "--", "-v is not a flag"]
    assert first.provider_session == SID
    later = ADAPTER.turn(SID, "again", CTX, first=False)
    assert later.argv == [*head, "--resume", SID, "--", "again"]
    assigned = ADAPTER.turn(None, "hi", CTX, first=True)
    assert assigned.provider_session and assigned.argv[6] == assigned.provider_session
    with pytest.raises(RoostError) as err:
        ADAPTER.turn(None, "hi", CTX, first=False)
    assert err.value.code == "no-provider-session"


def test_the_registry_offers_claude() -> None:
    assert isinstance(adapters()["claude"], ClaudeAdapter)


# -- stream-json lines ---------------------------------------------------------------------------


def fold(lines: list[str], stream: str = "stdout") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """All events of a turn's lines and its facts, merged as the supervisor merges them."""
    events: list[dict[str, Any]] = []
    facts: dict[str, Any] = {}
    for line in lines:
        got, more = ADAPTER.parse(line, stream)
        events += got
        facts.update(more)
    return events, facts


def capture_lines(name: str) -> list[str]:
    return capture(name).splitlines()


def test_a_plain_answer() -> None:
    events, facts = fold(capture_lines("claude-mock1.jsonl"))
    assert events == [{"kind": "session.output", "data": {"text": "Hello from the mock."}}]
    assert facts["session_id"] == "65c7b6c6-783a-4bd4-893c-ab196b588688"
    assert (facts["result"], facts["is_error"]) == ("Hello from the mock.", False)
    assert "error" not in facts


@pytest.mark.parametrize("name", ["claude-mock2.jsonl", "claude-mock3.jsonl"])
def test_a_tool_call_and_its_result(name: str) -> None:
    events, facts = fold(capture_lines(name))
    assert [e["kind"] for e in events] == [
        "session.tool_call",
        "session.tool_result",
        "session.output",
    ]
    call, result, output = (e["data"] for e in events)
    assert call["name"] == "Bash" and call["input"]["command"] == "echo hi"
    assert result == {"id": call["id"], "is_error": False, "content": "hi"}
    assert output["text"] == "Tool said hi." and facts["result"] == "Tool said hi."
    assert facts["is_error"] is False and facts["num_turns"] == 2


def test_retries_of_a_refused_key_are_facts_not_events() -> None:
    events, facts = fold(capture_lines("claude-401.jsonl"))  # cut off while still retrying
    assert events == [] and "result" not in facts
    assert facts["error"] == "API retry 8/10 after HTTP 401 (authentication_failed)"


def test_a_refused_key_fails_the_turn() -> None:
    events, facts = fold(capture_lines("claude-401b.jsonl"))
    assert [e["data"] for e in events] == [
        {"text": "Invalid API key · Fix external API key", "error": "authentication_failed"}
    ]
    assert facts["is_error"] is True  # though its subtype says "success"
    assert facts["error"] == "Invalid API key · Fix external API key (HTTP 401)"


def test_not_logged_in_fails_the_turn() -> None:
    lines = capture_lines("claude-p-noauth.stdout")
    assert json.loads(lines[-1])["subtype"] == "success"
    events, facts = fold(lines)
    assert events[0]["data"]["error"] == "authentication_failed"
    assert facts["is_error"] is True and facts["error"] == "Not logged in · Please run /login"
    _, first = ADAPTER.parse(lines[1], "stdout")
    assert first["error"] == "Not logged in · Please run /login"


def test_stderr_lines() -> None:
    events, facts = fold([f"Error: Session ID {SID} is already in use.", "  "], "stderr")
    assert [e["kind"] for e in events] == ["session.stderr"]
    assert facts == {"error": f"Error: Session ID {SID} is already in use."}
    assert ADAPTER.parse("(node:1) ExperimentalWarning: x", "stderr")[1] == {}
    assert fold(["not json"])[0] == [{"kind": "session.stderr", "data": {"line": "not json"}}]


# -- the stand-in program ------------------------------------------------------------------------


def fake(cwd: Path, config: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FAKE), *args],
        cwd=cwd,
        env={**os.environ, "CLAUDE_CONFIG_DIR": str(config), **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def headless(cwd: Path, config: Path, flag: str, sid: str, text: str, **env: str) -> Any:
    args = ["-p", "--output-format", "stream-json", "--verbose", flag, sid, "--", text]
    return fake(cwd, config, *args, **env)


def test_the_fake_keeps_a_conversation_where_claude_does(tmp_path: Path) -> None:
    work = tmp_path / "my proj.x"
    work.mkdir()
    config, sid = tmp_path / "config", str(uuid.uuid4())
    first = headless(work, config, "--session-id", sid, "/tool echo hi")
    assert first.returncode == 0, first.stderr
    events, facts = fold(first.stdout.splitlines())
    kinds = ["session.tool_call", "session.tool_result", "session.output"]
    assert [e["kind"] for e in events] == kinds
    assert (facts["session_id"], facts["result"], facts["is_error"]) == (
        sid,
        "Tool said hi.",
        False,
    )
    assert json.loads(first.stdout.splitlines()[0])["subtype"] == "init"
    second = headless(work, config, "--resume", sid, "again")
    assert fold(second.stdout.splitlines())[1]["result"] == "Hello from the fake. You said: again"
    escaped = re.sub(r"[^a-zA-Z0-9]", "-", str(work))  # claude's project dir: "/a b.c" -> "-a-b-c"
    records = (config / "projects" / escaped / f"{sid}.jsonl").read_text().splitlines()
    assert [json.loads(r)["type"] for r in records] == ["user", "assistant"] * 2


def test_the_fake_refuses_what_claude_refuses(tmp_path: Path) -> None:
    config, sid = tmp_path / "config", str(uuid.uuid4())
    assert headless(tmp_path, config, "--session-id", sid, "hi").returncode == 0
    cases = [
        (["--session-id", sid], f"Error: Session ID {sid} is already in use."),
        (["--session-id", "nope"], "Error: Invalid session ID. Must be a valid UUID."),
        (["--resume", SID], f"No conversation found with session ID: {SID}"),
    ]
    for args, message in cases:
        for mode in ([], ["-p", "--output-format", "stream-json", "--verbose"]):
            run = fake(tmp_path, config, *mode, *args, "--", "x")
            assert (run.returncode, run.stderr.strip()) == (1, message)
    bare = fake(tmp_path, config, "-p", "--output-format", "stream-json", "--", "x")
    assert "requires --verbose" in bare.stderr and bare.returncode == 1
    crash = fake(tmp_path, config, "--session-id", str(uuid.uuid4()), FAKE_CLAUDE_CRASH="1")
    assert crash.returncode == 1


def test_the_fake_can_be_logged_out(tmp_path: Path) -> None:
    run = headless(
        tmp_path, tmp_path / "c", "--session-id", str(uuid.uuid4()), "hi", FAKE_CLAUDE_NOAUTH="1"
    )
    assert run.returncode == 1
    _, facts = fold(run.stdout.splitlines())
    assert facts["is_error"] is True and facts["error"] == "Not logged in · Please run /login"


class FakeTerminal:
    """The stand-in in a real PTY, its output rendered as roost renders a session's screen."""

    def __init__(self, cwd: Path, *args: str, **env: str) -> None:
        from ptyprocess import PtyProcess

        full_env = {**os.environ, "CLAUDE_CONFIG_DIR": str(cwd / "config"), **env}
        self.proc = PtyProcess.spawn([str(FAKE), *args], cwd=str(cwd), env=full_env)
        self.proc.setwinsize(40, 120)
        self.term = Terminal(40, 120)

    def classify(self) -> Classification:
        while select.select([self.proc.fd], [], [], 0.05)[0]:
            try:
                self.term.feed(os.read(self.proc.fd, 65536))
            except OSError:  # the program has gone and its PTY with it
                break
        return ADAPTER.classify(self.term.text(), exited=not self.proc.isalive())

    def wait(self, state: str, timeout: float = 10.0) -> Classification:
        deadline = time.monotonic() + timeout
        while (seen := self.classify()).state != state:
            assert time.monotonic() < deadline, f"not {state}: {seen}\n{self.term.text()}"
        return seen

    def close(self) -> None:
        self.proc.terminate(force=True)


@pytest.fixture
def pty_fake(tmp_path: Path) -> Iterator[Callable[..., FakeTerminal]]:
    started: list[FakeTerminal] = []

    def start(*args: str, **env: str) -> FakeTerminal:
        started.append(FakeTerminal(tmp_path, *args, **env))
        return started[-1]

    yield start
    for terminal in started:
        terminal.close()


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in's TUI needs a POSIX terminal")
@pytest.mark.parametrize("screen", ["login", "trust", "api-key"])
def test_the_fakes_screens_read_as_the_real_ones(
    pty_fake: Callable[..., FakeTerminal], screen: str
) -> None:
    term = pty_fake("--session-id", str(uuid.uuid4()), FAKE_CLAUDE_SCREEN=screen)
    assert term.wait(ATTENTION).reason == screen


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in's TUI needs a POSIX terminal")
def test_the_fakes_conversation_reads_as_the_real_one(
    pty_fake: Callable[..., FakeTerminal],
) -> None:
    sid = str(uuid.uuid4())
    term = pty_fake("--session-id", sid, FAKE_CLAUDE_SCREEN="permission", FAKE_CLAUDE_BUSY_MS="800")
    term.wait(READY)
    term.proc.write(b"make a file\r")
    assert term.wait(ATTENTION).reason == "permission"
    term.proc.write(b"\r")  # a human allows it
    term.wait(BUSY)
    term.wait(READY)
    assert "You said: make a file" in term.term.text()
    term.proc.write(b"/exit\r")
    term.wait(EXITED)
    assert ADAPTER.discover_identity(term.term.text(), CTX, since=0) == sid
    again = pty_fake("--resume", sid)
    again.wait(READY)
    assert "You said: make a file" in again.term.text()


def test_fork_resumes_the_source_into_a_new_id_roost_assigns() -> None:
    launch = ADAPTER.fork(SID, CTX)
    new = launch.provider_session
    assert new and new != SID and uuid.UUID(new).version == 4
    assert launch.argv == ["claude", "--resume", SID, "--fork-session", "--session-id", new]
    turn = ADAPTER.fork_turn(SID, None, "-x", CTX)
    head = ["claude", "-p", "--output-format", "stream-json", "--verbose"]
    assigned = turn.provider_session
    assert assigned and assigned != SID
    assert turn.argv == [
        *head,
        "--resume",
        SID,
        "--fork-session",
        "--session-id",
        assigned,
        "--",
        "-x",
    ]
    with pytest.raises(RoostError) as err:
        ADAPTER.fork("my session", CTX)
    assert err.value.code == "bad-request"


def test_a_fork_resumed_before_its_first_message_forks_again_under_its_id(tmp_path: Path) -> None:
    """claude writes a fork's file at its first message: until then a resume of the fork would
    find no conversation, so it is forked again, keeping the record's id."""
    ctx = LaunchContext(
        cwd="/p", mode="pty", env={"CLAUDE_CONFIG_DIR": str(tmp_path)}, data_dir="/d"
    )
    new = "0b6f1c7e-7d59-4f6c-9a53-2f0e4c1d8b21"
    again = ADAPTER.resume_fork(new, SID, ctx)
    assert again.argv == ["claude", "--resume", SID, "--fork-session", "--session-id", new]
    assert again.provider_session == new
    (tmp_path / "projects" / "-p").mkdir(parents=True)
    (tmp_path / "projects" / "-p" / f"{new}.jsonl").write_text("{}\n")
    assert ADAPTER.resume_fork(new, SID, ctx).argv == ["claude", "--resume", new]
    home = ClaudeAdapter({"HOME": str(tmp_path / "u")})  # no CLAUDE_CONFIG_DIR: ~/.claude
    plain = LaunchContext(cwd="/p", mode="pty", env={}, data_dir="/d")
    assert "--fork-session" in home.resume_fork(new, SID, plain).argv
    (tmp_path / "u" / ".claude" / "projects" / "-p").mkdir(parents=True)
    (tmp_path / "u" / ".claude" / "projects" / "-p" / f"{new}.jsonl").write_text("{}\n")
    assert home.resume_fork(new, SID, plain).argv == ["claude", "--resume", new]


# -- usage limits ----------------------------------------------------------------------------------

# The capture's limit came at 18:33:17 UTC and reset at 18:34:27; the screen shows "6:34pm (UTC)".
LIMIT_AT = 1796322797.0


@pytest.mark.parametrize("name", ["claude-limit-sub.txt", "claude-limit-sub-shortly.txt"])
def test_a_subscribers_limit_reads_the_reset_and_that_claude_continues_itself(name: str) -> None:
    seen = read_screen(capture(name), now=LIMIT_AT)
    assert (seen.state, seen.reason) == (ATTENTION, "rate-limit")
    # the end of the minute shown: never before the limit lifts (18:34:27)
    assert seen.reset_at == datetime(2026, 12, 3, 18, 35, tzinfo=UTC).timestamp()
    assert seen.self_continues  # "Continuing automatically at 6:34pm · Esc to cancel"
    assert seen.to_wire()["reset_at"] == seen.reset_at and seen.to_wire()["self_continues"]


def test_an_api_keys_limit_shows_no_reset() -> None:
    seen = read_screen(capture("claude-limit-api.txt"), now=LIMIT_AT)
    assert (seen.state, seen.reason, seen.reset_at) == (ATTENTION, "rate-limit", None)
    assert not seen.self_continues and "reset_at" not in seen.to_wire()
    assert "Request rejected (429)" in seen.detail


def test_a_reset_shown_without_a_zone_is_in_the_local_time() -> None:
    screen = box_screen("\u276f go", "Claude usage limit reached. Your limit will reset at 3pm")
    now = datetime(2026, 12, 3, 13, 0).astimezone().timestamp()
    seen = read_screen(screen, now=now)
    assert seen.reset_at == datetime(2026, 12, 3, 15, 1).astimezone().timestamp()
    assert not seen.self_continues


# -- the per-record settings file: hooks and the status line ---------------------------------------


def hooked_ctx(tmp_path: Path, mode: str = "pty") -> LaunchContext:
    home = tmp_path / "claude-home"
    home.mkdir(exist_ok=True)
    session = tmp_path / "sessions" / "r0123456789"
    env = {"CLAUDE_CONFIG_DIR": str(home)}
    return LaunchContext(str(tmp_path), mode, env, "/d", session_dir=str(session))


def test_fresh_and_resume_name_the_records_settings_file(tmp_path: Path) -> None:
    from roost import hooks

    ctx = hooked_ctx(tmp_path)
    path = os.path.join(ctx.session_dir, "claude-settings.json")
    fresh, resumed = ADAPTER.fresh(ctx), ADAPTER.resume(SID, ctx)
    assert fresh.argv == ["claude", "--settings", path, "--session-id", fresh.provider_session]
    assert resumed.argv == ["claude", "--settings", path, "--resume", SID]
    assert fresh.files == resumed.files and list(fresh.files) == ["claude-settings.json"]
    settings = json.loads(fresh.files["claude-settings.json"])
    command = hooks.hook_command("claude")
    assert set(settings["hooks"]) == set(hooks.CLAUDE_EVENTS)
    for event in hooks.CLAUDE_EVENTS:
        (group,) = settings["hooks"][event]
        assert group["hooks"] == [{"type": "command", "command": command, "timeout": 10}]
    line = settings["statusLine"]
    assert line["type"] == "command" and line["command"] == hooks.hook_command("claude-statusline")
    assert fresh.to_wire()["files"] == fresh.files


def test_no_settings_file_without_a_session_directory_or_in_stream_mode(tmp_path: Path) -> None:
    assert ADAPTER.fresh(CTX).files == {} and "--settings" not in ADAPTER.resume(SID, CTX).argv
    assert "files" not in ADAPTER.fresh(CTX).to_wire()
    stream = hooked_ctx(tmp_path, mode="stream")
    assert ADAPTER.fresh(stream).files == {}
    assert "--settings" not in ADAPTER.turn(SID, "hi", stream, first=True).argv


@pytest.mark.parametrize("where", ["home", ".claude/settings.json", ".claude/settings.local.json"])
def test_the_users_own_status_line_is_kept(tmp_path: Path, where: str) -> None:
    ctx = hooked_ctx(tmp_path)
    path = tmp_path / "claude-home" / "settings.json" if where == "home" else tmp_path / where
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"statusLine": {"type": "command", "command": "mine"}}))
    settings = json.loads(ADAPTER.fresh(ctx).files["claude-settings.json"])
    assert "statusLine" not in settings and set(settings["hooks"]) == {
        "SessionStart", "UserPromptSubmit", "Stop", "StopFailure", "Notification",
        "PermissionRequest", "SessionEnd",
    }  # fmt: skip
    path.write_text("{not json")
    assert "statusLine" in json.loads(ADAPTER.fresh(ctx).files["claude-settings.json"])


def test_the_exit_hint_with_the_settings_file_names_the_conversation() -> None:
    """claude 2.1.332 repeats ``--settings FILE`` in its exit hint when the line is short."""
    hint = f"Resume this session with:\nclaude --settings /tmp/s/settings.json --resume {SID}"
    assert ADAPTER.discover_identity(hint, CTX, since=0) == SID
    assert ADAPTER.classify(hint, exited=False).state == EXITED
