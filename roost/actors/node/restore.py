"""Restoring records: after a reboot (``node up``) and by hand (``session.restore``).

A restore is a batch: the records it cold-resumes by their provider session id, in order, and the
ones it skips. A record without a provider session id is skipped (``no-provider-session``): roost
never starts a fresh conversation in its place. The records are resumed one at a time, with a
pause between two launches (``node.restore_pause_s``): agents starting together can race on a
shared OAuth refresh token. Each resume is the ordinary one (``Sessions.launch`` with resume),
and its outcome waits for the supervisor's verdict on the resumed screen. Every outcome
(``resumed``, ``attention``, ``resume_failed``, ``skipped``) is a ``record.restored`` event
naming the batch, so a client follows a batch through ``events.since``.

Which records: at ``node up``, those the node's first sweep found lost (they were ``live``,
``attention`` or ``starting`` when the machine went down) whose policy is ``resume``; by hand,
every ``dormant`` record whose policy is ``resume``. ``choose`` is the rule, as plain data.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from roost.actors.node.known import record_of
from roost.actors.node.sessions import Sessions
from roost.actors.runtime.caller import Caller
from roost.actors.state import records as r
from roost.actors.state.records import Record
from roost.wire import messages as msg
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.messages import Restored

log = structlog.get_logger("roost.restore")

ADAPTER_WAIT_S = 10.0  # at node up the adapter host may register a moment after the state store
VERDICT_WAIT_S = 50.0  # over the supervisor's own deadline for a verdict (checks.py, 45 s)
WAS_RUNNING = (r.LIVE, r.ATTENTION, r.STARTING)  # a record in these at a crash is restored


@dataclass
class Batch:
    """One restore: what it resumes, in order, and what it skips (with the reason)."""

    trigger: str  # boot (node up) or manual (session.restore)
    records: list[Record]
    skipped: list[tuple[Record, str]]
    pause_s: float
    after_seq: int = 0
    id: str = field(default_factory=lambda: "b" + uuid.uuid4().hex[:10])

    def to_wire(self) -> dict[str, Any]:
        return {
            "batch": self.id,
            "trigger": self.trigger,
            "records": [{"id": rec.id, "name": rec.name} for rec in self.records],
            "skipped": [
                {"id": rec.id, "name": rec.name, "reason": why} for rec, why in self.skipped
            ],
            "pause_s": self.pause_s,
            "after_seq": self.after_seq,
        }


def choose(records: Iterable[Record]) -> tuple[list[Record], list[tuple[Record, str]]]:
    """Of the candidates, the records with policy ``resume``: those to resume, and those
    skipped because they have no provider session id to resume by."""
    chosen: list[Record] = []
    skipped: list[tuple[Record, str]] = []
    for record in records:
        if record.restore_policy != r.RESUME:
            continue
        if record.provider_session:
            chosen.append(record)
        else:
            skipped.append((record, "no-provider-session"))
    return chosen, skipped


def outcome(record: Record, verdict: dict[str, Any] | None) -> Restored:
    """A resumed record's outcome, from its state once the verdict is in (or did not come)."""
    if verdict and verdict.get("outcome") == "resume_failed":
        return {"outcome": "resume_failed", "reason": verdict.get("reason") or "resume_failed"}
    if record.state == r.LIVE:
        return {"outcome": "resumed"}
    if record.state == r.ATTENTION:
        return {"outcome": "attention", "reason": record.attention}
    reason = "exited" if record.state == r.DORMANT else record.state
    return {"outcome": "resume_failed", "reason": reason}


