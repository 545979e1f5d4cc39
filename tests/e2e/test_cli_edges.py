"""The CLI's edge cases and its progress notes, driven as a user
would: the real CLI, a real node, the echo agent."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Node, sigkill, stopped, wait_for

pytestmark = pytest.mark.timeout(90)


def text(node: Node, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``roost ARGS`` as a person types it: text output, stdout not a terminal."""
    return subprocess.run(
        [sys.executable, "-m", "roost", *args],
        env=node.env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def timed(node: Node, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.monotonic()
    proc = text(node, *args)
    return time.monotonic() - started, proc


def test_a_killed_node_is_reported_at_once_with_the_fix(node: Node) -> None:
    """``ls`` and ``node status`` after a SIGKILL of the daemon say at once that the node is not
    running and how to fix it, without waiting out a 15-s timeout; ``node up`` starts at once."""
    node.up()
    rid = node.run("spawn", "echo", "--name", "kept")["record"]["id"]
    sigkill(node.pid())
    for args in (("ls",), ("node", "status")):
        took, proc = timed(node, *args)
        assert took < 3.0, (args, took)
        assert proc.returncode == 1
        assert "error: node-not-running" in proc.stderr, proc.stderr
        assert str(node.state_dir) in proc.stderr and "`roost node up`" in proc.stderr
    err = node.error("ls")
    assert err["detail"]["fix"] == "roost node up" and err["detail"]["state_dir"] == str(
        node.state_dir
    )
    took, proc = timed(node, "node", "up")
    assert proc.returncode == 0, proc.stderr
    assert took < 6.0, took  # 15.75 s before; a restart itself takes 1-3 s on a loaded machine
    assert node.wait_state(rid, "live")["generation"] == 1


def test_node_not_running_names_a_state_dir_given_on_the_command_line(
    node: Node, tmp_path: Path
) -> None:
    other = tmp_path / "elsewhere"
    err = node.error("--state-dir", str(other), "ls")
    assert err["code"] == "node-not-running"
    assert err["detail"]["fix"] == f"roost --state-dir {other} node up"
    assert str(other) in err["message"]


def test_turn_wait_shows_output_as_it_arrives(node: Node, tmp_path: Path) -> None:
    """Progress: ``turn --wait`` printed nothing until the turn ended."""
    node.up()
    hold = tmp_path / "release"
    node.run(
        "spawn", "echo", "--mode", "stream", "--name", "s", "--env", f"ROOST_ECHO_HOLD_FILE={hold}"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "roost", "turn", "s", "/tool echo hi", "--wait"],
        env=node.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    stdout = proc.stdout
    assert stdout is not None

    def read() -> None:
        for line in stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        seen: list[str] = []
        while "echo: /tool echo hi\n" not in seen:
            seen.append(lines.get(timeout=15))
        assert proc.poll() is None  # shown while the turn still runs (held after its result)
        assert seen[:3] == [
            "> /tool echo hi\n",
            'tool Bash {"command": "echo hi"}\n',
            "  result: hi\n",
        ]
        hold.write_text("")
        assert proc.wait(15) == 0
        rest = [lines.get(timeout=5) for _ in range(1)]
        assert rest[0].startswith("turn ") and rest[0].endswith(": completed\n")
    finally:
        proc.kill()
        proc.wait(10)


def interrupted(node: Node, *args: str, when: str | None) -> subprocess.CompletedProcess[str]:
    """``roost ARGS`` sent SIGINT (Ctrl-C) once ``when`` is on its stdout or stderr (None: after
    two seconds)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "roost", *args],
        env=node.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    said: queue.Queue[str] = queue.Queue()

    def read(pipe: Any) -> None:
        for line in pipe:
            said.put(line)

    for pipe in (proc.stdout, proc.stderr):
        threading.Thread(target=read, args=(pipe,), daemon=True).start()
    seen: list[str] = []
    try:
        while when is not None and not any(when in line for line in seen):
            seen.append(said.get(timeout=15))
        if when is None:
            time.sleep(2)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(15)
    finally:
        proc.kill()
        proc.wait(10)
    time.sleep(0.2)  # the reader threads' last lines
    while not said.empty():
        seen.append(said.get())
    return subprocess.CompletedProcess(args, code, "".join(seen), "".join(seen))


def test_ctrl_c_in_turn_wait_says_the_turn_goes_on(node: Node, tmp_path: Path) -> None:
    """Ctrl-C in ``turn --wait`` stops the waiting, not the turn, and says how to follow it."""
    node.up()
    hold = tmp_path / "release"
    env = f"ROOST_ECHO_HOLD_FILE={hold}"
    rid = node.run("spawn", "echo", "--mode", "stream", "--name", "s", "--env", env)["record"]["id"]
    proc = interrupted(node, "turn", "s", "work", "--wait", "--op", "o-1", when="echo: work")
    assert proc.returncode == 130, proc.stdout
    assert "Aborted!" not in proc.stdout and "Traceback" not in proc.stdout, proc.stdout
    assert "goes on" in proc.stdout, proc.stdout
    assert f"roost events --follow --id {rid} --after" in proc.stdout, proc.stdout
    assert "roost turn s --wait" in proc.stdout and "roost op o-1" in proc.stdout, proc.stdout
    proc = interrupted(node, "--json", "turn", "s", "--wait", when=None)
    assert proc.returncode == 130
    err = json.loads(proc.stdout.strip().splitlines()[-1])["error"]
    assert err["code"] == "interrupted" and err["detail"]["record"] == rid, err
    hold.write_text("")
    done = node.run("turn", "s", "--wait")  # the turn went on
    assert done["turn"]["state"] == "completed" and done["turn"]["text"] == "work", done


def test_ctrl_c_in_attach_waiting_for_the_node_says_what_goes_on(node: Node) -> None:
    """Ctrl-C while ``attach`` waits for a node that does not answer says the session goes on
    and how to see it, instead of click's ``Aborted!``."""
    node.up()
    rid = node.run("spawn", "echo", "--name", "a")["record"]["id"]
    node.wait_screen(rid, "echo-ready>")
    with stopped(node.pid()):
        proc = interrupted(node, "attach", "a", when=None)
    assert proc.returncode == 130, proc.stdout
    assert "Aborted!" not in proc.stdout and "Traceback" not in proc.stdout, proc.stdout
    assert "goes on" in proc.stdout and "roost attach a" in proc.stdout, proc.stdout


def test_a_failed_turn_exits_non_zero_and_says_why(node: Node) -> None:
    """``turn --wait`` of a failed turn exits non-zero and says why, in text as in --json."""
    node.up()
    node.run("spawn", "echo", "--mode", "stream", "--name", "f", "--env", "ROOST_ECHO_FAIL=1")
    proc = text(node, "turn", "f", "hello", "--wait")
    assert proc.returncode == 3
    assert ": failed: echo failed on purpose (exit 1)" in proc.stderr, proc.stderr
    doc_proc = text(node, "--json", "turn", "f", "again", "--wait")
    assert doc_proc.returncode == 3
    doc = json.loads(doc_proc.stdout)
    assert doc["turn"]["state"] == "failed" and doc["events"][-1]["kind"] == "session.turn"
    assert text(node, "turn", "f", "--wait").returncode == 3  # the latest turn, waited on again


def test_stop_of_a_busy_stream_session_says_what_it_waits_for(node: Node, tmp_path: Path) -> None:
    node.up()
    env = [f"ROOST_ECHO_HOLD_FILE={tmp_path / 'never'}", "ROOST_ECHO_IGNORE_TERM=1"]
    rid = node.run("spawn", "echo", "--mode", "stream", "--env", env[0], "--env", env[1])["record"][
        "id"
    ]
    node.run("turn", rid, "work")
    took, proc = timed(node, "--json", "stop", rid, "--grace-ms", "1500")
    assert took > 1.0
    assert f"roost: waiting for {rid} to stop (SIGTERM; SIGKILL after 1.5 s)" in proc.stderr
    assert json.loads(proc.stdout)["record"]["state"] == "dormant"  # stdout: one JSON document


def test_typos_get_a_suggestion(node: Node) -> None:
    """A mistyped name or provider gets a suggestion, not a bare not-found / unknown-provider."""
    node.up()
    rid = node.run("spawn", "echo", "--name", "shepherd")["record"]["id"]
    err = node.error("show", "shepard")
    assert err["code"] == "not-found" and err["detail"]["suggestions"] == ["shepherd"]
    assert "did you mean 'shepherd'?" in err["message"]
    assert node.error("prompt", rid[:-2], "x")["detail"]["suggestions"] == [rid]
    proc = text(node, "spawn", "ecoh")
    assert "did you mean 'echo'?" in proc.stderr and proc.returncode == 1


def test_errors_name_what_was_typed_and_say_the_next_step(node: Node) -> None:
    """An error about a record the user named by its name says that name (beside the record
    id) and the command that comes next; a mistyped key or command gets a suggestion."""
    node.up()
    rid = node.run("spawn", "echo", "--name", "Fix Login!")["record"]["id"]
    node.wait_screen(rid, "echo-ready>")
    err = node.error("key", rid, "entr")
    assert err["code"] == "bad-request" and err["detail"]["suggestions"] == ["enter"]
    assert "did you mean 'enter'?" in err["message"] and "['" not in err["message"], err
    err = node.error("resume", "Fix Login!")
    assert err["code"] == "session-record-busy" and "Fix Login!" in err["message"], err
    node.run("stop", rid)
    for args in (("prompt", "Fix Login!", "hi"), ("attach", "Fix Login!")):
        err = node.error(*args)
        assert err["code"] == "session-not-live", err
        assert err["message"].startswith(f"Fix Login! ({rid}) is dormant"), err
        assert err["detail"]["fix"] == "roost resume 'Fix Login!'", err
        assert "resume it with `roost resume 'Fix Login!'`" in err["message"], err
    said = text(node, "prompt", "Fix Login!", "hi").stderr
    assert "roost resume 'Fix Login!'" in said, said
    proc = text(node, "sapwn", "echo")
    assert proc.returncode == 2 and "Did you mean 'spawn'?" in proc.stderr, proc.stderr


def test_a_name_that_is_or_looks_like_a_record_id_is_refused(node: Node) -> None:
    """A name that is (or looks like) a record id would hide the record it names, or be
    reachable only by its own id: refused, on spawn and on rename."""
    node.up()
    rid = node.run("spawn", "echo")["record"]["id"]
    for name in (rid, "r5fd32c946a", "R5FD32C946A"):
        err = node.error("spawn", "echo", "--name", name)
        assert err["code"] == "name-looks-like-id" and err["detail"]["field"] == "name", err
    other = node.run("spawn", "echo", "--name", "ok")["record"]["id"]
    assert node.error("rename", other, "r0123456789")["code"] == "name-looks-like-id"
    assert len(node.run("ls")["records"]) == 2
    assert node.run("spawn", "echo", "--name", "r2d2")["record"]["name"] == "r2d2"


def test_ctrl_c_in_the_echo_agent_is_a_new_prompt(node: Node) -> None:
    """Ctrl-C in the echo agent gives a new prompt, not a Python traceback and an ended session."""
    node.up()
    rid = node.run("spawn", "echo")["record"]["id"]
    node.wait_screen(rid, "echo-ready>")
    node.run("send", rid, "half a line")
    node.wait_screen(rid, "half a line")
    node.run("key", rid, "interrupt")
    node.run("prompt", rid, "after")
    screen = node.wait_screen(rid, "echo: after")
    assert "Traceback" not in screen and "KeyboardInterrupt" not in screen
    assert "echo: half a line" not in screen  # the interrupted line was dropped
    assert node.record(rid)["state"] == "live"


def test_ls_and_show_text(node: Node) -> None:
    """``ls`` never cuts the provider session id (off a terminal too), long names never wrap the
    header, and ``show`` prints no Python reprs."""
    node.up()
    long_name = "a long name that people give their sessions when they have many of them"
    rec = node.run("spawn", "echo", "--name", long_name)["record"]
    lines = text(node, "ls").stdout.splitlines()
    assert lines[0].split() == [
        "ID",
        "NAME",
        "PROVIDER",
        "MODE",
        "STATE",
        "GEN",
        "PROVIDER",
        "SESSION",
    ]
    assert rec["provider_session"] in lines[1] and long_name in lines[1]
    node.run("stop", rec["id"])
    shown = text(node, "show", rec["id"]).stdout
    assert "{'" not in shown and "None" not in shown
    assert "last exit:        killed by signal" in shown or "exited with code" in shown
    assert "--op" not in text(node, "ls", "--help").stdout


def test_make_demo_shows_ls_and_attach_and_ends_with_try_it_yourself(node: Node) -> None:
    """``make demo`` shows ``ls`` and ``attach``, ends with what to try, and leaves no process."""
    proc = subprocess.run(
        [sys.executable, "-m", "roost.demo"],
        env=node.env,
        capture_output=True,
        text=True,
        timeout=80,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "$ roost ls" in out and "PROVIDER SESSION" in out
    assert "$ roost attach shepherd" in out and "detached; " in out
    tail = out[out.index("now try it yourself") :]
    for command in ("roost node up", "roost spawn echo", "roost ls", "roost attach"):
        assert command in tail
    wait_for(lambda: not node.processes(), 20, "the demo's processes to end")


def test_node_auto_and_fleet_are_for_a_hub(node: Node) -> None:
    """``--node auto`` (the hub picks) and ``roost fleet`` said to a node, and ``auto`` given
    to any command but spawn, are refused with what to do; nothing is spawned."""
    node.up()
    for args, says in (
        (("--node", "auto", "spawn", "echo"), "--node auto is for a hub (--hub ENDPOINT)"),
        (("fleet",), "roost fleet is a hub's view"),
        (("--node", "auto", "ls"), "--node auto is spawn's"),
    ):
        err = node.error(*args)
        assert err["code"] == "bad-request" and says in err["message"], (args, err)
    assert node.run("ls")["records"] == []
