"""Typed input the node commits itself (the supervisor's input gate, docs/PROTOCOL.md section 9):
accepted without waiting on the supervisor, typed by it in order and once, across a stopped
supervisor and a daemon killed with hand-overs still on their way."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from roost.wire.errors import RoostError
from tests.e2e.conftest import (
    Node,
    alive,
    commit_as_the_daemon_dies,
    sigkill,
    stopped,
    wait_for,
)


def _inputs(node: Node) -> dict[str, Any]:
    inputs: dict[str, Any] = node.run("node", "status")["inputs"]
    return inputs


def _gated_session(node: Node) -> tuple[str, int]:
    """A live echo session whose gate is open: its record id and supervisor's pid."""
    rid = node.run("spawn", "echo", "--name", "s")["record"]["id"]
    node.wait_screen(rid, "echo-ready>")
    wait_for(lambda: _inputs(node)["gates_open"] == 1, 10, "the supervisor to open its gate")
    pid = node.run("node", "status")["actors"][f"session/{rid}"]["pid"]
    return rid, pid


def _typed(node: Node, rid: str, texts: list[str]) -> list[int]:
    data = node.run("transcript", rid)["data"]
    return [data.count(f"echo: {t}") for t in texts]


def test_a_stopped_supervisor_does_not_hold_up_acceptance_and_types_in_order(node: Node) -> None:
    node.up()
    rid, supervisor = _gated_session(node)
    texts = [f"while stopped {i}" for i in range(5)]
    os.kill(supervisor, signal.SIGSTOP)
    try:
        with node.client() as client:
            for text in texts:
                started = time.monotonic()
                reply = client.call("session.prompt", {"id": rid, "text": text}, timeout=5)
                assert reply["accepted"] is True and time.monotonic() - started < 3
        assert _inputs(node)["handing_over"] >= 1  # committed, waiting for the supervisor
    finally:
        os.kill(supervisor, signal.SIGCONT)
    node.wait_screen(rid, f"echo: {texts[-1]}", timeout=20)
    wait_for(lambda: _inputs(node)["handing_over"] == 0, 10, "every input handed over")
    assert _typed(node, rid, texts) == [1] * len(texts)
    data = node.run("transcript", rid)["data"]
    positions = [data.index(f"echo: {t}") for t in texts]
    assert positions == sorted(positions), "typed out of order"
    events = node.run("events", "--id", rid)["events"]
    logged = [e["data"]["text"] for e in events if e["kind"] == "session.input"]
    assert logged == texts


def test_hand_overs_on_their_way_when_the_daemon_dies_are_typed_once(node: Node) -> None:
    """The supervisor is stopped with the node's hand-overs in its socket when the daemon is
    SIGKILLed: it may read them as it runs again, and its catch-up with the next node reads the
    same inputs from the log; each is typed once, in order, before what is typed next."""
    node.up()
    rid, supervisor = _gated_session(node)
    texts = [f"in flight {i}" for i in range(3)]
    os.kill(supervisor, signal.SIGSTOP)
    try:
        with node.client() as client:
            for text in texts:
                client.call("session.prompt", {"id": rid, "text": text}, timeout=5)
        daemon = node.pid()
        sigkill(daemon)
        wait_for(lambda: not alive(daemon), 10, "the daemon to die")
    finally:
        os.kill(supervisor, signal.SIGCONT)
    node.up()
    after = "typed after the restart"
    wait_for(lambda: _inputs(node)["gates_open"] == 1, 20, "the gate open again")
    node.run("prompt", rid, after)
    node.wait_screen(rid, f"echo: {after}", timeout=20)
    assert _typed(node, rid, [*texts, after]) == [1, 1, 1, 1]
    data = node.run("transcript", rid)["data"]
    positions = [data.index(f"echo: {t}") for t in [*texts, after]]
    assert positions == sorted(positions), "typed out of order"


