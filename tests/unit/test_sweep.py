"""Finding dead supervisors (roost.actors.node.sweep): the node's first sweep settles every active
record (what it finds is what a reboot restores), a watched supervisor's death is settled the
moment it happens with no sweep, a record whose lock is held waits for the next sweep, and
dormant records are never looked at. The supervisors are real short-lived processes; the
sessions and the state store are fakes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from roost.actors.node import sweep as sweeping
from roost.actors.node.known import KnownRecords
from roost.actors.node.launcher import Launcher, process_started
from roost.actors.node.sessions import Sessions
from roost.actors.node.sweep import Sweep
from roost.actors.state import records as r
from roost.actors.state.records import Record
from roost.wire.messages import Active
from tests import kit

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd here")


class FakeSessions(Sessions):
    """What ``Sweep`` uses of ``Sessions``: the records, their locks, ``find`` and ``lost``
    (``Sessions``' own set-up is not run: its state store is this object)."""

    def __init__(self, tmp: Path, *rows: Record) -> None:
        self.rows = {x.id: x for x in rows}
        self.calls: list[str] = []
        self.lost_ids: list[str] = []
        self.reasons: dict[str, str] = {}
        self.records = KnownRecords(self._call)
        self.locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self.launcher, self.peer, self.state_dir = Launcher(tmp), self, tmp

    async def _call(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(method)
        return {"records": [x.to_wire() for x in self.rows.values()]}

    async def call(
        self,
        target: str,
        method: str,
        body: dict[str, Any] | None = None,
        *,
        timeout: float = 10.0,
        session: dict[str, Any] | None = None,
        op: str = "",
    ) -> dict[str, Any]:
        self.calls.append(method)
        assert method == "state.turn.orphans"
        return {"turns": []}

    async def find(self, ref: str) -> Record:
        return await self.records.get(ref)

    async def lost(self, record: Record, *, reason: str) -> Record:
        self.lost_ids.append(record.id)
        self.reasons[record.id] = reason
        gone = Record(record.id, None, "echo", "pty", "/", state=r.DORMANT, generation=1)
        return self.records.put(gone)


def live(rid: str, pid: int | None, created: float) -> Record:
    active: Active | None = None if pid is None else {"pid": pid, "started": process_started(pid)}
    return Record(
        rid, None, "echo", "pty", "/", state=r.LIVE, generation=1, active=active, created=created
    )


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_the_first_sweep_settles_every_active_record_and_returns_what_it_found(
    tmp_path: Path,
) -> None:
    running, dead = sleeper(), sleeper()
    dead_pid = dead.pid
    dead.kill()
    dead.wait()

    async def scenario() -> tuple[list[str], list[str]]:
        sessions = FakeSessions(
            tmp_path,
            live("rb", dead_pid, 2.0),  # gone before the node came up (pid and start time)
            live("ra", None, 1.0),  # no supervisor ever attached, none registered
            live("rc", running.pid, 3.0),
            Record("rd", None, "echo", "pty", "/", state=r.DORMANT),
        )
        sweep = Sweep(sessions, lambda: set())
        found = await sweep.sweep(first=True)
        await asyncio.sleep(0)  # a death heard while loading is not settled a second time
        sweep.close()
        return [x.id for x in found], sessions.lost_ids

    try:
        found, lost = asyncio.run(scenario())
    finally:
        running.kill()
        running.wait()
    assert found == ["ra", "rb"] and lost == ["ra", "rb"]


def launching(rid: str, instance: str) -> Record:
    """A record whose launch a node that died left in flight: ``starting``, its instance known,
    no supervisor attached yet."""
    active: Active = {"record": rid, "generation": 1, "instance": instance}
    return Record(rid, None, "echo", "pty", "/", state=r.STARTING, generation=1, active=active)


def test_a_launch_left_in_flight_is_withdrawn_if_unread_and_else_awaited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spec file still there: taken back, lost at once as ``launch-interrupted``. Read by a
    supervisor: not lost while it may still attach; lost once ``ATTACH_TIMEOUT`` has passed
    with no attach; kept once it has registered."""
    monkeypatch.setattr(sweeping, "ATTACH_TIMEOUT", 0.3)
    registered: set[str] = set()

    async def scenario() -> tuple[FakeSessions, list[str]]:
        sessions = FakeSessions(
            tmp_path, launching("unread", "i1"), launching("read", "i2"), launching("up", "i3")
        )
        sessions.launcher.prepare(kit.launch_spec(instance_id="i1"))
        stale = sessions.launcher.prepare(kit.launch_spec(instance_id="i0"))  # no record names it
        os.utime(stale, (0, 0))
        sweep = Sweep(sessions, lambda: registered)
        found = await sweep.sweep(first=True)
        assert sessions.reasons == {"unread": "launch-interrupted"}
        assert not list(tmp_path.glob("spec-*"))  # taken back, and the stale one removed
        registered.add("session/up")
        await sweep.sweep()
        assert sessions.lost_ids == ["unread"]  # the read launches may still attach
        await asyncio.sleep(0.35)
        await sweep.sweep()
        sweep.close()
        return sessions, [x.id for x in found]

    sessions, found = asyncio.run(scenario())
    assert found == ["unread"]
    assert sessions.reasons == {"unread": "launch-interrupted", "read": "supervisor-gone"}


def test_a_watched_death_is_settled_at_once_and_a_locked_record_waits(tmp_path: Path) -> None:
    first, second = sleeper(), sleeper()

    async def scenario() -> FakeSessions:
        sessions = FakeSessions(tmp_path, live("r1", first.pid, 1.0), live("r2", second.pid, 2.0))
        sweep = Sweep(sessions, lambda: {"session/r1", "session/r2"})
        assert await sweep.sweep(first=True) == []
        first.kill()
        await kit.until(lambda: sessions.lost_ids == ["r1"])  # no sweep ran: the pidfd said so
        async with sessions.locks["r2"]:  # a stop, say, holds it while the supervisor dies
            second.kill()
            await kit.until(lambda: "r2" in sweep.suspects)
            await asyncio.sleep(0)
            assert sessions.lost_ids == ["r1"]
        await sweep.sweep()
        assert sessions.lost_ids == ["r1", "r2"] and not sweep.suspects
        sweep.close()
        return sessions

    try:
        sessions = asyncio.run(scenario())
    finally:
        for proc in (first, second):
            proc.kill()
            proc.wait()
    assert sessions.calls.count("state.record.list") == 1  # records are read once


def test_sweeps_read_no_dormant_record(tmp_path: Path) -> None:
    dormant = [Record(f"r{i}", None, "echo", "pty", "/", state=r.DORMANT) for i in range(50)]

    async def scenario() -> list[str]:
        sessions = FakeSessions(tmp_path, *dormant)
        sweep = Sweep(sessions, lambda: set())
        for first in (True, False, False, False, False, False):
            assert await sweep.sweep(first=first) == []
        sweep.close()
        return sessions.calls

    # one list at start; the orphaned turns asked for on the first and the fifth sweep after it
    assert asyncio.run(scenario()) == [
        "state.record.list",
        "state.turn.orphans",
        "state.turn.orphans",
    ]
