"""Resume after a usage limit: the record's ``on_limit`` policy, ``wait`` or ``continue``.

A pty session whose screen shows a usage limit is ``attention (rate-limit)``, with the reset time
the screen showed (``reset_at``). With ``on_limit = "continue"`` the node, once that time has
passed, types the provider's continue prompt (its adapter's ``continue_prompt``, then the submit
key), as a ``session.prompt`` of its own through the one committed path of input
(``Inputs.accept``): committed before it is typed, typed once. Its operation id is made of the
record, the generation and the reset time, so the same reset is continued once however often it
is armed (a second report of the same verdict, a node restarted), and the store answers a repeat
with the first outcome.

It types nothing when, at the reset, the record is no longer in that attention (the same
generation, the same reset), when the screen is not the one that showed the limit (the digest of
the classified screen against the live screen's), when the CLI continues by itself (claude with a
subscriber's login), or when the policy is ``wait``. Never any other screen.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from roost.actors.node.inputs import Inputs
from roost.actors.node.sessions import Sessions
from roost.actors.runtime.process import logged_crash
from roost.actors.state import records as r
from roost.adapters.limits import screen_digest as screen_digest
from roost.providers import ON_LIMIT as ON_LIMIT
from roost.wire import messages as msg
from roost.wire import protocol as p
from roost.wire.errors import RoostError

log = structlog.get_logger("roost.limits")

WAIT, CONTINUE = ON_LIMIT
MARGIN_S = 1.0  # after the reset read, before the continue is typed
CONTINUE_PROMPT = "continue"


@dataclass(frozen=True)
class Limit:
    """A usage limit to continue after: the record, its generation, the reset read from the
    screen (epoch seconds) and the digest of the screen that showed it."""

    record: str
    generation: int
    reset_at: float
    screen: str

    @property
    def op(self) -> str:
        """The continue's operation id: one per record, generation and reset."""
        return f"limit-continue:{self.record}:{self.generation}:{int(self.reset_at)}"


def armed(record: r.Record, result: dict[str, Any], screen: str | None) -> Limit | None:
    """The limit ``result`` (a classification of ``record``'s screen, whose digest is
    ``screen``) arms a continue for, or None: the policy is ``wait``, it is no usage limit, it
    shows no reset time, the CLI continues by itself, or the screen was not reported."""
    reset = result.get("reset_at")
    if record.on_limit != CONTINUE or record.mode != "pty" or not screen:
        return None
    if result.get("state") != "attention" or result.get("reason") != "rate-limit":
        return None
    if result.get("self_continues") or isinstance(reset, bool):
        return None
    if not isinstance(reset, (int, float)):
        return None
    return Limit(record.id, record.generation, float(reset), screen)


def decide(limit: Limit, record: r.Record, screen: str | None, now: float) -> str:
    """What to do with ``limit`` at ``now``, the record and its live screen's digest as they are:
    ``type``, ``early`` (the reset has not passed), or why never: ``policy`` (wait), ``moved``
    (another generation, or out of that attention), ``screen-changed``."""
    if record.on_limit != CONTINUE:
        return "policy"
    if record.generation != limit.generation or record.state != r.ATTENTION:
        return "moved"
    if record.attention != "rate-limit" or record.reset_at != limit.reset_at:
        return "moved"
    if now < limit.reset_at + MARGIN_S:
        return "early"
    return "type" if screen == limit.screen else "screen-changed"


Typer = Callable[[Limit], Awaitable[dict[str, Any]]]
Reader = Callable[[str], Awaitable[tuple[r.Record, str | None]]]


class Limits:
    """The armed continues of the node's records, one timer per record."""

    def __init__(self, read: Reader, type_: Typer, clock: Callable[[], float] = time.time) -> None:
        self.read, self.type, self.clock = read, type_, clock
        self._timers: dict[str, tuple[Limit, asyncio.Task[None]]] = {}

    def seen(self, record: r.Record, result: dict[str, Any], screen: str | None) -> None:
        """A classification of ``record``'s screen: arm its continue, or disarm what it replaces."""
        limit = armed(record, result, screen)
        current = self._timers.get(record.id)
        if current is not None and current[0] == limit:
            return
        self.disarm(record.id)
        if limit is not None:
            task = asyncio.get_running_loop().create_task(self._at_reset(limit))
            task.add_done_callback(logged_crash)
            self._timers[record.id] = (limit, task)
            log.info("limit-armed", record=record.id, reset_at=limit.reset_at)

    def disarm(self, record_id: str) -> None:
        timer = self._timers.pop(record_id, None)
        if timer is not None:
            timer[1].cancel()

    def close(self) -> None:
        for record_id in list(self._timers):
            self.disarm(record_id)

    async def _at_reset(self, limit: Limit) -> None:
        try:
            while (wait := limit.reset_at + MARGIN_S - self.clock()) > 0:
                await asyncio.sleep(min(wait, 60.0))  # a clock set forward is seen within 60 s
            record, screen = await self.read(limit.record)
            verdict = decide(limit, record, screen, self.clock())
            if verdict != "type":
                log.info("limit-not-continued", record=limit.record, why=verdict)
                return
            reply = await self.type(limit)
            log.info("limit-continued", record=limit.record, reset_at=limit.reset_at, **reply)
        except RoostError as err:  # the session went away, or would take no input now
            log.warning("limit-not-continued", record=limit.record, why=err.code)
        finally:
            if self._timers.get(limit.record, (None,))[0] == limit:
                del self._timers[limit.record]


def for_node(
    sessions: Sessions,
    inputs: Inputs,
    call_session: Callable[..., Awaitable[dict[str, Any]]],
) -> Limits:
    """The node's ``Limits``: it reads a record and its live screen from the supervisor, and
    types the continue as a ``session.prompt`` of the node's own, through ``Inputs.accept``."""

    async def read(record_id: str) -> tuple[r.Record, str | None]:
        record = await sessions.find(record_id)
        if record.state not in (r.LIVE, r.ATTENTION) or record.active is None:
            return record, None
        shown = await call_session(record, "session.screen", {})
        screen = shown.get("screen")
        return record, screen_digest(screen) if isinstance(screen, str) else None

    async def type_(limit: Limit) -> dict[str, Any]:
        record = await sessions.find(limit.record)
        active = r.check_live(record)
        h = p.Header("request", method="session.prompt", sender="node", op=limit.op)
        body = {"id": record.id, "text": CONTINUE_PROMPT}

        def forward() -> Awaitable[dict[str, Any]]:
            return call_session(record, h.method, body, generation=active["generation"], op=h.op)

        reply = await inputs.accept(record, active, h, body, forward)
        if not reply.get("duplicate"):
            data = {"reset_at": limit.reset_at, "op": limit.op, "seq": reply.get("seq")}
            event = msg.event("session.limit-continued", record.id, limit.generation, data)
            await sessions.update(record, {}, events=[event])
        return {"seq": reply.get("seq"), "duplicate": bool(reply.get("duplicate"))}

    return Limits(read, type_)