def test_a_stopping_node_hands_over_what_it_accepted_before_it_exits(node: Node) -> None:
    """`node stop` with prompts accepted and their hand-overs waiting on a stopped supervisor
    (the first in its socket, the others still queued in the node): the node waits for them (a
    few seconds at most) before it exits, so they are typed now, not when a node next runs."""
    node.up()
    rid, supervisor = _gated_session(node)
    daemon = node.pid()
    texts = [f"accepted as the node stops {i}" for i in range(3)]
    os.kill(supervisor, signal.SIGSTOP)
    try:
        for text in texts:
            node.run("prompt", rid, text)
        assert _inputs(node)["handing_over"] == len(texts)
        with node.client() as client:
            assert client.call("node.shutdown", {}, timeout=10)["stopping"] is True
        log = node.state_dir / "logs" / "node.log"
        wait_for(lambda: "node-stopping" in log.read_text(), 10, "the node to begin stopping")
        time.sleep(1.0)  # the fault: the supervisor stays stopped past the node's own stop
        assert alive(daemon), "the node exited with hand-overs left"
    finally:
        os.kill(supervisor, signal.SIGCONT)
    wait_for(lambda: not alive(daemon), 10, "the node to exit")
    transcript = node.state_dir / "sessions" / rid / "transcript.bin"
    wait_for(
        lambda: all(f"echo: {t}".encode() in transcript.read_bytes() for t in texts),
        10,
        "the inputs typed with no node running",
    )
    assert "input-hand-overs-left" not in log.read_text()


def test_inputs_committed_while_the_store_stalls_go_together_once_each(node: Node) -> None:
    """Four clients prompt four sessions while the state store is stopped: the first commit is
    on its way, the other three wait and go together in one request when it answers. Each is
    accepted once, in the log once and typed once."""
    node.up()
    rids = [node.run("spawn", "echo", "--name", f"g{i}")["record"]["id"] for i in range(4)]
    for rid in rids:
        node.wait_screen(rid, "echo-ready>")
    wait_for(lambda: _inputs(node)["gates_open"] == 4, 20, "every supervisor to open its gate")
    store = node.run("node", "status")["actors"]["state"]["pid"]
    before = _inputs(node)
    replies: dict[str, Any] = {}

    def prompt(rid: str) -> None:
        with node.client() as client:
            replies[rid] = client.call(
                "session.prompt", {"id": rid, "text": f"grouped {rid}"}, timeout=30
            )

    senders = [threading.Thread(target=prompt, args=(rid,)) for rid in rids]
    try:
        with stopped(store):  # a few seconds: far inside its heartbeats' 30 s
            for sender in senders:
                sender.start()
            wait_for(lambda: _inputs(node)["committing"] == 4, 20, "four commits on their way")
    finally:
        for sender in senders:
            sender.join(30)
    assert all(replies[rid]["accepted"] is True for rid in rids), replies
    after = _inputs(node)
    assert after["committed"] - before["committed"] == 4
    assert after["commit_requests"] - before["commit_requests"] == 2  # one alone, three together
    for rid in rids:
        node.wait_screen(rid, f"echo: grouped {rid}", timeout=20)
        assert _typed(node, rid, [f"grouped {rid}"]) == [1]
        events = node.run("events", "--id", rid)["events"]
        logged = [e["data"]["text"] for e in events if e["kind"] == "session.input"]
        assert logged == [f"grouped {rid}"]


def test_turn_waits_are_woken_by_the_stores_turn_events(node: Node) -> None:
    """Back-to-back turns, each waited for: every end the state store publishes reaches the
    node's actor as it goes out (the broker's tap), which is what wakes `session.turn.wait`."""
    node.up()
    rid = node.run("spawn", "echo", "--name", "t", "--mode", "stream")["record"]["id"]
    wait_for(lambda: _inputs(node)["gates_open"] == 1, 10, "the supervisor to open its gate")
    tapped = node.run("node", "status")["broker"]["tapped"]
    with node.client() as client:
        for i in range(5):
            turn = client.call("session.turn", {"id": rid, "text": f"turn {i}"}, timeout=10)
            done = client.call(
                "session.turn.wait",
                {"id": rid, "turn": turn["turn"], "timeout_ms": 20_000},
                timeout=30,
            )
            assert done["ended"] is True and done["turn"]["state"] == "completed", done
    assert node.run("node", "status")["broker"]["tapped"] >= tapped + 5
    assert "tap-failed" not in (node.state_dir / "logs" / "node.log").read_text()


