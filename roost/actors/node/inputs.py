"""The one committer of input and turns: ``session.prompt``, ``session.input``, ``session.key`` and
``session.turn``.

Every input and every turn begin is checked here (the record's mode, the supervisor's gate, the
size of what waits), committed here (its ``session.input`` event and its operation, or the turn,
its event and its operation, in one state-store transaction, which is also where a repeated
operation id is found), answered ``accepted``, and handed to the supervisor to execute
(``session.type {seq, data}`` or ``session.run {turn, text}``). The supervisor types or runs what
it is handed once, in commit order, and learns from the log what a node that died before its
hand-over did not hand over (its catch-up). The node commits because it is where every request
arrives and where the claims, the operation ids and the record are: the accepted prompt's path is
the client, the node and one commit, and the supervisor only says what holds its input back
(``gates``).

An operation id names one operation, the first request's. A repeat, whatever record or text it
names, runs nothing: it answers the first outcome. The one thing a repeat does is finish its own
operation: an input or turn whose commit was answered after its node died (a stalled store),
which nobody handed over, is handed over to its own record's supervisor, which types or runs it
only if it never did.

Order: one record's inputs are taken one at a time and handed over in commit order; a hand-over
that gets no answer is repeated (the supervisor types a seq once) while the record is live in
the same generation, and dropped at once when its supervisor is known to be gone.

A typed text with a line longer than the agent's terminal takes (the gate's ``line_max``, while
the terminal is in canonical mode and would cut it) is refused, ``line-too-long``, before its
commit: never accepted and cut.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from roost.actors.node.commit import (
    GroupCommit,
    begin_body,
    begin_turn,
    input_body,
    new_turn_id,
)
from roost.actors.node.gates import (
    FULL_WAIT_S,
    HOLD_WAIT_S,
    Gate,
    Gates,
    line_refusal,
    refusal,
)
from roost.actors.node.sessions import Sessions
from roost.actors.runtime.caller import Caller
from roost.actors.runtime.keyed import KeyedLocks
from roost.actors.runtime.process import logged_crash
from roost.actors.state import records as r
from roost.adapters.base import key_names
from roost.wire import fields as f
from roost.wire import protocol as p
from roost.wire.errors import TRANSIENT, RoostError
from roost.wire.limits import INPUT_PENDING_MAX
from roost.wire.messages import Active

log = structlog.get_logger("roost.inputs")

COMMITTING_WIRE = 3  # supervisors from this wire on commit nothing themselves
HAND_OVER_WAIT_S = 10.0  # a hand-over unanswered this long is sent again
DRAIN_S = 5.0  # a stopping node waits at most this long for its hand-overs
RETRY_S = 0.2
BUSY_RETRY_S = 1.0


def checked(record: r.Record, method: str, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The one check of an input's or turn's request against its record: the mode, the keys,
    the text. Returns what its event logs (``data``) and its size in bytes."""
    if method == "session.turn":
        if record.mode != "stream":
            raise RoostError(
                "bad-request", "turns need a stream-mode session; use prompt", {"field": "mode"}
            )
        text = f.text(body, "text")
        return {"input": "turn", "text": text}, len(text.encode())
    if record.mode != "pty":
        raise RoostError(
            "bad-request", "a stream-mode session takes turns, not typed input", {"field": "mode"}
        )
    kind = p.TYPED_METHODS[method]
    if kind == "key":
        keys = key_names(body)
        return {"input": kind, "keys": keys}, len(keys) * 8
    text = f.text(body, "text")
    return {"input": kind, "text": text}, len(text.encode())


def logged(data: dict[str, Any], withhold: str) -> dict[str, Any]:
    """What the log keeps of typed input: all of it, or, on a login or API-key screen (a token
    pasted there), a text's length only and why (``withheld``): no secret reaches the log."""
    if not withhold or "text" not in data:
        return data
    return {"input": data["input"], "length": len(data["text"]), "withheld": withhold}