class Restorer:
    """Runs the batches, one at a time; ``run`` is its task (the daemon owns and cancels it)."""

    def __init__(
        self,
        peer: Caller,
        sessions: Sessions,
        pause_s: float,
        registered: Callable[[], Collection[str]],
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.peer, self.sessions, self.pause_s, self._sleep = peer, sessions, pause_s, sleep
        self._registered = registered
        self._queue: asyncio.Queue[Batch] = asyncio.Queue()
        self.current: Batch | None = None  # queued or running

    async def begin(self, candidates: Iterable[Record], trigger: str) -> Batch:
        """Plan a batch, report its skipped records at once, and queue it."""
        if self.current is not None:
            raise RoostError(
                "busy",
                "a restore is already running; follow it with `roost events --follow`",
                {"batch": self.current.id},
            )
        chosen, skipped = choose(candidates)
        batch = Batch(trigger, chosen, skipped, self.pause_s)
        opened = await self.peer.call("state", "state.open", {})
        batch.after_seq = int(opened.get("last_seq") or 0)
        remaining = len(chosen)
        for record, why in skipped:
            await self._report(batch, record, {"outcome": "skipped", "reason": why}, remaining)
        if chosen:
            self.current = batch
            self._queue.put_nowait(batch)
            log.info("restore-planned", batch=batch.id, trigger=trigger, records=len(chosen))
        return batch

    async def handle(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """``session.restore``: every dormant record whose policy is ``resume``."""
        listing = await self.peer.call("state", "state.record.list", {})
        records = [record_of({"record": raw}) for raw in listing["records"]]
        batch = await self.begin([x for x in records if x.state == r.DORMANT], "manual")
        return batch.to_wire()

    async def run(self) -> None:
        while True:
            batch = await self._queue.get()
            try:
                await self._run(batch)
            finally:
                self.current = None

    async def _run(self, batch: Batch) -> None:
        for i, record in enumerate(batch.records):
            if i and batch.pause_s > 0:
                await self._sleep(batch.pause_s)
            result: Restored
            try:
                result, current = await self._resume(record)
            except RoostError as err:  # the state store is restarting, say: reported, not fatal
                result, current = {"outcome": "resume_failed", "error": err.to_body()}, record
            log.info("record-restored", batch=batch.id, record=record.id, **_flat(result))
            with contextlib.suppress(RoostError):
                await self._report(batch, current, result, len(batch.records) - i - 1)

    async def _adapter(self, provider: str) -> None:
        deadline = asyncio.get_running_loop().time() + ADAPTER_WAIT_S
        while f"adapter/{provider}" not in self._registered():
            if asyncio.get_running_loop().time() > deadline:
                return  # the launch says what is wrong (unreachable)
            await asyncio.sleep(0.05)

    async def _resume(self, wanted: Record) -> tuple[Restored, Record]:
        sessions = self.sessions
        await self._adapter(wanted.provider)
        async with sessions.locks[wanted.id]:
            record = await sessions.find(wanted.id)
            if record.state != r.DORMANT or record.generation != wanted.generation:
                return {"outcome": "skipped", "reason": f"now-{record.state}"}, record
            key = (record.id, record.generation + 1)
            waiter = sessions.verdicts[key] = asyncio.get_running_loop().create_future()
            try:
                if not Path(record.cwd).is_dir():  # resumed in its own cwd, or not at all
                    raise RoostError("bad-cwd", "the record's cwd is gone", {"field": "cwd"})
                env = await sessions.env(record.id)
                await sessions.launch(record, env, resume=record.provider_session)
            except RoostError as err:
                sessions.verdicts.pop(key, None)
                failed = await sessions.find(record.id)
                return {"outcome": "resume_failed", "error": err.to_body()}, failed
        verdict = None
        if record.mode == "pty":  # a stream record's resume is checked at its next turn
            with contextlib.suppress(TimeoutError):
                verdict = await asyncio.wait_for(waiter, VERDICT_WAIT_S)
        sessions.verdicts.pop(key, None)
        current = await sessions.find(record.id)
        return outcome(current, verdict), current

    async def _report(self, batch: Batch, record: Record, result: Restored, remaining: int) -> None:
        event = msg.event(
            "record.restored",
            record.id,
            record.generation,
            {
                "batch": batch.id,
                "trigger": batch.trigger,
                "name": record.name,
                **result,
                "remaining": remaining,
            },
        )
        await self.peer.call("state", "state.events.append", {"events": [event]})


def _flat(result: Restored) -> dict[str, Any]:
    error = result.get("error") or {}
    return {"outcome": result["outcome"], "reason": result.get("reason") or error.get("code")}
