"""The node's control rules around mutating requests: claims, operation ids, turns, ``busy``.

``mutating`` wraps a handler so that (1) the claims on the record admit the request's grant, and
(2) a request carrying an operation id already seen returns the first outcome and does nothing
again. Input and turns store their operation in the same transaction as their user-input event
(in the supervisor), and that transaction is also where a repeated id is found: the node asks the
state store nothing on their way. Other mutations look the id up first and store it here once
they complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

import structlog

from roost.actors.node.claims import DEFAULT_LEASE_MS, NODE, Claims
from roost.actors.node.sessions import Sessions
from roost.actors.runtime.caller import Caller
from roost.actors.runtime.keyed import KeyedLocks
from roost.actors.runtime.peer import Handler, Serving
from roost.wire import fields as f
from roost.wire import protocol as p
from roost.wire.errors import RoostError

TURN_POLL_S = 1.0  # turn.wait looks again this often even with no turn event seen
TURN_TOPIC = "/session.turn"  # the state store's event topic of a turn's end: e/<record>/...

log = structlog.get_logger("roost.control")


def first_outcome(seen: dict[str, Any]) -> dict[str, Any]:
    """What a repeated operation id answers, whatever record or text the repeat names: the first
    outcome, marked as a duplicate, with the first operation's method and record."""
    result = dict(seen["result"] or {})
    if seen["method"] in p.COMMITTED_HERE:
        result["accepted"] = True
        if result.get("seqs") and "seq" not in result:
            result["seq"] = result["seqs"][0]
        if seen.get("record"):
            result["record"] = seen["record"]
    op = {"id": seen["id"], "state": seen["state"], "method": seen["method"]}
    return {**result, "duplicate": True, "op": {**op, "record": seen.get("record")}}


