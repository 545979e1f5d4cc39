"""A turn's outcome from its end and facts, the facts kept beside the spool, and the queries
behind a repeated begin and orphaned turns (supervisor/delivery.py, state/db.py)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from roost.actors.state import db
from roost.actors.state.records import ACTIVE_STATES, DORMANT, LIVE, Record
from roost.actors.supervisor.delivery import FACTS, Deliverer, outcome, read_facts
from roost.wire.errors import RoostError
from roost.wire.messages import OutboxEntry, RecordState
from tests import kit

RESULT = {"result": "echo: hi", "is_error": False, "session_id": "s-1"}


class FakePeer(kit.FakePeer):
    """Answers ``adapter.parse`` with the facts queued for it; ``state.turn.end`` fails with
    the codes queued, then records the call."""

    def __init__(self, facts: list[dict[str, Any]], failures: list[str]) -> None:
        super().__init__()
        self.facts, self.failures = facts, failures
        self.ends: list[dict[str, Any]] = []

    async def answer(
        self, target: str, method: str, body: dict[str, Any], kw: dict[str, Any]
    ) -> Any:
        if method == "adapter.parse":
            return {"events": [], "facts": self.facts.pop(0)}
        if method == "state.turn.end":
            if self.failures:
                code = self.failures.pop(0)
                raise RoostError(code, f"{code} on purpose")
            self.ends.append(body)
            return {"ended": True}
        return {"seqs": []}


def _entry(t: str, n: int, **kw: Any) -> OutboxEntry:
    return cast(OutboxEntry, {"t": t, "n": n, "turn": "t1", "record": "r1", "generation": 1, **kw})


def test_completed_only_with_exit_0_and_a_finished_provider() -> None:
    end: OutboxEntry = {"exit": 0, "reason": None}
    assert outcome(end, RESULT)[0] == "completed"
    assert outcome(end, {"completed": True})[0] == "completed"
    assert outcome(end, {})[0] == "failed"
    assert outcome({**end, "exit": 1}, RESULT)[0] == "failed"
    assert outcome(end, {**RESULT, "is_error": True})[0] == "failed"
    _, result = outcome(end, RESULT)
    assert result["result"] == "echo: hi" and result["provider_session"] == "s-1"


def test_facts_survive_a_failed_end_and_a_new_deliverer(tmp_path: Path) -> None:
    """The end's first attempt fails (the store restarting): the facts stay, on disk too, so a
    retry and a Deliverer made afresh on the same directory (the node's salvage) have them."""
    peer = FakePeer([{"session_id": "s-1"}, RESULT], ["unavailable"])
    deliver = Deliverer(peer, "echo", "i1", directory=tmp_path)
    asyncio.run(deliver(_entry("line", 1, line="{}")))
    asyncio.run(deliver(_entry("line", 2, line="{}")))
    with pytest.raises(RoostError):
        asyncio.run(deliver(_entry("turn-end", 3, exit=0)))
    assert read_facts(tmp_path)["t1"]["result"] == "echo: hi"
    again = Deliverer(peer, "echo", "i2", directory=tmp_path)
    asyncio.run(again(_entry("turn-end", 3, exit=0)))
    assert peer.ends[0]["state"] == "completed" and peer.ends[0]["result"]["result"] == "echo: hi"
    assert not (tmp_path / FACTS).exists()  # recorded: nothing left to keep


def test_a_refused_end_forgets_its_facts(tmp_path: Path) -> None:
    peer = FakePeer([RESULT], ["bad-request"])
    deliver = Deliverer(peer, "echo", "i1", directory=tmp_path)
    asyncio.run(deliver(_entry("line", 1, line="{}")))
    with pytest.raises(RoostError):
        asyncio.run(deliver(_entry("turn-end", 2, exit=0)))
    assert read_facts(tmp_path) == {}


def test_unreadable_facts_read_as_none(tmp_path: Path) -> None:
    assert read_facts(tmp_path) == {} and read_facts(None) == {}
    (tmp_path / FACTS).write_bytes(b"\xc1 not msgpack")
    assert read_facts(tmp_path) == {}


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection, _ = db.open_db(tmp_path / "state.db", "n-test")
    yield connection
    connection.close()


def _record(conn: sqlite3.Connection, record_id: str, state: RecordState) -> None:
    db.insert_record(
        conn,
        Record(
            id=record_id,
            name=None,
            provider="echo",
            mode="stream",
            cwd="/work",
            state=state,
            created=1.0,
            updated=1.0,
        ),
    )


def test_orphan_turns_are_the_running_turns_of_records_not_active(
    conn: sqlite3.Connection,
) -> None:
    _record(conn, "r-live", LIVE)
    _record(conn, "r-dormant", DORMANT)
    for turn_id, record_id in (("t1", "r-live"), ("t2", "r-dormant"), ("t3", "r-dormant")):
        db.begin_turn(conn, {"id": turn_id, "record": record_id, "generation": 1, "text": "x"})
    db.end_turn(conn, "t3", "completed", {})
    assert [t["id"] for t in db.orphan_turns(conn, ACTIVE_STATES)] == ["t2"]


def test_event_seq_finds_an_event_by_its_id(conn: sqlite3.Connection) -> None:
    written = db.append_event(conn, {"kind": "session.input", "eid": "i1:turn:t1"})
    assert db.event_seq(conn, "i1:turn:t1") == written["seq"]
    assert db.event_seq(conn, "nosuch") is None
