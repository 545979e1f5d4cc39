"""The supervisor wire's version on the node's side (roost/actors/node/reports.py): which versions
are served, what an attach of each does to its record. The real upgrade, a supervisor of the
previous release re-attaching to this node, is tests/e2e/test_upgrade.py; no release that this
node does not serve exists yet, so that path is exercised here, against an in-memory record."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from roost.actors.node.reports import NEWER, OUTDATED, Reports, supervisor_version
from roost.actors.node.sessions import Sessions
from roost.actors.state import records as r
from roost.actors.state.records import Record
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.messages import Active, Event


class FakeSessions(Sessions):
    """The few ``Sessions`` calls ``Reports`` makes, on one record held in memory; ``events``
    collects what would have been appended, ``record.state`` events included. (``Sessions``'
    own set-up is not run: nothing here reaches a state store.)"""

    def __init__(self, record: Record) -> None:
        self.record = record
        self.events: list[Event] = []
        self.attaching: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.classified: dict[str, tuple[int, dict[str, Any]]] = {}

    async def find(self, ref: str) -> Record:
        assert ref == self.record.id
        return self.record

    async def update(
        self,
        record: Record,
        changes: dict[str, Any],
        *,
        expect: tuple[str, ...] = (),
        events: list[Event] | None = None,
    ) -> Record:
        if expect and self.record.state not in expect:
            raise RoostError("bad-state", "moved on")
        self.record = dataclasses.replace(self.record, **changes)
        self.events.extend(events or [])
        return self.record

    async def set_state(
        self,
        record: Record,
        state: str,
        *,
        expect: tuple[str, ...] = (),
        extra: list[Event] | None = None,
        **changes: Any,
    ) -> Record:
        event: Event = {"kind": "record.state", "data": {"from": record.state, "to": state}}
        return await self.update(
            record, {"state": state, **changes}, expect=expect, events=[*(extra or []), event]
        )


def live_record() -> Record:
    active: Active = {"record": "r0123456789", "generation": 1, "instance": "i1", "pid": 10}
    return Record("r0123456789", "x", "echo", "pty", "/", state=r.LIVE, generation=1, active=active)


def attach(wire: Any = None, release: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"record": "r0123456789", "generation": 1, "instance": "i1", "pid": 10}
    if wire is not None:
        body["wire"] = wire
    if release is not None:
        body["roost"] = release
    return body


def test_the_node_serves_this_wire_and_the_one_before() -> None:
    assert p.SUPERVISOR_WIRES_SERVED == (p.SUPERVISOR_WIRE - 1, p.SUPERVISOR_WIRE)
    no_version = supervisor_version(attach())  # a supervisor that says no version is wire 1
    assert no_version == ({"roost": None, "wire": 1}, OUTDATED)  # served no more since wire 3
    previous = attach(p.SUPERVISOR_WIRE - 1, "0.1.0")
    assert supervisor_version(previous) == ({"roost": "0.1.0", "wire": 2}, None)
    current = attach(p.SUPERVISOR_WIRE, "9.9")
    assert supervisor_version(current) == ({"roost": "9.9", "wire": p.SUPERVISOR_WIRE}, None)
    assert supervisor_version(attach(p.SUPERVISOR_WIRE - 2))[1] == OUTDATED
    assert supervisor_version(attach(p.SUPERVISOR_WIRE + 1))[1] == NEWER
    for nonsense in ("2", True, 2.0):
        assert supervisor_version(attach(nonsense))[1] == OUTDATED


def test_a_served_reattach_records_the_version_and_leaves_the_state() -> None:
    sessions = FakeSessions(live_record())
    reports = Reports(sessions)
    previous = attach(p.SUPERVISOR_WIRE - 1, "0.1.0")
    assert asyncio.run(reports.on_attach(previous)) == {"ok": True}
    assert sessions.record.state == r.LIVE and sessions.record.attention is None
    assert sessions.record.active is not None
    assert sessions.record.active["supervisor"] == {"roost": "0.1.0", "wire": 2}
    assert sessions.record.active["pid"] == 10
    assert sessions.events == []  # nothing to tell the operator


@pytest.mark.parametrize("wire,reason", [(p.SUPERVISOR_WIRE - 2, OUTDATED), (99, NEWER)])
def test_a_supervisor_not_served_keeps_running_and_its_record_asks_for_a_restart(
    wire: int, reason: str
) -> None:
    sessions = FakeSessions(live_record())
    reports = Reports(sessions)

    async def scenario() -> None:
        answer = await reports.on_attach(attach(wire, "0.0.1"))
        assert answer == {
            "ok": True,  # not refused: a refusal would make the supervisor leave its session
            "served": False,
            "reason": reason,
            "serves": list(p.SUPERVISOR_WIRES_SERVED),
        }
        assert sessions.record.state == r.ATTENTION and sessions.record.attention == reason
        kinds = [e["kind"] for e in sessions.events]
        assert kinds == ["session.supervisor", "record.state"]
        assert sessions.events[0]["data"]["wire"] == wire
        assert sessions.events[0]["data"]["reason"] == reason
        # attaching again (each re-registration does) marks it once
        await reports.on_attach(attach(wire, "0.0.1"))
        assert len(sessions.events) == 2
        # a screen classified ready does not clear the mark; only a serving node does
        classified = {**attach(), "classification": {"state": "ready", "reason": None}}
        await reports.on_classified(classified)
        assert sessions.record.state == r.ATTENTION and sessions.record.attention == reason
        assert sessions.record.activity == "ready"
        await reports.on_attach(attach(p.SUPERVISOR_WIRE, "0.0.2"))
        assert sessions.record.state == r.LIVE and sessions.record.attention is None
        assert sessions.record.active is not None
        assert sessions.record.active["supervisor"]["wire"] == p.SUPERVISOR_WIRE

    asyncio.run(scenario())


def test_a_launch_waiting_for_its_supervisor_gets_the_version() -> None:
    sessions = FakeSessions(dataclasses.replace(live_record(), state=r.STARTING))
    reports = Reports(sessions)

    async def scenario() -> dict[str, Any]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        sessions.attaching["i1"] = future
        await reports.on_attach(attach(p.SUPERVISOR_WIRE, "1.0"))
        return future.result()

    attached = asyncio.run(scenario())
    assert attached["supervisor"] == {"roost": "1.0", "wire": p.SUPERVISOR_WIRE}
    assert attached["unserved"] is None
