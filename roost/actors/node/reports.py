"""What session supervisors report to the node (``node.session.*``), applied to their records.

A supervisor attaches after each (re)registration, and reports its agent's exit, a failed launch,
each change of the screen's classification, the provider's own session id once known, and the
verdict on a cold resume. Each report names its record's generation: one from a generation the
record has moved past is refused ``stale-generation``. The node actor runs them under the
record's lock (attach and failed excepted: a launch waiting on them holds it).

Supervisors outlive the node: after an upgrade, one started by the previous release re-attaches to
this one. Its attach says which supervisor wire it speaks (``wire``, none: version 1); the node
serves ``SUPERVISOR_WIRES_SERVED`` and keeps the version in the record's ``active.supervisor``. One
it cannot serve keeps its session running, but the record goes to ``attention`` with the reason
``supervisor-outdated`` (or ``supervisor-newer``, a node older than the supervisor), telling the
operator to restart that session (stop, resume) when it is done.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast, get_args

import structlog

from roost.actors.node.launcher import process_started
from roost.actors.node.sessions import Sessions
from roost.actors.state import records as r
from roost.actors.state.records import Record
from roost.wire import messages as msg
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.messages import Active, WireReason

log = structlog.get_logger("roost.sessions")

OUTDATED, NEWER = get_args(WireReason)
WIRE_REASONS = frozenset({OUTDATED, NEWER})


def supervisor_version(body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """What a supervisor's attach says it runs, as ``active.supervisor`` keeps it (``roost``: its
    release, nil when it did not say; ``wire``), and why this node cannot serve it (None: it
    can). A supervisor that sends no ``wire`` is version 1, every supervisor before the field."""
    wire, release = body.get("wire"), body.get("roost")
    version = {
        "roost": release if isinstance(release, str) else None,
        "wire": 1 if wire is None else wire,
    }
    wire = version["wire"]
    if not isinstance(wire, int) or isinstance(wire, bool) or wire < p.SUPERVISOR_WIRES_SERVED[0]:
        return version, OUTDATED
    return version, NEWER if wire > p.SUPERVISOR_WIRE else None


def attach_answer(unserved: str | None) -> dict[str, Any]:
    if unserved is None:
        return {"ok": True}
    return {
        "ok": True,
        "served": False,
        "reason": unserved,
        "serves": list(p.SUPERVISOR_WIRES_SERVED),
    }


# A classification of a record's screen, as applied (the record then, the verdict, the digest of
# the screen it read): the usage-limit policy arms its continue on it.
Seen = Callable[[Record, dict[str, Any], str | None], None]


class Reports:
    def __init__(self, sessions: Sessions, seen: Seen | None = None) -> None:
        self.sessions = sessions
        self.seen = seen

    async def on_attach(self, body: dict[str, Any]) -> dict[str, Any]:
        instance = str(body.get("instance"))
        record = await self._current(body)
        version, unserved = supervisor_version(body)
        if isinstance(body.get("classification"), dict):
            self.sessions.classified[record.id] = (record.generation, body["classification"])
        future = self.sessions.attaching.get(instance)
        if future is not None and not future.done():
            future.set_result({**body, "supervisor": version, "unserved": unserved})
            return attach_answer(unserved)
        active = record.active or {}
        if record.state in r.ACTIVE_STATES and active.get("instance") in (None, instance):
            # an agent that exited meanwhile is reported by the supervisor's outbox, in order,
            # under the record's lock; handling it here too would race that report
            if record.state == r.STARTING and not body.get("exited"):
                active = cast(
                    Active,
                    {
                        **{k: v for k, v in body.items() if k not in ("roost", "wire", "screen")},
                        "started": process_started(int(body.get("pid") or 0)),
                        "supervisor": version,
                    },
                )
                if unserved is None:
                    await self.sessions.set_state(record, r.LIVE, active=active)
                else:
                    event = self._wire_event(record, version, unserved)
                    await self.sessions.set_state(
                        record, r.ATTENTION, extra=[event], active=active, attention=unserved
                    )
            elif record.state in (r.LIVE, r.ATTENTION) and record.active is not None:
                await self._mark_version(record, version, unserved)
                self._seen_again(record, body)
            log.info(
                "session-reattached",
                record=record.id,
                generation=record.generation,
                wire=version["wire"],
                served=unserved is None,
            )
            return attach_answer(unserved)
        raise RoostError("stale-generation", "this supervisor no longer owns the record")

    def _seen_again(self, record: Record, body: dict[str, Any]) -> None:
        """A supervisor re-attaching (to a restarted node) names its last verdict and the screen
        it read: a usage-limit continue armed before the restart is armed again."""
        result, screen = body.get("classification"), body.get("screen")
        if self.seen is not None and isinstance(result, dict):
            self.seen(record, result, screen if isinstance(screen, str) else None)

    async def _mark_version(
        self, record: Record, version: dict[str, Any], unserved: str | None
    ) -> None:
        """Keep the re-attached supervisor's version in ``active``; one this node cannot serve
        puts the record in ``attention`` (once), and a served one ends such an attention (the
        node was upgraded, or downgraded back, to one that serves it)."""
        assert record.active is not None
        active = {**record.active, "supervisor": version}
        expect = (record.state,)
        if unserved is not None and record.attention != unserved:
            event = self._wire_event(record, version, unserved)
            await self.sessions.set_state(
                record, r.ATTENTION, expect=expect, extra=[event], active=active, attention=unserved
            )
        elif unserved is None and record.attention in WIRE_REASONS:
            target = r.ATTENTION if record.activity == "attention" else r.LIVE
            await self.sessions.set_state(
                record, target, expect=expect, active=active, attention=None
            )
        elif record.active.get("supervisor") != version:
            await self.sessions.update(record, {"active": active}, expect=expect)

    @staticmethod
    def _wire_event(record: Record, version: dict[str, Any], unserved: str) -> msg.Event:
        return msg.event(
            "session.supervisor",
            record.id,
            record.generation,
            {**version, "reason": unserved, "serves": list(p.SUPERVISOR_WIRES_SERVED)},
        )

    async def on_exited(self, body: dict[str, Any]) -> dict[str, Any]:
        record = await self._current(body)
        if record.state in r.ACTIVE_STATES:
            exited = msg.event(
                "session.exited", record.id, record.generation, {"exit": body.get("exit")}
            )
            await self.sessions.set_state(
                record,
                r.DORMANT,
                extra=[exited],
                active=None,
                last_exit=body.get("exit"),
                activity=None,
                attention=None,
            )
        return {"ok": True}

    async def on_failed(self, body: dict[str, Any]) -> dict[str, Any]:
        future = self.sessions.attaching.get(str(body.get("instance")))
        if future is not None and not future.done():
            future.set_result({"error": body.get("error")})
        return {"ok": True}

    async def on_classified(self, body: dict[str, Any]) -> dict[str, Any]:
        record = await self._current(body)
        result = body.get("classification") or {}
        verdict = {k: v for k, v in result.items() if k != "turn_end"}
        self.sessions.classified[record.id] = (record.generation, verdict)
        record = await self._classified(record, result)
        if self.seen is not None:
            screen = body.get("screen")
            self.seen(record, result, screen if isinstance(screen, str) else None)
        return {"ok": True}

    async def _classified(self, record: Record, result: dict[str, Any]) -> Record:
        state, reason = result.get("state"), result.get("reason")
        event = msg.event("session.classified", record.id, record.generation, result)
        reset = result.get("reset_at") if reason == "rate-limit" else None
        reset = float(reset) if isinstance(reset, (int, float)) else None
        changes: dict[str, Any] = {"activity": state, "attention": reason, "reset_at": reset}
        if record.attention in WIRE_REASONS:  # stays until a node that serves it re-attaches it
            return await self.sessions.update(record, {"activity": state}, events=[event])
        if record.state in (r.LIVE, r.ATTENTION):
            target = r.ATTENTION if state == "attention" else r.LIVE
            if target != record.state:
                return await self.sessions.set_state(record, target, extra=[event], **changes)
        return await self.sessions.update(record, changes, events=[event])

    async def on_identity(self, body: dict[str, Any]) -> dict[str, Any]:
        """The provider's own id became known. A record that has one keeps it: a different id
        reported later (a resume that forked) is recorded as such and needs a human."""
        record = await self._current(body)
        found = str(body.get("provider_session"))
        if record.provider_session == found:
            return {"ok": True}
        data: dict[str, Any] = {"provider_session": found}
        event = msg.event("session.identity", record.id, record.generation, data)
        if record.provider_session is None:
            await self.sessions.update(record, {"provider_session": found}, events=[event])
            return {"ok": True}
        if body.get("how") == "clear" and body.get("previous") == record.provider_session:
            # the CLI started a new conversation itself (claude's /clear): the record follows
            data.update(previous=record.provider_session, how="clear")
            await self.sessions.update(record, {"provider_session": found}, events=[event])
            return {"ok": True}
        data.update(previous=record.provider_session, mismatch=True)
        if record.state not in (r.LIVE, r.ATTENTION):  # nothing running to look at: log it only
            await self.sessions.update(record, {}, events=[event])
            return {"ok": True}
        await self.sessions.set_state(
            record, r.ATTENTION, extra=[event], attention="resume-unverified"
        )
        return {"ok": True}

    async def on_resume(self, body: dict[str, Any]) -> dict[str, Any]:
        """The verdict on a cold resume; anything but ``resumed`` needs a human. Roost never
        starts a fresh conversation in its place (``retry_fresh`` is reported, not acted on)."""
        record = await self._current(body)
        verdict = body.get("verdict") or {}
        event = msg.event("session.resume", record.id, record.generation, verdict)
        if record.state not in (r.LIVE, r.ATTENTION):
            await self.sessions.update(record, {}, events=[event])
        elif verdict.get("outcome") == "resumed":
            if record.state == r.ATTENTION and record.attention == "resume-unverified":
                await self.sessions.set_state(record, r.LIVE, extra=[event], attention=None)
            else:
                await self.sessions.update(record, {}, events=[event])
        else:
            reason = verdict.get("reason") or "resume-unverified"
            await self.sessions.set_state(record, r.ATTENTION, extra=[event], attention=reason)
        waiting = self.sessions.verdicts.get((record.id, record.generation))
        if waiting is not None and not waiting.done():  # a restore waits for it
            waiting.set_result(verdict)
        return {"ok": True}

    async def on_usage(self, body: dict[str, Any]) -> dict[str, Any]:
        """The provider session's running usage totals (``{source, totals, provider_session?,
        turn?}``): the state store keeps what is new since the last report."""
        record = await self._current(body)
        keys = ("source", "totals", "provider_session", "turn")
        query = {k: body[k] for k in keys if body.get(k) is not None}
        return await self.sessions.peer.call(
            "state",
            "state.usage.add",
            {**query, "record": record.id, "generation": record.generation},
        )

    async def _current(self, body: dict[str, Any]) -> Record:
        record = await self.sessions.find(str(body.get("record")))
        if body.get("generation") != record.generation:
            raise RoostError(
                "stale-generation", "the record has moved on", {"generation": record.generation}
            )
        return record
