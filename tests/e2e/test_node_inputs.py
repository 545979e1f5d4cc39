"""Typed input the node commits itself (the supervisor's input gate, docs/PROTOCOL.md section 9):
accepted without waiting on the supervisor, typed by it in order and once, across a stopped
supervisor and a daemon killed with hand-overs still on their way."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from tests.e2e.conftest import Node, alive, sigkill, wait_for


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
