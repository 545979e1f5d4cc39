"""Turns under stalls and kills at chosen moments: every accepted turn ends, and ends as it did.

What must hold: a turn whose
``state.turn.begin`` call timed out at the supervisor but was committed by the store later still
ends, and its operation reaches a terminal state; a turn whose provider finished is recorded
``completed`` with its result although the state store was killed (or its supervisor was) between
the delivery of its result line and the delivery of its end.

The moments are chosen with conditions, not sleeps: the echo agent holds a turn after its result
line until the test creates a file (``ROOST_ECHO_HOLD_FILE``), the spool shows what is delivered,
and a stalled peer is a SIGSTOPped process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from roost.actors.supervisor.outbox import pending
from roost.wire.messages import OutboxEntry
from tests.e2e.conftest import Node, log_has, sigkill, stopped, wait_for

ANSWER = "echo: /tool echo kept"


def _held_session(node: Node, tmp_path: Path) -> tuple[dict[str, Any], Path, Path]:
    """A stream echo session whose turns wait after their result line for the file ``release``."""
    release = tmp_path / "release"
    rec = node.run(
        "spawn",
        "echo",
        "--name",
        "s",
        "--mode",
        "stream",
        "--env",
        f"ROOST_ECHO_HOLD_FILE={release}",
    )["record"]
    return rec, node.state_dir / "sessions" / rec["id"], release


def _result_delivered(directory: Path) -> bool:
    """The turn's result line was read (it is in the transcript) and the spool holds nothing
    undelivered: its delivery is done (the agent is held, so nothing follows it yet)."""
    transcript = (directory / "transcript.bin").read_bytes()
    return b'"type": "result"' in transcript and pending(directory) == []


def _spooled_end(directory: Path, turn: str) -> list[OutboxEntry] | None:
    """The undelivered spool entries once the turn's end is among them."""
    entries = pending(directory)
    ends = [e for e in entries if e.get("t") == "turn-end" and e.get("turn") == turn]
    return entries if ends else None


def _serving_again(node: Node, old: int) -> bool:
    status = node.run("node", "status")
    return status["actors"]["state"]["pid"] not in (None, old) and status["records"] is not None


def _assert_completed(node: Node, turn: str, op: str) -> None:
    done = node.run("turn", "s", "--wait", "--wait-timeout", "45", timeout=90)
    assert done["turn"]["id"] == turn
    assert done["turn"]["state"] == "completed", done["turn"]
    assert done["turn"]["result"]["result"] == ANSWER and done["turn"]["result"]["exit"] == 0
    looked_up = node.run("op", op)
    assert looked_up["state"] == "terminal" and looked_up["result"]["status"] == "completed"
    ends = [e for e in done["events"] if e["kind"] == "session.turn"]
    assert len(ends) == 1 and ends[0]["data"]["status"] == "completed"


def test_a_store_killed_between_result_and_turn_end_keeps_the_result(
    node: Node, tmp_path: Path
) -> None:
    """The end's first delivery meets a stalled store that is then SIGKILLed; the
    retry to the restarted store must still carry the turn's result facts."""
    status = node.up()
    _, directory, release = _held_session(node, tmp_path)
    turn = node.run("turn", "s", "/tool echo kept", "--op", "F3")["turn"]
    wait_for(lambda: _result_delivered(directory), 20, "the result line to be delivered")
    store = status["actors"]["state"]["pid"]
    with stopped(store):
        release.touch()
        spooled = wait_for(lambda: _spooled_end(directory, turn), 20, "the turn's end spooled")
        assert [e["t"] for e in spooled] == ["turn-end"]
        sigkill(store)  # the end's delivery was under way: the store dies with it
    wait_for(lambda: _serving_again(node, store), 30, "a new state store to serve")
    _assert_completed(node, turn, "F3")
    assert node.run("node", "status")["actors"]["state"]["restarts"] == 1


def test_a_supervisor_killed_before_its_turn_end_was_delivered(node: Node, tmp_path: Path) -> None:
    """The supervisor dies with the turn's end (and a line before it) in its spool,
    after the result line was delivered; the node's salvage records the turn as it ended."""
    status = node.up()
    rec, directory, release = _held_session(node, tmp_path)
    turn = node.run("turn", "s", "/tool echo kept", "--op", "F4")["turn"]
    wait_for(lambda: _result_delivered(directory), 20, "the result line to be delivered")
    adapters = status["actors"]["adapters"]["pid"]
    with stopped(adapters):  # the stderr line after the release waits for its parse
        release.write_text("echo: released\n")
        spooled = wait_for(lambda: _spooled_end(directory, turn), 20, "the turn's end spooled")
        assert [e["t"] for e in spooled] == ["line", "turn-end"]
        sigkill(rec["active"]["pid"])
    lost = node.wait_state("s", "dormant", timeout=20)
    assert lost["last_exit"] == {"lost": "supervisor-gone"}
    _assert_completed(node, turn, "F4")
    lost_events = [e for e in node.events() if e["kind"] == "session.lost"]
    assert lost_events[-1]["data"]["interrupted_turns"] == []
    released = [e for e in node.events() if e["kind"] == "session.stderr"]
    assert [e["data"]["line"] for e in released] == ["echo: released"]


