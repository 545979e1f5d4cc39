"""Committing an accepted input or turn: the state-store requests and what an unanswered one means.

Accepted means durable: an input is answered ``accepted`` once its ``session.input`` event (and
its operation) is committed, a turn once its row, its operation and its input event are, in one
transaction. The node is the only process that makes these commits. A request refused at once
committed nothing; one with no answer by its deadline may have been committed (a stalled store
commits it when it runs again), so it is repeated with the same event id or turn id, which the
store applies once, until the store answers.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, cast

import structlog

from roost.actors.runtime import eager
from roost.actors.runtime.caller import Caller
from roost.wire.errors import REFUSED, TRANSIENT, RoostError
from roost.wire.messages import AppendReply, Event

log = structlog.get_logger("roost.commit")

COMMIT_WAIT_S = 10.0  # a commit unanswered this long may still have been committed
COMMIT_RETRY_S = 0.5
GROUP_MAX = 64  # inputs in one state.events.append_each (the state store's writer batch)


def new_turn_id() -> str:
    return "t" + uuid.uuid4().hex[:11]


def input_body(
    record: str, generation: int, data: dict[str, Any], eid: str, op: str, method: str
) -> dict[str, Any]:
    """``state.events.append``'s body for typed input: its event and its operation."""
    event: Event = {
        "kind": "session.input",
        "record": record,
        "generation": generation,
        "data": data,
        "eid": eid,
    }
    body: dict[str, Any] = {"events": [event]}
    if op:
        body["op"] = {"id": op, "method": method, "record": record}
    return body


def begin_body(
    record: str, generation: int, eid: str, turn_id: str, text: str, op: str
) -> dict[str, Any]:
    """``state.turn.begin``'s body: the turn, its ``session.input`` event, its operation."""
    body: dict[str, Any] = {
        "turn": {"id": turn_id, "record": record, "generation": generation, "text": text},
        "events": [
            {
                "kind": "session.input",
                "record": record,
                "generation": generation,
                "data": {"input": "turn", "text": text, "turn": turn_id},
                "eid": eid,
            }
        ],
    }
    if op:
        body["op"] = {"id": op, "method": "session.turn", "record": record}
    return body


async def until_answered(attempt: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    """``attempt()`` until it is answered: a refusal at once (nothing was committed) is raised;
    a transient failure after ``COMMIT_WAIT_S`` without an answer (it may have been committed)
    tries again, as does any transient failure after that first try. A store that could not
    write (``REFUSED``: a full disk) on the first try committed nothing either."""
    loop, attempts = asyncio.get_running_loop(), 0
    while True:
        attempts, started = attempts + 1, loop.time()
        try:
            return await attempt()
        except RoostError as err:
            unanswered = loop.time() - started >= COMMIT_WAIT_S
            if err.code not in TRANSIENT or (attempts == 1 and not unanswered):
                raise
            if attempts == 1:
                log.warning("commit-unanswered", code=err.code)
        await asyncio.sleep(COMMIT_RETRY_S)


async def begin_turn(peer: Caller, body: dict[str, Any]) -> dict[str, Any]:
    """``state.turn.begin`` until the store answers. A call that timed out may have been applied,
    so it is repeated with the same turn id, which the store answers once, until the store says
    what became of the turn."""
    turn_id, attempts = body["turn"]["id"], 0
    while True:
        attempts += 1
        try:
            accepted: dict[str, Any] = await peer.call(
                "state", "state.turn.begin", body, timeout=COMMIT_WAIT_S
            )
        except RoostError as err:
            if err.code not in TRANSIENT or (attempts == 1 and err.code in REFUSED):
                raise  # refused, or the store could not write it: nothing was begun
            if attempts == 1:
                log.warning("turn-begin-unanswered", turn=turn_id, code=err.code)
            await asyncio.sleep(COMMIT_RETRY_S)
            continue
        if attempts > 1:
            log.info("turn-begin-settled", turn=turn_id, attempts=attempts)
        return accepted


Waiting = list[tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]]


class GroupCommit:
    """Input commits, grouped: one ``state.events.append`` on its way at a time, and what comes
    meanwhile goes next, together, in one ``state.events.append_each`` (one request and one
    answer for the lot). One input with nothing on its way goes at once, as a plain append.
    Each input keeps ``until_answered``'s rules."""

    def __init__(self, peer: Caller) -> None:
        self.peer = peer
        self._waiting: Waiting = []
        self._sending = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.sent = 0  # requests to the state store (node.status inputs.commit_requests)

    async def commit(self, body: dict[str, Any]) -> AppendReply:
        """``state.events.append`` of ``body``, grouped with what else waits."""
        return cast(AppendReply, await until_answered(lambda: self._once(body)))

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

    async def _request(self, group: Waiting) -> None:
        self.sent += 1
        try:
            if len(group) == 1:
                one = await self.peer.call(
                    "state", "state.events.append", group[0][0], timeout=COMMIT_WAIT_S
                )
                answers = [{"ok": one}]
            else:
                reply = await self.peer.call(
                    "state",
                    "state.events.append_each",
                    {"items": [body for body, _ in group]},
                    timeout=COMMIT_WAIT_S,
                )
                answers = reply["results"]
        except RoostError as err:  # the whole request: each input decides (until_answered)
            answers = [{"error": err.to_body()}] * len(group)
        for (_, future), answer in zip(group, answers, strict=True):
            if future.done():
                continue
            if "ok" in answer:
                future.set_result(answer["ok"])
            else:
                future.set_exception(RoostError.from_body(answer.get("error") or {}))