class Control:
    def __init__(
        self, peer: Caller, sessions: Sessions, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.peer, self.sessions = peer, sessions
        self.claims = Claims(clock)
        self.accepting = 0
        self._op_locks = KeyedLocks()  # one request of an op id at a time
        self._turn_waits: dict[str, set[asyncio.Future[None]]] = {}  # record -> its turn.waits

    def guarded(self, handlers: Mapping[str, Serving]) -> dict[str, Serving]:
        """The node's handlers, each under the rules its entry in the table of methods gives it:
        claims and operation ids for a mutating method (``mutating``), the node's controller
        lease for any other node-wide one (``node_wide``). ``handlers`` must name exactly the
        methods the table says the node serves, or the node does not start."""
        p.check_served(p.NODE, handlers)
        guarded: dict[str, Serving] = {}
        for name, handler in handlers.items():
            method = p.METHODS[name]
            if method.mutating:  # a mutating handler answers a map: its outcome is stored
                guarded[name] = self.mutating(cast(Handler, handler))
            elif method.node_wide:
                guarded[name] = self.node_wide(handler)
            else:
                guarded[name] = handler
        return guarded

    @property
    def busy(self) -> bool:
        return self.accepting > 0 or self.sessions.cleaning > 0

    def mutating(self, handler: Handler) -> Handler:
        async def wrapped(h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
            # counted from the first moment, before any call that may wait on the state store
            counted = h.method in p.COMMITTED_HERE
            self.accepting += counted
            try:
                return await self._mutate(handler, h, body)
            finally:
                self.accepting -= counted

        return wrapped

    async def _mutate(self, handler: Handler, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        if h.op and len(h.op) > 128:
            raise RoostError(
                "bad-request", "an operation id is at most 128 characters", {"field": "op"}
            )
        if not h.op:
            await self._admitted(h, body)
            return await handler(h, body)
        async with self._op_locks.hold(h.op):
            try:
                record_id = await self._admitted(h, body)
            except RoostError as err:
                # a repeat of an operation that forgot its record: the first outcome
                if err.code != "not-found" or (seen := await self._seen(h.op)) is None:
                    raise
                return first_outcome(seen)
            return await self._once(handler, h, body, record_id)

    async def _admitted(self, h: p.Header, body: dict[str, Any]) -> str | None:
        """The claims admit the request (the node's, or its record's); the record's id."""
        ref = body.get("id")
        if h.method in p.NODE_WIDE:
            self.claims.check(NODE, h.grant)
        elif isinstance(ref, str) and ref:
            return await self._claimed(ref, h.grant)
        return None

    async def _claimed(self, ref: str, grant: str) -> str:
        """The id of the record ``ref`` names, once its claims admit ``grant``; a grant that has
        ended is ``stale-grant`` also when the record is gone (forgotten)."""
        try:
            record = await self.sessions.find(ref)
        except RoostError as err:
            if err.code == "not-found" and grant:
                self.claims.check_retired(grant)
            raise
        self.claims.check(record.id, grant)
        return record.id

    async def _once(
        self, handler: Handler, h: p.Header, body: dict[str, Any], record_id: str | None
    ) -> dict[str, Any]:
        """Run ``handler`` unless the operation id was seen; then remember its outcome."""
        if h.method in p.COMMITTED_HERE:
            return await self._committed(handler, h, body)
        seen = await self._seen(h.op)
        if seen is not None:
            return first_outcome(seen)
        reply = await handler(h, body)
        record_id = record_id or (reply.get("record") or {}).get("id")
        op = {
            "id": h.op,
            "method": h.method,
            "record": record_id,
            "state": "terminal",
            "result": reply,
        }
        try:
            await self.peer.call("state", "state.op.put", {"op": op})
        except RoostError as err:  # the change is made; say so rather than fail the request
            log.warning("op-not-recorded", op=h.op, code=err.code)
            reply = {**reply, "op_recorded": False}
        return reply

    async def _committed(
        self, handler: Handler, h: p.Header, body: dict[str, Any]
    ) -> dict[str, Any]:
        """An input or a turn: the transaction that commits it checks its operation id. A
        repeated id comes back as that commit's duplicate, answered with the first outcome; a
        request refused before its commit (the session stopped since, its turn still running)
        may repeat one that was accepted, which the state store then says."""
        try:
            reply = await handler(h, body)
        except RoostError:
            seen = None
            with contextlib.suppress(RoostError):  # the store away too: the refusal stands
                seen = await self._seen(h.op)
            if seen is None:
                raise
            return first_outcome(seen)
        if not reply.get("duplicate"):
            return reply
        seen = reply.get("op")
        if not isinstance(seen, dict) or "method" not in seen:  # a supervisor that omits it
            seen = await self._seen(h.op)
        return reply if seen is None else first_outcome(seen)

    async def _seen(self, op_id: str) -> dict[str, Any] | None:
        seen: dict[str, Any] | None = (
            await self.peer.call("state", "state.op.get", {"id": op_id})
        )["op"]
        return seen

    async def claim(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        record = await self.sessions.find(f.req_str(body, "id"))
        lease = f.opt_int(body, "lease_ms", lo=100, hi=24 * 3600 * 1000) or DEFAULT_LEASE_MS
        grant = self.claims.claim(
            record.id,
            record.generation,
            h.sender,
            lease_ms=lease,
            take_over=f.opt_bool(body, "take_over"),
            renew=f.opt_str(body, "renew", max_len=64) or "",
        )
        return {"claim": self.claims.get(grant.record_id)}

    async def release(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        ref, grant = f.req_str(body, "id"), f.req_str(body, "grant", max_len=64)
        record_id = await self._claimed(ref, grant)
        self.claims.release(record_id, grant)
        return {"released": True, "record": record_id}

    def node_wide(self, handler: Serving) -> Serving:
        """A node-wide mutation that is not a session's: refused while another client holds
        the node's controller lease (``node.claim``) and this request does not carry its grant."""

        async def guarded(h: p.Header, body: dict[str, Any]) -> dict[str, Any] | p.Packed:
            self.claims.check(NODE, h.grant)
            return await handler(h, body)

        return guarded

    async def node_claim(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        lease = f.opt_int(body, "lease_ms", lo=100, hi=24 * 3600 * 1000) or DEFAULT_LEASE_MS
        self.claims.claim(
            NODE,
            0,
            h.sender,
            lease_ms=lease,
            take_over=f.opt_bool(body, "take_over"),
            renew=f.opt_str(body, "renew", max_len=64) or "",
        )
        return {"claim": self.claims.get(NODE)}

    async def node_release(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        self.claims.release(NODE, f.req_str(body, "grant", max_len=64))
        return {"released": True}

    async def lookup(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        op_id = f.req_str(body, "op", max_len=128)
        seen = await self._seen(op_id)
        if seen is None:
            return {"op": op_id, "state": "unknown", "result": None}
        return {
            "op": op_id,
            "state": seen["state"],
            "method": seen["method"],
            "record": seen["record"],
            "result": seen["result"],
        }

    async def turn_wait(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """Wait (up to ``timeout_ms``) for a turn (default: the record's latest) to end."""
        record = await self.sessions.find(f.req_str(body, "id"))
        turn_id = f.opt_str(body, "turn", max_len=64)
        timeout_ms = f.opt_int(body, "timeout_ms", hi=600_000)
        deadline = time.monotonic() + (30_000 if timeout_ms is None else timeout_ms) / 1000
        while True:
            # listening before looking: a turn that ends in between still wakes this wait
            ended = asyncio.get_running_loop().create_future()
            waits = self._turn_waits.setdefault(record.id, set())
            waits.add(ended)
            try:
                turn = await self._turn(record.id, turn_id or "")
                if turn["state"] != "running" or time.monotonic() > deadline:
                    return {"turn": turn, "ended": turn["state"] != "running"}
                left = max(0.0, deadline - time.monotonic())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ended, min(TURN_POLL_S, left + 0.001))
            finally:
                waits.discard(ended)
                if not waits and self._turn_waits.get(record.id) is waits:
                    del self._turn_waits[record.id]

    async def _turn(self, record_id: str, turn_id: str) -> dict[str, Any]:
        if turn_id:
            turn = (await self.peer.call("state", "state.turn.get", {"id": turn_id}))["turn"]
        else:
            reply = await self.peer.call("state", "state.turn.latest", {"record": record_id})
            turn = reply["turn"]
        if turn is None or turn["record"] != record_id:
            raise RoostError(
                "not-found", "no such turn for this record", {"ref": turn_id or record_id}
            )
        result: dict[str, Any] = turn
        return result

    def turn_ended(self, record_id: str) -> None:
        """The state store published a ``session.turn`` event for the record (a turn ended):
        its ``turn.wait`` calls look again now rather than at their next poll."""
        for ended in self._turn_waits.pop(record_id, ()):
            if not ended.done():
                ended.set_result(None)