def test_a_supervisor_killed_while_its_provider_had_finished_is_interrupted(
    node: Node, tmp_path: Path
) -> None:
    """The other moment: the result line is delivered, the process has not exited
    (no end in the spool) when the supervisor dies. The turn is interrupted, never completed by
    invention, and keeps the result the provider gave."""
    node.up()
    rec, directory, _ = _held_session(node, tmp_path)
    turn = node.run("turn", "s", "/tool echo kept", "--op", "F4b")["turn"]
    wait_for(lambda: _result_delivered(directory), 20, "the result line to be delivered")
    sigkill(rec["active"]["pid"])
    node.wait_state("s", "dormant", timeout=20)
    ended = node.run("turn", "s", "--wait")["turn"]
    assert ended["id"] == turn and ended["state"] == "interrupted"
    assert ended["result"]["reason"] == "supervisor-gone"
    assert ended["result"]["result"] == ANSWER
    assert node.run("op", "F4b")["state"] == "interrupted"


def test_a_turn_end_left_in_the_spool_of_a_stopped_session_is_delivered(
    node: Node, tmp_path: Path
) -> None:
    """The node's side: the session is stopped (dormant) while its supervisor still
    holds the turn's end undelivered, and the supervisor dies. No supervisor owns the running
    turn any more: the node's sweep delivers the spool, and the turn ends as it did."""
    status = node.up()
    rec, directory, release = _held_session(node, tmp_path)
    turn = node.run("turn", "s", "/tool echo kept", "--op", "F1b")["turn"]
    wait_for(lambda: _result_delivered(directory), 20, "the result line to be delivered")
    with stopped(status["actors"]["adapters"]["pid"]):
        release.write_text("echo: released\n")
        wait_for(lambda: _spooled_end(directory, turn), 20, "the turn's end spooled")
        assert node.run("stop", "s")["record"]["state"] == "dormant"
        assert _spooled_end(directory, turn), "the stopped supervisor still holds the end"
        sigkill(rec["active"]["pid"])
    _assert_completed(node, turn, "F1b")
    released = [e for e in node.events() if e["kind"] == "session.stderr"]
    assert [e["data"]["line"] for e in released] == ["echo: released"]  # delivered once
    assert node.record("s")["state"] == "dormant"


def _roost(node: Node, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "roost", "--json", *args],
        env=node.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _running_turns(db: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM turns WHERE state='running'")]


def test_a_turn_begin_that_timed_out_but_was_committed_still_ends(node: Node) -> None:
    """The state store stalls past the node's deadline on ``state.turn.begin`` and resumes: the
    store commits the turn late. The turn must end, its op reach ``terminal``, and a retry with
    the op answer that outcome."""
    status = node.up()
    rec = node.run("spawn", "echo", "--name", "s", "--mode", "stream")["record"]
    store = status["actors"]["state"]["pid"]
    wait_for(lambda: node.run("node", "status")["inputs"]["gates_open"] == 1, 10, "the gate")
    node_log = node.state_dir / "logs" / "node.log"
    os.kill(store, signal.SIGSTOP)
    client = _roost(node, "turn", "s", "late commit", "--op", "F1")
    try:
        wait_for(
            lambda: log_has(node_log, "turn-begin-unanswered"),
            40,
            "the node's deadline on state.turn.begin to pass",
        )
    finally:
        os.kill(store, signal.SIGCONT)
        out, _ = client.communicate(timeout=60)
    assert rec["mode"] == "stream"
    first = json.loads(out.strip().splitlines()[-1])
    assert first.get("accepted") or first["error"]["code"] in ("timeout", "unavailable"), first

    wait_for(lambda: node.run("op", "F1")["state"] == "terminal", 40, "the op to be terminal")
    looked_up = node.run("op", "F1")
    assert looked_up["result"]["status"] == "completed", looked_up
    turn = looked_up["result"]["turn"]
    again = node.run("turn", "s", "late commit", "--op", "F1")
    assert again["duplicate"] and again["op"]["state"] == "terminal" and again["turn"] == turn
    done = node.run("turn", "s", "--wait")
    assert done["turn"]["id"] == turn and done["turn"]["state"] == "completed"
    inputs = [e for e in node.events() if e["kind"] == "session.input"]
    assert [e["data"]["turn"] for e in inputs] == [turn]  # accepted once, run once
    # the session takes turns again, and a stopped node leaves no turn running
    node.run("turn", "s", "after", "--wait")
    assert node.run("node", "stop")["stopped"]
    assert _running_turns(node.state_dir / "state.db") == []
