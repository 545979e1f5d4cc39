"""Operations and turns in the state store: what makes retries safe and turns accounted for.

An operation id seen before returns its first outcome; a turn is created with its accepted
operation and its user-input event in one transaction, and ended (completed, failed or
interrupted) exactly once, its operation following it.
"""

from __future__ import annotations

from typing import Any, cast

from roost.actors.runtime.peer import Serving
from roost.actors.state import db, ledger
from roost.actors.state.records import ACTIVE_STATES
from roost.actors.state.writer import Writer
from roost.wire import fields as f
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.messages import Event


def check_events(body: dict[str, Any]) -> list[Event]:
    raw = body.get("events") or []
    if not isinstance(raw, list):
        raise RoostError("bad-request", "field 'events' must be a list", {"field": "events"})
    out: list[Event] = []
    for item in raw:
        if not isinstance(item, dict) or item.get("kind") not in p.EVENT_KINDS:
            raise RoostError("bad-request", "each event needs a known 'kind'", {"field": "events"})
        out.append(cast(Event, item))  # checked: a map with a known kind
    return out


def check_op(body: dict[str, Any]) -> dict[str, Any] | None:
    raw = body.get("op")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise RoostError("bad-request", "field 'op' must be a map", {"field": "op"})
    op = {
        "id": f.req_str(raw, "id", max_len=128),
        "method": f.req_str(raw, "method"),
        "record": f.opt_str(raw, "record"),
        "state": f.opt_str(raw, "state") or "terminal",
        "result": f.opt_map(raw, "result"),
    }
    if op["state"] not in db.OP_STATES:
        raise RoostError(
            "bad-request", "field 'op.state' is not an operation state", {"field": "op"}
        )
    return op


class Journal:
    """The ``state.op.*`` and ``state.turn.*`` methods."""

    def __init__(self, store: Writer) -> None:
        self.store = store

    def handlers(self) -> dict[str, Serving]:
        return {
            "state.op.get": self._op_get,
            "state.op.put": self._op_put,
            "state.turn.begin": self._turn_begin,
            "state.turn.end": self._turn_end,
            "state.turn.interrupt": self._turn_interrupt,
            "state.turn.orphans": self._turn_orphans,
            "state.turn.get": self._turn_get,
            "state.turn.latest": self._turn_latest,
        }

    async def _op_get(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        return {"op": db.get_op(self.store.conn, f.req_str(body, "id", max_len=128))}

    async def _op_put(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        op = check_op(body)
        if op is None:
            raise RoostError("bad-request", "field 'op' is required", {"field": "op"})

        def mutation() -> tuple[dict[str, Any], list[Event]]:
            db.put_op(self.store.conn, op)
            return {"op": db.get_op(self.store.conn, op["id"])}, []

        return await self.store.write(mutation)

    async def _turn_begin(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """Create a running turn, its accepted operation and its input event, atomically. A turn
        id seen before answers ``{turn, seq, state}`` and does nothing (a supervisor repeats a
        begin the store did not answer in time: it may have been committed late)."""
        turn = f.opt_map(body, "turn")
        for key in ("id", "record", "text"):
            f.text(turn, key)
        f.req_int(turn, "generation")
        op = check_op(body)
        events = check_events(body)

        def mutation() -> tuple[dict[str, Any], list[Event]]:
            if (again := db.get_turn(self.store.conn, turn["id"])) is not None:
                # a repeated begin (the first one's reply was lost): what became of the turn
                eid = next((e.get("eid") for e in events if e.get("eid")), None)
                seq = db.event_seq(self.store.conn, eid) if eid else None
                return {"turn": again["id"], "seq": seq, "state": again["state"]}, []
            if op is not None and (seen := db.get_op(self.store.conn, op["id"])) is not None:
                return {"duplicate": True, "op": seen, **(seen["result"] or {})}, []
            db.begin_turn(self.store.conn, {**turn, "op": op["id"] if op else None})
            written = self.store.append(events)
            result = {"turn": turn["id"], "seq": written[0]["seq"] if written else None}
            if op is not None:
                db.put_op(self.store.conn, {**op, "state": "accepted", "result": result})
            return result, written

        return await self.store.write(mutation)

    async def _turn_end(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        turn_id, state = f.req_str(body, "id"), f.req_str(body, "state")
        if state not in db.TURN_STATES[1:]:
            raise RoostError("bad-request", "field 'state' must end a turn", {"field": "state"})
        result = f.opt_map(body, "result")
        events = check_events(body)

        def mutation() -> tuple[dict[str, Any], list[Event]]:
            return self.end_turn(turn_id, state, result, events)

        return await self.store.write(mutation)

    def end_turn(
        self, turn_id: str, state: str, result: dict[str, Any], events: list[Event]
    ) -> tuple[dict[str, Any], list[Event]]:
        turn = db.get_turn(self.store.conn, turn_id)
        if turn is None or not db.end_turn(self.store.conn, turn_id, state, result):
            return {"ended": False, "turn": turn}, []
        if (used := ledger.turn_usage(result)) is not None:
            record = db.get_record(self.store.conn, turn["record"]).to_wire()
            session = result.get("provider_session") or record.get("provider_session")
            ledger.insert(
                self.store.conn, record, used, source="stream", turn=turn_id,
                provider_session=session if isinstance(session, str) else None,
            )  # fmt: skip
        if turn["op"]:
            op_state = "interrupted" if state == "interrupted" else "terminal"
            op = db.get_op(self.store.conn, turn["op"]) or {
                "id": turn["op"],
                "method": "session.turn",
            }
            db.put_op(
                self.store.conn,
                {
                    **op,
                    "record": turn["record"],
                    "state": op_state,
                    "result": {"turn": turn_id, "status": state, **result},
                },
            )
        status: Event = {
            "kind": "session.turn",
            "record": turn["record"],
            "generation": turn["generation"],
            "data": {"turn": turn_id, "status": state, **result},
        }
        return {"ended": True, "turn": db.get_turn(self.store.conn, turn_id)}, self.store.append(
            [*events, status]
        )

    async def _turn_interrupt(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        record_id, reason = f.req_str(body, "record"), f.opt_str(body, "reason") or "lost"

        def mutation() -> tuple[dict[str, Any], list[Event]]:
            ended, published = [], []
            for turn in db.running_turns(self.store.conn, record_id):
                _, events = self.end_turn(turn["id"], "interrupted", {"reason": reason}, [])
                ended.append(turn["id"])
                published += events
            return {"interrupted": ended}, published

        return await self.store.write(mutation)

    async def _turn_orphans(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """Turns still ``running`` whose record is not active (no supervisor should own them)."""
        return {"turns": db.orphan_turns(self.store.conn, ACTIVE_STATES)}

    async def _turn_get(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        return {"turn": db.get_turn(self.store.conn, f.req_str(body, "id", max_len=128))}

    async def _turn_latest(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        return {"turn": db.latest_turn(self.store.conn, f.req_str(body, "record", max_len=128))}
