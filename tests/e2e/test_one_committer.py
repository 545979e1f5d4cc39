"""Every input and every turn begin is checked and committed in one place: the node. These are
the ways a second, faster path broke that promise, each tried on a real node: an operation id
repeated on another record, input of the wrong mode, a repeated forget, a supervisor known dead.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from roost.wire.errors import RoostError
from tests.e2e.conftest import TURN_KINDS, Node, sigkill, wait_for


def _inputs(node: Node) -> dict[str, Any]:
    inputs: dict[str, Any] = node.run("node", "status")["inputs"]
    return inputs


def _spawn(node: Node, name: str, mode: str) -> str:
    rid: str = node.run("spawn", "echo", "--name", name, "--mode", mode)["record"]["id"]
    return rid


def _gates(node: Node, count: int) -> None:
    wait_for(lambda: _inputs(node)["gates_open"] == count, 15, f"{count} gates open")


def _kinds(node: Node, rid: str) -> list[tuple[str, Any]]:
    events = node.run("events", "--id", rid)["events"]
    return [(e["kind"], (e.get("data") or {}).get("turn")) for e in events]


def test_a_turns_op_id_repeated_on_another_record_runs_nothing_there(node: Node) -> None:
    """`session.turn {id: a}` with op X, then at once `session.turn {id: b}` with op X: the repeat
    answers the first outcome (a's turn, a's record) and b's agent runs nothing."""
    node.up()
    a, b = _spawn(node, "a", "stream"), _spawn(node, "b", "stream")
    _gates(node, 2)
    with node.client() as client:
        for i in range(5):
            op = f"op-twice-{i}"
            first = client.call("session.turn", {"id": a, "text": f"first {i}"}, op=op)
            again = client.call("session.turn", {"id": b, "text": f"other {i}"}, op=op)
            assert again["duplicate"] is True and again["turn"] == first["turn"], again
            assert again["record"] == a, again
            done = client.call(
                "session.turn.wait", {"id": a, "turn": first["turn"], "timeout_ms": 20_000}
            )
            assert done["turn"]["state"] == "completed", done
        # b's own turn after them: its end comes after anything the repeats could have run
        own = client.call("session.turn", {"id": b, "text": "b's own"})
        client.call("session.turn.wait", {"id": b, "turn": own["turn"], "timeout_ms": 20_000})
    turns_on_b = {t for k, t in _kinds(node, b) if k in TURN_KINDS}
    assert turns_on_b == {own["turn"]}, _kinds(node, b)
    ends = [t for k, t in _kinds(node, a) if k == "session.turn"]
    assert len(ends) == 5 and len(set(ends)) == 5, _kinds(node, a)
    outputs = [t for k, t in _kinds(node, a) if k == "session.output"]
    assert len(outputs) == 5, _kinds(node, a)


@pytest.mark.parametrize("method", ["session.prompt", "session.input", "session.key"])
def test_typed_input_to_a_stream_record_is_refused_and_not_logged(node: Node, method: str) -> None:
    node.up()
    rid = _spawn(node, "s", "stream")
    _gates(node, 1)
    body: dict[str, Any] = {"id": rid, "text": "hello"}
    if method == "session.key":
        body = {"id": rid, "keys": ["enter"]}
    with node.client() as client, pytest.raises(RoostError) as err:
        client.call(method, body, op="wrong-mode")
    assert err.value.code == "bad-request" and err.value.detail.get("field") == "mode"
    assert "session.input" not in [k for k, _ in _kinds(node, rid)]
    assert node.run("op", "wrong-mode")["state"] == "unknown"


def test_a_turn_to_a_pty_record_is_refused_and_not_logged(node: Node) -> None:
    node.up()
    rid = _spawn(node, "p", "pty")
    node.wait_screen(rid, "echo-ready>")
    _gates(node, 1)
    err = node.error("turn", rid, "hi", "--op", "pty-turn")
    assert err["code"] == "bad-request" and err["detail"]["field"] == "mode", err
    assert "session.input" not in [k for k, _ in _kinds(node, rid)]
    assert node.run("op", "pty-turn")["state"] == "unknown"


def test_a_repeated_forget_answers_its_first_outcome(node: Node) -> None:
    node.up()
    rid = _spawn(node, "f1", "pty")
    node.run("stop", rid)
    first = node.run("forget", rid, "--op", "F1")
    again = node.run("forget", rid, "--op", "F1")
    assert again["forgotten"] is True and again["duplicate"] is True, again
    assert again["record"]["id"] == first["record"]["id"] == rid
    assert node.run("op", "F1")["state"] == "terminal"


def test_a_supervisor_known_dead_is_no_longer_a_target(node: Node) -> None:
    """A prompt is accepted for a stopped supervisor (its hand-over waits), then the supervisor
    is SIGKILLed: the node learns of the death at once and does not go on handing input to it
    until a deadline; the next prompt is refused at once, the record dormant."""
    node.up()
    rid = _spawn(node, "d", "pty")
    node.wait_screen(rid, "echo-ready>")
    _gates(node, 1)
    supervisor = node.run("node", "status")["actors"][f"session/{rid}"]["pid"]
    os.kill(supervisor, signal.SIGSTOP)
    node.run("prompt", rid, "held")
    assert _inputs(node)["handing_over"] == 1
    sigkill(supervisor)
    node.wait_state(rid, "dormant", timeout=5)
    wait_for(lambda: _inputs(node)["handing_over"] == 0, 3, "the hand-over dropped")
    started = time.monotonic()
    err = node.error("prompt", rid, "after")
    assert err["code"] == "session-not-live", err
    assert time.monotonic() - started < 3