def test_a_turn_the_node_began_as_it_died_runs_after_the_restart(node: Node) -> None:
    """The node begins a stream-mode turn (the supervisor's gate is open), the state store
    commits it while the daemon is stopped, and the daemon is SIGKILLed holding the answer: the
    turn is accepted and nobody handed it over. The supervisor's catch-up with the next node
    finds it running and runs it; it completes once, and a retry of its op answers it."""
    status = node.up()
    rid = node.run("spawn", "echo", "--name", "t", "--mode", "stream")["record"]["id"]
    wait_for(lambda: _inputs(node)["gates_open"] == 1, 10, "the supervisor to open its gate")
    store, daemon = status["actors"]["state"]["pid"], node.pid()
    with node.client() as watcher, node.client() as client:
        outcome = commit_as_the_daemon_dies(
            store,
            daemon,
            lambda: client.call(
                "session.turn", {"id": rid, "text": "begun as the node died"}, op="T1", timeout=5
            ),
            lambda: watcher.call("node.status", timeout=10)["inputs"]["committing"] == 1,
            lambda: _turn_rows(node.state_dir / "state.db"),
        )
    assert "reply" not in outcome
    node.up()
    done = node.run("turn", rid, "--wait")
    assert done["turn"]["state"] == "completed", done
    again = node.run("turn", rid, "begun as the node died", "--op", "T1")
    assert again["duplicate"] is True and again["turn"] == done["turn"]["id"]
    assert [t["state"] for t in _turn_rows(node.state_dir / "state.db")] == ["completed"]
    supervisor_log = (node.state_dir / "sessions" / rid / "supervisor.log").read_text()
    assert "turn-caught-up" in supervisor_log


def _turn_rows(db: Path) -> list[dict[str, Any]]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(row) for row in conn.execute("SELECT id, state FROM turns")]


def _agent_read(node: Node, rid: str) -> list[str]:
    """The lines the echo agent read, from its own session file."""
    rec = node.record(rid)
    path = node.state_dir / "providers" / "echo" / "sessions" / f"{rec['provider_session']}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["user"] for line in path.read_text().splitlines() if line.strip()]


def test_a_long_prompt_arrives_whole_or_is_refused_before_its_commit(node: Node) -> None:
    """A prompt of 100 KB on one line: the echo agent reads its terminal byte by byte and gets it
    whole; an agent whose terminal is in canonical mode (which keeps 4095 bytes of a line) has it
    refused, ``line-too-long``, and nothing of it is logged or typed."""
    node.up()
    long = "".join(f"{i:06d} " for i in range(100_000 // 7))
    raw = node.run("spawn", "echo", "--name", "raw", "--wait-ready")["record"]["id"]
    with node.client() as client:
        assert client.call("session.prompt", {"id": raw, "text": long})["accepted"] is True
    assert wait_for(lambda: _agent_read(node, raw), 30, "the agent's line") == [long]

    canon = node.run(
        "spawn", "echo", "--name", "canon", "--env=ROOST_ECHO_CANONICAL=1", "--wait-ready"
    )["record"]["id"]
    wait_for(lambda: _inputs(node)["gates_open"] == 2, 10, "the supervisor to open its gate")
    before = node.events()[-1]["seq"]
    with node.client() as client:
        with pytest.raises(RoostError) as refused:
            client.call("session.prompt", {"id": canon, "text": long})
        lines = "first line\n" + "y" * 4095 + "\r\nlast"  # each line as long as it may be
        with pytest.raises(RoostError) as refused_input:
            client.call("session.input", {"id": canon, "text": "z" * 4096})
        assert client.call("session.prompt", {"id": canon, "text": lines})["accepted"] is True
    assert refused.value.code == "line-too-long" == refused_input.value.code
    assert refused.value.detail == {"record": canon, "limit": 4095, "longest": len(long)}
    wait_for(lambda: len(_agent_read(node, canon)) == 3, 15, "the lines that fit")
    assert _agent_read(node, canon) == ["first line", "y" * 4095, "last"]
    logged = [e for e in node.events(before) if e["kind"] == "session.input"]
    assert [e["data"]["text"] for e in logged] == [lines]  # the refused never reached the log
