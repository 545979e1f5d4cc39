"""Finding records whose supervisor is gone, and turns no supervisor owns.

A dead supervisor is learnt of from its pidfd (``deaths``) the moment it exits; the record then
becomes ``dormant`` with ``session.lost`` (``Sessions.lost``). The sweep, every second, looks only
at what that cannot cover: an active record whose supervisor is not watched (no pid known, no
pidfd on this system) or whose death could not be settled yet (its record was locked, or the
state store was away). The node's first sweep, before it is ready, looks at every active record:
what it finds lost is what was running when the machine went down (``restore``). A ``starting``
record a launch of a node that died left behind is lost at once when no supervisor read its spec,
and otherwise waits for that supervisor to attach (``_launch_lost``). Every fifth
sweep (and the first) ends turns still running that no supervisor owns (``loss.settle_orphans``).
Dormant records cost nothing: the sweep never reads them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from typing import Any

import structlog

from roost.actors.node.deaths import Deaths
from roost.actors.node.launcher import still_running
from roost.actors.node.loss import settle_orphans
from roost.actors.node.sessions import ATTACH_TIMEOUT, Sessions
from roost.actors.runtime.process import logged_crash
from roost.actors.state import records as r
from roost.actors.state.records import Record
from roost.wire.errors import RoostError

log = structlog.get_logger("roost.sweep")

SWEEP_S = 1.0
ORPHAN_SWEEPS = 5  # every 5th sweep (and the first) looks for turns no supervisor owns


class Sweep:
    def __init__(self, sessions: Sessions, registered: Callable[[], Collection[str]]) -> None:
        self.sessions, self._registered = sessions, registered
        self.suspects: set[str] = set()  # records whose supervisor may have died, to settle
        self.deaths = Deaths(self._died)
        sessions.records.listener = self.deaths.follow
        self._serving = False  # until the first sweep: it settles every record itself
        self._sweeps = 0
        self._launches: dict[tuple[str, int], float] = {}  # launches in flight: their deadline
        self._tasks: set[asyncio.Task[Any]] = set()

    async def run(self) -> None:
        """Sweeps after the first one (``Daemon`` runs that before it announces ready)."""
        try:
            while True:
                await asyncio.sleep(SWEEP_S)
                try:
                    await self.sweep()
                except RoostError as err:
                    log.info("sweep-deferred", code=err.code)
        finally:
            self.close()

    async def sweep(self, *, first: bool = False) -> list[Record]:
        """Make the records whose supervisor is gone dormant; returns them as they were."""
        sessions = self.sessions
        sessions.launcher.reap()
        await sessions.records.load()
        found: list[Record] = []
        active = sessions.records.active()
        self.suspects &= {record.id for record in active}  # the others were settled meanwhile
        current = {(record.id, record.generation) for record in active}
        self._launches = {k: v for k, v in self._launches.items() if k in current}
        for record in active:
            unseen = not self.deaths.watched(record.id) or record.id in self.suspects
            if not (first or unseen) or sessions.locks[record.id].locked():
                continue
            self.suspects.discard(record.id)
            lost = await self._settle(record)
            if lost is not None:
                found.append(lost)
        if first:  # launches no supervisor read, left by a node that died writing them
            sessions.launcher.sweep_specs(ATTACH_TIMEOUT)
        self._serving = True
        self._sweeps += 1
        if self._sweeps % ORPHAN_SWEEPS == 1:
            registered = set(self._registered())
            await settle_orphans(
                sessions.peer,
                sessions.state_dir / "sessions",
                registered,
                sessions.locks,
                sessions.find,
            )
        return found

    async def _settle(self, record: Record) -> Record | None:
        """``lost`` if the record's supervisor is gone (an unregistered record with no pid
        included, unless it is a launch a supervisor may still attach to); the record as it was
        before, or None."""
        active = record.active or {}
        alive = still_running(active.get("pid"), active.get("started"))
        if alive or (not active.get("pid") and f"session/{record.id}" in self._registered()):
            return None
        async with self.sessions.locks[record.id]:
            fresh = await self.sessions.find(record.id)
            if fresh.state not in r.ACTIVE_STATES or fresh.generation != record.generation:
                return None
            reason = self._launch_lost(fresh)
            if reason is None:
                return None
            await self.sessions.lost(fresh, reason=reason)
            return fresh

    def _launch_lost(self, record: Record) -> str | None:
        """Why a record without a running supervisor is lost, or None while it is a launch its
        supervisor may still attach to. A ``starting`` record names its launch's instance before
        the supervisor exists (``Sessions.launch``); seen here, that launch's node died with
        it in flight (a launch of this node holds the record's lock). Its spec file still there:
        no supervisor read it, and once taken back none will (``launch-interrupted``). Gone: a
        supervisor read it and attaches to this node when it comes (``Reports.on_attach`` adopts
        it by the instance) unless ``ATTACH_TIMEOUT`` passes first."""
        active = record.active or {}
        instance = active.get("instance")
        key = (record.id, record.generation)
        if record.state != r.STARTING or active.get("pid") or not isinstance(instance, str):
            return "supervisor-gone"
        if self.sessions.launcher.withdraw(instance):
            return "launch-interrupted"
        now = time.monotonic()
        if key not in self._launches:
            log.info("launch-in-flight", record=record.id, generation=record.generation)
            self._launches[key] = now + ATTACH_TIMEOUT
        if now < self._launches[key]:
            return None
        del self._launches[key]
        return "supervisor-gone"

    def _died(self, record_id: str) -> None:
        """A watched supervisor exited (or was found gone): settle its record now, unless the
        first sweep, which looks at every record, has yet to run."""
        self.suspects.add(record_id)
        if self._serving:
            task = asyncio.get_running_loop().create_task(self._confirm(record_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(logged_crash)

    async def _confirm(self, record_id: str) -> None:
        if self.sessions.locks[record_id].locked():
            return  # whoever holds it may be ending it; else the next sweep settles it
        try:
            record = await self.sessions.find(record_id)
        except RoostError as err:
            if err.code == "not-found":
                self.suspects.discard(record_id)
            return
        if record.state not in r.ACTIVE_STATES:
            self.suspects.discard(record_id)
            return
        self.suspects.discard(record_id)
        try:
            await self._settle(record)
        except RoostError as err:  # the state store is away: the next sweep tries again
            log.info("loss-deferred", record=record_id, code=err.code)
            self.suspects.add(record_id)

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        self.deaths.close()
