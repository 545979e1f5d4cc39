"""The CLI's edge cases and its progress notes, driven as a user
would: the real CLI, a real node, the echo agent."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Node, sigkill, wait_for

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
