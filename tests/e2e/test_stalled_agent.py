"""An agent that stops reading its terminal: the supervisor must go on serving.

Typing into a PTY whose agent does not read blocks once the terminal's input buffer is full (a
few KiB). What was accepted is typed as the agent reads again, in order; meanwhile the session's
screen, other sessions and ``stop`` are answered as ever.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from roost.client.client import Client
from roost.wire.errors import RoostError
from roost.wire.limits import INPUT_PENDING_MAX
from tests.e2e.conftest import Node, alive, wait_for


def deaf(node: Node, *spawn: str) -> tuple[str, dict[str, Any]]:
    """A live echo session named ``deaf`` on a node now up: its id and ``active`` facts."""
    node.up()
    rid = node.run("spawn", "echo", "--name", "deaf", *spawn)["record"]["id"]
    wait_for(lambda: node.record("deaf")["state"] == "live", what="deaf live")
    return rid, node.record("deaf")["active"]


def test_a_paste_to_an_agent_that_reads_nothing_does_not_stall_its_supervisor(node: Node) -> None:
    rid, active = deaf(node)
    agent, client = active["agent_pid"], node.client()
    os.kill(agent, signal.SIGSTOP)
    try:
        lines = [f"line {i} " + "x" * 1000 for i in range(40)]  # 40 KB: ten times a tty's buffer
        for line in lines:
            reply = client.call("session.prompt", {"id": rid, "text": line}, timeout=10.0)
            assert reply["accepted"] is True
        started = time.monotonic()
        screen = client.call("session.show", {"id": rid, "screen": True}, timeout=10.0)
        assert screen["screen"] is not None and time.monotonic() - started < 5.0
    finally:
        os.kill(agent, signal.SIGCONT)

    # read again: every accepted line is typed, in order, and answered
    def answered() -> bool:
        shown = client.call("session.show", {"id": rid, "screen": True}, timeout=10.0)
        return "".join(("echo: " + lines[-1]).split()) in "".join(shown["screen"].split())

    wait_for(answered, timeout=30, what="the last line answered")
    client.close()
    transcript = (node.state_dir / "sessions" / rid / "transcript.bin").read_bytes()
    answers = [transcript.find(f"echo: line {i} ".encode()) for i in range(len(lines))]
    assert -1 not in answers and answers == sorted(answers)  # each typed once, in order


def test_a_session_whose_agent_reads_nothing_still_stops(node: Node) -> None:
    rid, active = deaf(node, "--env", "ROOST_ECHO_IGNORE_TERM=1")
    client = node.client()
    os.kill(active["agent_pid"], signal.SIGSTOP)
    for i in range(20):
        client.call("session.prompt", {"id": rid, "text": f"{i} " + "y" * 2000}, timeout=10.0)
    client.close()
    started = time.monotonic()
    doc = node.run("stop", "deaf", timeout=60)
    assert doc["record"]["state"] == "dormant"
    assert time.monotonic() - started < 20.0  # the grace, then SIGKILL: not a lost supervisor
    assert "lost" not in (doc["record"].get("last_exit") or {})
    wait_for(lambda: not alive(active["agent_pid"]), 10, "the agent to end")
    wait_for(lambda: not alive(active["pid"]), 10, "the supervisor to end")


def test_input_past_the_limit_unread_is_refused_and_nothing_of_it_committed(node: Node) -> None:
    rid, active = deaf(node)
    agent, client = active["agent_pid"], node.client()
    line = "z" * 8192  # a tty keeps a few KiB of lines: the rest of each waits in the supervisor
    accepted, refused = 0, None
    os.kill(agent, signal.SIGSTOP)
    try:
        for _ in range(200):
            try:
                client.call("session.prompt", {"id": rid, "text": line}, timeout=10.0)
            except RoostError as err:
                refused = err
                break
            accepted += 1
        assert refused is not None and refused.code == "agent-not-reading"
        assert refused.detail["limit"] == INPUT_PENDING_MAX
        # 256 KiB of 8 KiB lines waiting in the supervisor, beside what the terminal took (a
        # Linux pty holds 64 KiB and its line discipline 4 KiB: 9 lines at most) and what the
        # node handed over before it heard the supervisor's gate (its notice that it is full
        # comes after): the node's own bound on that is another 256 KiB, reached when the
        # supervisor lags on a loaded host (66 lines were seen)
        least = INPUT_PENDING_MAX // len(line)
        assert least <= accepted <= 2 * least + 9, accepted
        typed = [e for e in node.events() if e["kind"] == "session.input" and e["record"] == rid]
        assert len(typed) == accepted
    finally:
        os.kill(agent, signal.SIGCONT)
    # once the agent reads again, input is taken again
    wait_for(
        lambda: _takes(client, rid), timeout=60, what="input taken once the agent read its backlog"
    )
    client.close()


def _takes(client: Client, rid: str) -> bool:
    try:
        client.call("session.key", {"id": rid, "keys": ["enter"]}, timeout=10.0)
    except RoostError as err:
        if err.code != "agent-not-reading":
            raise
        return False
    return True


def test_a_stopped_agent_ends_on_its_sigterm_not_after_the_grace(node: Node) -> None:
    """SIGTERM is followed by SIGCONT: an agent stopped (SIGSTOP, a ^Z) takes its SIGTERM at once
    instead of being SIGKILLed once the grace is over."""
    _, active = deaf(node)
    os.kill(active["agent_pid"], signal.SIGSTOP)
    doc = node.run("stop", "deaf", "--grace-ms", "30000", timeout=60)
    assert doc["record"]["state"] == "dormant"
    assert doc["record"]["last_exit"] == {"code": None, "signal": signal.SIGTERM}
