"""Input the node commits itself: ``session.prompt``, ``session.input`` and ``session.key``.

While a supervisor's gate is open (it said so with a ``node.session.gate`` notification: no
resume's verdict awaited, no login or API-key screen, its agent reading), the node commits the
input's ``session.input`` event and its operation in one state-store transaction, answers
``accepted``, and hands the input to the supervisor to type (``session.type`` with the event's
seq). The accepted prompt's path is then the client, the node and one commit. Otherwise the
request goes to the supervisor, which commits it as before (``keyboard``).

Order: one record's inputs are taken one at a time here, by either way, and handed over in the
order they were committed; a forwarded input waits until the node has handed over every input it
committed before. Nothing committed is lost: a hand-over that gets no answer is repeated (the
supervisor types a seq once) while the record is live in the same generation, and when the node
dies before it, the supervisor's catch-up after it re-registers types it from the log.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from roost.actors.node.sessions import Sessions
from roost.actors.runtime import eager
from roost.actors.runtime.keyed import KeyedLocks
from roost.actors.runtime.peer import Peer
from roost.actors.state import records as r
from roost.actors.supervisor.keyboard import COMMIT_WAIT_S, GATE_PENDING, until_answered
from roost.actors.supervisor.outbox import TRANSIENT
from roost.actors.supervisor.turns import begin_body, begin_turn, new_turn_id
from roost.adapters.base import key_names
from roost.broker import fields as f
from roost.broker import protocol as p
from roost.broker.errors import RoostError

log = structlog.get_logger("roost.inputs")

TYPED_METHODS = {"session.prompt": "prompt", "session.input": "input", "session.key": "key"}
COMMITTED_HERE = frozenset({*TYPED_METHODS, "session.turn"})
DIRECT_MAX = 64 << 10  # larger inputs go to the supervisor, which checks what waits exactly
HAND_OVER_WAIT_S = 10.0  # a hand-over unanswered this long is sent again
IDLE_WAIT_S = 10.0  # a forwarded input waits at most this long for the hand-overs before it
DRAIN_S = 5.0  # a stopping node waits at most this long for its hand-overs
RETRY_S = 0.2
REOPEN_S = 2.0  # a turn this soon after the record's last turn ended may find the gate about to
REOPEN_WAIT_S = 0.1  # reopen (the supervisor has its end's delivery to hear first): this long


GROUP_MAX = 64  # inputs in one state.events.append_each (the state store's writer batch)


class GroupCommit:
    """The node's input commits, grouped: one ``state.events.append`` on its way at a time, and
    what comes meanwhile goes next, together, in one ``state.events.append_each`` (one request
    and one answer for the lot, where each was a round trip of its own). One input with
    nothing on its way goes at once, as a plain append. Each input keeps ``commit_input``'s
    rules: an answer refusing it means nothing was committed; no answer by the deadline may
    mean it was, so it is repeated, same event id, until the store answers."""

    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self._waiting: list[tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]] = []
        self._sending = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.sent = 0  # requests to the state store (node.status inputs.commit_requests)

    async def commit(self, body: dict[str, Any]) -> dict[str, Any]:
        return await until_answered(lambda: self._once(body))

    def _once(self, body: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting.append((body, future))
        if not self._sending:
            self._sending = True
            eager.start(self._send(), self._tasks)  # its request goes out before this returns
        return future

    async def _send(self) -> None:
        try:
            while self._waiting:
                group, self._waiting = self._waiting[:GROUP_MAX], self._waiting[GROUP_MAX:]
                await self._request(group)
        finally:
            self._sending = False

    async def _request(
        self, group: list[tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]]
    ) -> None:
        self.sent += 1
        try:
            if len(group) == 1:
                answers = [
                    {
                        "ok": await self.peer.call(
                            "state", "state.events.append", group[0][0], timeout=COMMIT_WAIT_S
                        )
                    }
                ]
            else:
                reply = await self.peer.call(
                    "state",
                    "state.events.append_each",
                    {"items": [body for body, _ in group]},
                    timeout=COMMIT_WAIT_S,
                )
                answers = reply["results"]
        except RoostError as err:  # the whole request: each input decides (commit's loop)
            answers = [{"error": err.to_body()}] * len(group)
        for (_, future), answer in zip(group, answers, strict=True):
            if future.done():
                continue
            if "ok" in answer:
                future.set_result(answer["ok"])
            else:
                future.set_exception(RoostError.from_body(answer.get("error") or {}))


@dataclass
class _Typed:
    """One hand-over: ``session.type {seq, data}`` or ``session.run {turn, text}``."""

    generation: int
    method: str
    body: dict[str, Any]
    size: int


class Inputs:
    def __init__(self, peer: Peer, sessions: Sessions) -> None:
        self.peer, self.sessions = peer, sessions
        self.gates: dict[str, tuple[int, str]] = {}  # record -> (generation, instance) open
        self._locks = KeyedLocks()  # one input of a record at a time
        self._queues: dict[str, collections.deque[_Typed]] = {}
        self._idle: dict[str, asyncio.Event] = {}
        self._waiting: dict[str, int] = {}  # record -> bytes committed, not handed over yet
        self._eids = itertools.count(1)
        self._prefix = f"node:{os.urandom(6).hex()}:input:"
        self._group = GroupCommit(peer)
        self._tasks: set[asyncio.Task[None]] = set()
        self.committed = 0  # inputs committed here since the node started (node.status)
        self.committing = 0  # commits of this node's awaiting the state store now
        self.stopping = False
        self._turn_ended: dict[str, float] = {}  # record -> when its last turn's end was seen
        self._gate_heard: dict[str, asyncio.Event] = {}  # record -> set at its next gate message

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
        """As the node stops: shut every gate (what comes now goes to the supervisors, which
        commit it themselves), then wait at most ``limit`` seconds for the commits under way
        and the inputs committed here to be handed over, so that what the node accepted is
        typed now rather than with the next node's catch-up. Returns how many are left."""
        self.stopping = True  # no gate opens again
        self.gates.clear()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while (self.committing or self._queues) and (left := deadline - loop.time()) > 0:
            pending = [e for e in self._idle.values() if not e.is_set()]
            if self.committing or not pending:  # a commit's hand-over is queued once it returns
                await asyncio.sleep(min(RETRY_S / 4, left))
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(e.wait() for e in pending)), left)
        left = self.committing + sum(len(q) for q in self._queues.values())
        if left:
            log.warning("input-hand-overs-left", left=left, why="the node stopped first")
        return left

    # -- the gate ------------------------------------------------------------------------------

    def on_gate(self, sender: str, body: dict[str, Any]) -> None:
        """A supervisor's ``node.session.gate``: open or closed, for its generation."""
        record = body.get("record")
        if not isinstance(record, str) or sender != f"session/{record}":
            return
        generation, instance = body.get("generation"), body.get("instance")
        if (
            body.get("gate") is True
            and not self.stopping
            and isinstance(generation, int)
            and isinstance(instance, str)
        ):
            self.gates[record] = (generation, instance)
        else:
            self.gates.pop(record, None)
        if (heard := self._gate_heard.pop(record, None)) is not None:
            heard.set()

    def turn_ended(self, record_id: str) -> None:
        """The state store published a turn's end for the record (``session.turn``)."""
        self._turn_ended[record_id] = asyncio.get_running_loop().time()

    async def _reopening(self, record_id: str) -> None:
        """A turn sent the moment the one before it ended (``session.turn.wait`` answers when
        the end is committed) can come before the supervisor has heard that its delivery of the
        end went through and reopened its gate: wait a moment for its next gate message rather
        than take the slower way through the supervisor."""
        ended = self._turn_ended.pop(record_id, None)
        loop = asyncio.get_running_loop()
        if ended is None or record_id in self.gates or loop.time() - ended > REOPEN_S:
            return
        heard = self._gate_heard.setdefault(record_id, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(heard.wait(), REOPEN_WAIT_S)

    def closed(self, record_id: str) -> None:
        """The supervisor re-registered (or left): its gate is shut until it says otherwise."""
        self.gates.pop(record_id, None)
        self._turn_ended.pop(record_id, None)

    def _open(self, record: r.Record, active: dict[str, Any], size: int) -> bool:
        gate = self.gates.get(record.id)
        if gate is None:
            return False
        if gate != (active.get("generation"), active.get("instance")):
            del self.gates[record.id]  # an earlier supervisor's: it will not open again
            return False
        return size <= DIRECT_MAX and self._waiting.get(record.id, 0) + size <= GATE_PENDING

    # -- accepting -----------------------------------------------------------------------------

    async def accept(
        self,
        record: r.Record,
        active: dict[str, Any],
        h: p.Header,
        body: dict[str, Any],
        forward: Callable[[], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any]:
        """Commit the input here when the gate is open, else ``forward`` it; one at a time."""
        if h.method == "session.turn":
            await self._reopening(record.id)
            return await self._one_at_a_time(
                record.id,
                lambda: self._open(record, active, 0),
                lambda: self._begin(record, active, h, f.text(body, "text")),
                forward,
            )
        kind = TYPED_METHODS[h.method]
        if kind == "key":
            data: dict[str, Any] = {"input": kind, "keys": key_names(body)}
            size = len(data["keys"]) * 8
        else:
            text = f.text(body, "text")
            data, size = {"input": kind, "text": text}, len(text.encode())
        return await self._one_at_a_time(
            record.id,
            lambda: self._open(record, active, size),
            lambda: self._commit(record, active, h, data, size),
            forward,
        )

    async def _one_at_a_time(
        self,
        record_id: str,
        is_open: Callable[[], bool],
        commit: Callable[[], Awaitable[dict[str, Any]]],
        forward: Callable[[], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any]:
        async with self._locks.hold(record_id):
            if is_open():
                return await commit()
            await self._handed_over(record_id)
            return await forward()

    async def _commit(
        self, record: r.Record, active: dict[str, Any], h: p.Header, data: dict[str, Any], size: int
    ) -> dict[str, Any]:
        generation = int(active["generation"])
        body: dict[str, Any] = {
            "events": [
                {
                    "kind": "session.input",
                    "record": record.id,
                    "generation": generation,
                    "data": data,
                    "eid": f"{self._prefix}{next(self._eids)}",
                }
            ]
        }
        if h.op:
            body["op"] = {"id": h.op, "method": h.method, "record": record.id}
        self.committing += 1
        try:
            committed = await self._group.commit(body)
        finally:
            self.committing -= 1
        seq = (committed.get("seqs") or [None])[0]
        if committed.get("duplicate"):  # the op as first stored: the node answers with it
            if isinstance(seq, int):  # typed unless it was (a commit no one could hand over)
                self._hand_over(record.id, _Typed(generation, "session.type", {"seq": seq}, 0))
            return {"accepted": True, "duplicate": True, "seq": seq, "op": committed.get("op")}
        assert isinstance(seq, int)
        self.committed += 1
        typed = _Typed(generation, "session.type", {"seq": seq, "data": data}, size)
        self._hand_over(record.id, typed)
        return {"accepted": True, "seq": seq}

    async def _begin(
        self, record: r.Record, active: dict[str, Any], h: p.Header, text: str
    ) -> dict[str, Any]:
        """A stream-mode turn: begun here (turn, its event and operation in one transaction),
        then handed over to run. The gate shuts at once: one turn at a time."""
        self.gates.pop(record.id, None)
        generation, turn_id = int(active["generation"]), new_turn_id()
        body = begin_body(record.id, generation, str(active["instance"]), turn_id, text, h.op)
        self.committing += 1
        try:
            accepted = await begin_turn(self.peer, body)
        finally:
            self.committing -= 1
        if accepted.get("duplicate"):
            first = (accepted.get("op") or {}).get("result") or {}
            if isinstance(first.get("turn"), str):  # run unless it ran (as for typed input)
                again = _Typed(generation, "session.run", {"turn": first["turn"]}, 0)
                self._hand_over(record.id, again)
            return {"accepted": True, "duplicate": True, **accepted}
        reply = {"accepted": True, "turn": turn_id, "seq": accepted.get("seq")}
        if accepted.get("state", "running") != "running":
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
        self._idle.setdefault(record_id, asyncio.Event()).clear()
        task = asyncio.get_running_loop().create_task(self._deliver(record_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handed_over(self, record_id: str) -> None:
        """Until every input committed here for the record has been handed over (bounded)."""
        idle = self._idle.get(record_id)
        if idle is None or record_id not in self._queues:
            return
        try:
            await asyncio.wait_for(idle.wait(), IDLE_WAIT_S)
        except TimeoutError:
            log.warning("input-hand-over-slow", record=record_id)

    async def _deliver(self, record_id: str) -> None:
        queue = self._queues[record_id]
        try:
            while queue:
                typed = queue[0]
                if await self._type(record_id, typed):
                    queue.popleft()
                    self._waiting[record_id] -= typed.size
        finally:
            self._queues.pop(record_id, None)
            self._waiting.pop(record_id, None)
            self._idle.pop(record_id, asyncio.Event()).set()

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
            if err.code in (*TRANSIENT, "timeout", "unreachable") and await self._same_life(
                record_id, typed.generation
            ):
                await asyncio.sleep(RETRY_S)
                return False
            log.warning("input-not-typed", record=record_id, method=typed.method, code=err.code)
            return True

    async def _same_life(self, record_id: str, generation: int) -> bool:
        try:
            record = await self.sessions.find(record_id)
        except RoostError as err:
            return err.code != "not-found"
        active = record.active or {}
        return record.state in (r.LIVE, r.ATTENTION) and active.get("generation") == generation
