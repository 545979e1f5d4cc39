"""``session.turn.wait`` in the node (roost.actors.node.control): it looks at the turn again as
soon as the state store publishes a turn's end for the record, not at its next poll; a turn that
ends between its look and its wait still wakes it; with no event it still polls."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from roost.actors.node import control as control_module
from roost.actors.node.control import Control
from roost.actors.node.sessions import Sessions
from roost.actors.state import records as r
from roost.wire import protocol as p
from tests import kit


class FakeSessions(Sessions):
    """``find``, of one record (``Sessions``' own set-up is not run: nothing else is used)."""

    def __init__(self) -> None:
        pass

    async def find(self, ref: str) -> r.Record:
        return r.Record("r1", "s", "echo", "stream", "/w", state=r.LIVE, generation=1)


class FakeStore(kit.FakePeer):
    """``state.turn.get``: the turn's state as the test sets it; counts the looks."""

    def __init__(self) -> None:
        super().__init__()
        self.state = "running"
        self.looks = 0
        self.on_look: Any = None

    async def answer(
        self, target: str, method: str, body: dict[str, Any], kw: dict[str, Any]
    ) -> Any:
        assert (target, method) == ("state", "state.turn.get")
        self.looks += 1
        turn = {"id": body["id"], "record": "r1", "state": self.state}
        if self.on_look is not None:
            self.on_look()
        return {"turn": turn}


def make(monkeypatch: pytest.MonkeyPatch) -> tuple[Control, FakeStore]:
    monkeypatch.setattr(control_module, "TURN_POLL_S", 30.0)  # only an event can wake it
    store = FakeStore()
    return Control(store, FakeSessions()), store


def wait_body(timeout_ms: int = 20_000) -> dict[str, Any]:
    return {"id": "r1", "turn": "t1", "timeout_ms": timeout_ms}


HEADER = p.Header(kind="request", method="session.turn.wait")


def test_a_turn_end_event_wakes_the_wait_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> tuple[dict[str, Any], int]:
        control, store = make(monkeypatch)
        waiting = asyncio.ensure_future(control.turn_wait(HEADER, wait_body()))
        for _ in range(10):
            await asyncio.sleep(0)
        assert not waiting.done() and store.looks == 1
        control.turn_ended("r2")  # another record's turn: no look
        for _ in range(10):
            await asyncio.sleep(0)
        assert store.looks == 1
        store.state = "completed"
        control.turn_ended("r1")
        reply = await asyncio.wait_for(waiting, 5)
        return reply, store.looks

    reply, looks = asyncio.run(scenario())
    assert reply["ended"] is True and reply["turn"]["state"] == "completed" and looks == 2


def test_a_turn_that_ends_while_the_wait_looks_still_wakes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> dict[str, Any]:
        control, store = make(monkeypatch)

        def ends_now() -> None:  # the end is published as the first look is answered
            if store.looks == 1:
                store.state = "completed"
                control.turn_ended("r1")

        store.on_look = ends_now
        return await asyncio.wait_for(control.turn_wait(HEADER, wait_body()), 5)

    assert asyncio.run(scenario())["ended"] is True


def test_with_no_event_the_wait_polls_and_ends_at_its_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> tuple[dict[str, Any], int, int]:
        control, store = make(monkeypatch)
        monkeypatch.setattr(control_module, "TURN_POLL_S", 0.05)
        reply = await asyncio.wait_for(control.turn_wait(HEADER, wait_body(300)), 5)
        return reply, store.looks, len(control._turn_waits)

    reply, looks, left = asyncio.run(scenario())
    assert reply["ended"] is False and looks >= 3 and left == 0