def legacy(active: Active) -> bool:
    """A supervisor of an earlier release, which commits forwarded input itself."""
    wire = (active.get("supervisor") or {}).get("wire")
    return not isinstance(wire, int) or wire < COMMITTING_WIRE


@dataclass
class _Typed:
    """One hand-over: ``session.type {seq, data}`` or ``session.run {turn, text}``."""

    generation: int
    method: str
    body: dict[str, Any]
    size: int


class Inputs:
    def __init__(self, peer: Caller, sessions: Sessions) -> None:
        self.peer, self.sessions = peer, sessions
        self.gates = Gates()
        self._locks = KeyedLocks()  # one input of a record at a time
        self._queues: dict[str, collections.deque[_Typed]] = {}
        self._delivering: dict[str, asyncio.Task[None]] = {}
        self._typing: dict[str, tuple[_Typed, asyncio.Future[bool]]] = {}  # the call in flight
        self._waiting: dict[str, int] = {}  # record -> bytes committed, not handed over yet
        self._eids = itertools.count(1)
        self._prefix = f"node:{os.urandom(6).hex()}:"
        self._group = GroupCommit(peer)
        self.committed = 0  # inputs and turns committed since the node started (node.status)
        self.committing = 0  # commits awaiting the state store now
        self.stopping = False
        self.refusing = False  # a stop is waiting for the inputs under way: no new ones

    def status(self) -> dict[str, int]:
        """``node.status``'s ``inputs``."""
        return {
            "gates_open": len(self.gates),
            "committed": self.committed,
            "committing": self.committing,
            "handing_over": sum(len(q) for q in self._queues.values()),
            "commit_requests": self._group.sent,
        }

    async def drain(self, limit: float = DRAIN_S) -> int:
        """As the node stops: accept nothing more, then wait at most ``limit`` seconds for the
        commits under way and the hand-overs, so that what the node accepted is typed now rather
        than with the next node's catch-up. Returns how many are left."""
        self.stopping = True
        self.gates.clear()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while (self.committing or self._queues) and (left := deadline - loop.time()) > 0:
            tasks = list(self._delivering.values())
            if self.committing or not tasks:  # a commit's hand-over is queued once it returns
                await asyncio.sleep(min(RETRY_S / 4, left))
                continue
            await asyncio.wait(tasks, timeout=left)
        left = self.committing + sum(len(q) for q in self._queues.values())
        if left:
            log.warning("input-hand-overs-left", left=left, why="the node stopped first")
        return left

    # -- the gate ------------------------------------------------------------------------------

    def on_gate(self, sender: str, body: dict[str, Any]) -> None:
        """A supervisor's ``node.session.gate``."""
        record = body.get("record")
        if not isinstance(record, str) or sender != f"session/{record}" or self.stopping:
            return
        self.gates.put(record, Gate.parse(body))

    def closed(self, record_id: str) -> None:
        """The supervisor re-registered (or left): its gate holds until it says otherwise."""
        self.gates.put(record_id, None)

    def turn_ended(self, record_id: str) -> None:
        """The state store published a turn's end for the record: the supervisor will open its
        gate once its delivery is done; a turn sent meanwhile waits for that, not ``busy``."""
        gate = self.gates.get_any(record_id)
        if gate is not None and gate.state == "busy":
            self.gates.put(record_id, Gate(gate.generation, gate.instance, "hold", "delivery"))

    def follow(self, record: r.Record) -> None:
        """A record as the node now knows it: what was committed for a supervisor that is no
        longer the record's live one (lost, stopped, replaced by a new generation) is handed to
        it no more, and nothing waits for its gate."""
        live = live_generation(record)
        gate = self.gates.get_any(record.id)
        instance = (record.active or {}).get("instance")
        if gate is not None and (gate.generation != live or instance not in (None, gate.instance)):
            self.gates.put(record.id, Gate(gate.generation, gate.instance, "closed"))
        queue = self._queues.get(record.id)
        stale = [t for t in queue or () if t.generation != live]
        if not stale or queue is None:
            return
        log.warning("input-not-typed", record=record.id, left=len(stale), why="supervisor gone")
        kept = [t for t in queue if t.generation == live]
        for typed in stale:
            self._waiting[record.id] -= typed.size
        queue.clear()
        queue.extend(kept)
        attempt = self._typing.get(record.id)
        if attempt is not None and attempt[0].generation != live:
            attempt[1].cancel()  # the call in flight to the gone supervisor

    async def _open(self, record: r.Record, active: Active, size: int) -> Gate:
        """The record's gate once it is open for input of ``size`` bytes; waits (bounded) while
        it holds, refuses when it will not open."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        while True:
            if self.stopping or self.refusing:
                raise RoostError("unavailable", "the node is stopping; nothing was accepted")
            gate = self.gates.get(record.id, active)
            full = size and self._waiting.get(record.id, 0) >= INPUT_PENDING_MAX
            if gate is not None and gate.state == "open" and not full:
                return gate
            if gate is not None and gate.state in ("busy", "refused", "closed"):
                raise refusal(gate, record.id)
            wait = FULL_WAIT_S if full or (gate and gate.state == "full") else HOLD_WAIT_S
            left = started + wait - loop.time()
            if left <= 0:
                if full:
                    gate = Gate(int(active["generation"]), str(active["instance"]), "full")
                raise refusal(gate, record.id)
            await self.gates.changed(record.id, min(left, RETRY_S * 5))

    # -- accepting -----------------------------------------------------------------------------

    async def accept(
        self,
        record: r.Record,
        active: Active,
        h: p.Header,
        body: dict[str, Any],
        forward: Callable[[], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any]:
        """Check, commit and hand over one input or turn; one of a record's at a time. A
        supervisor of an earlier release is forwarded the request and commits it itself."""
        data, size = checked(record, h.method, body)
        if legacy(active):
            return await forward()
        async with self._locks.hold(record.id):
            gate = await self._open(record, active, size if h.method != "session.turn" else 0)
            if h.method == "session.turn":
                return await self._begin(record, active, gate, h, data["text"])
            if "text" in data and (refused := line_refusal(gate, data["text"], record.id)):
                raise refused  # the terminal would cut it: refused before it is committed
            return await self._commit(record, active, gate, h, data, size)

    def _eid(self, kind: str) -> str:
        return f"{self._prefix}{kind}:{next(self._eids)}"

    async def _commit(
        self,
        record: r.Record,
        active: Active,
        gate: Gate,
        h: p.Header,
        data: dict[str, Any],
        size: int,
    ) -> dict[str, Any]:
        generation = int(active["generation"])
        body = input_body(
            record.id, generation, logged(data, gate.withhold), self._eid("input"), h.op, h.method
        )
        self.committing += 1
        try:
            committed = await self._group.commit(body)
        finally:
            self.committing -= 1
        seqs = committed.get("seqs")
        seq = seqs[0] if seqs else None
        if committed.get("duplicate"):
            first = committed.get("op") or {}
            if isinstance(seq, int) and first.get("record") == record.id:
                self._hand_over(record.id, _Typed(generation, "session.type", {"seq": seq}, 0))
            return {"accepted": True, "duplicate": True, "seq": seq, "op": first}
        assert isinstance(seq, int)
        self.committed += 1
        typed = _Typed(generation, "session.type", {"seq": seq, "data": data}, size)
        self._hand_over(record.id, typed)
        return {"accepted": True, "seq": seq}

    async def _begin(
        self, record: r.Record, active: Active, gate: Gate, h: p.Header, text: str
    ) -> dict[str, Any]:
        """A stream-mode turn: begun (the turn, its event and its operation in one transaction),
        then handed over to run. The gate is busy from now on: one turn at a time."""
        generation, turn_id = int(active["generation"]), new_turn_id()
        busy = Gate(gate.generation, gate.instance, "busy", turn=turn_id)
        self.gates.put(record.id, busy)

        def unbusy() -> None:  # nothing was begun: the gate as it was, unless it was said since
            if self.gates.get_any(record.id) == busy:
                self.gates.put(record.id, gate)

        body = begin_body(record.id, generation, self._eid(f"turn:{turn_id}"), turn_id, text, h.op)
        self.committing += 1
        try:
            accepted = await begin_turn(self.peer, body)
        except BaseException:
            unbusy()
            raise
        finally:
            self.committing -= 1
        if accepted.get("duplicate"):
            unbusy()
            first = accepted.get("op") or {}
            turn = (first.get("result") or {}).get("turn")
            if isinstance(turn, str) and first.get("record") == record.id:
                self._hand_over(record.id, _Typed(generation, "session.run", {"turn": turn}, 0))
            return {"accepted": True, "duplicate": True, **accepted}
        reply = {"accepted": True, "turn": turn_id, "seq": accepted.get("seq")}
        if accepted.get("state", "running") != "running":
            unbusy()
            return reply  # committed by an attempt whose reply was lost, and ended since
        self.committed += 1
        run = _Typed(generation, "session.run", {"turn": turn_id, "text": text}, 0)
        self._hand_over(record.id, run)
        return reply

    # -- handing over --------------------------------------------------------------------------

    def _hand_over(self, record_id: str, typed: _Typed) -> None:
        queue = self._queues.get(record_id)
        self._waiting[record_id] = self._waiting.get(record_id, 0) + typed.size
        if queue is not None:
            queue.append(typed)
            return
        self._queues[record_id] = collections.deque([typed])
        task = asyncio.get_running_loop().create_task(
            self._deliver(record_id), name=f"hand-over {record_id}"
        )
        task.add_done_callback(logged_crash)  # what it held is lost: a bug, said loudly
        self._delivering[record_id] = task

    async def _deliver(self, record_id: str) -> None:
        queue = self._queues[record_id]
        this = asyncio.current_task()
        try:
            while queue:
                typed = queue[0]
                attempt = asyncio.ensure_future(self._type(record_id, typed))
                self._typing[record_id] = (typed, attempt)
                try:
                    done = await attempt
                except asyncio.CancelledError:
                    if this is not None and this.cancelling():
                        raise
                    done = False  # dropped by ``follow``: its supervisor is gone
                finally:
                    self._typing.pop(record_id, None)
                if done and queue and queue[0] is typed:
                    queue.popleft()
                    self._waiting[record_id] -= typed.size
                self.gates.wake(record_id)  # room for input that waits for it
        finally:
            self._queues.pop(record_id, None)
            self._waiting.pop(record_id, None)
            self._delivering.pop(record_id, None)

    async def _type(self, record_id: str, typed: _Typed) -> bool:
        """Hand one input over; True once it is typed, or can never be (the generation ended)."""
        try:
            await self.peer.call(
                f"session/{record_id}",
                typed.method,
                typed.body,
                session={"generation": typed.generation},
                timeout=HAND_OVER_WAIT_S,
            )
            return True
        except RoostError as err:
            # busy: a turn handed over while the one before still runs (the gate as the node
            # saw it was older than the supervisor's): it runs after that one
            again = err.code in TRANSIENT or (err.code == "busy" and typed.method == "session.run")
            if again and await self._same_life(record_id, typed.generation):
                await asyncio.sleep(RETRY_S if err.code in TRANSIENT else BUSY_RETRY_S)
                return False
            log.warning("input-not-typed", record=record_id, method=typed.method, code=err.code)
            return True

    async def _same_life(self, record_id: str, generation: int) -> bool:
        try:
            record = await self.sessions.find(record_id)
        except RoostError as err:
            return err.code != "not-found"
        return live_generation(record) == generation


def live_generation(record: r.Record) -> int | None:
    """The generation whose supervisor may take the record's input: the active one while the
    record is starting, live or in attention; None once it is ending or ended."""
    if record.state not in (r.STARTING, r.LIVE, r.ATTENTION):
        return None
    generation = (record.active or {}).get("generation", record.generation)
    return generation if isinstance(generation, int) else None
