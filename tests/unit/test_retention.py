"""Event-log retention (state.retention) and the state store's trimming and gap notice."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from roost.actors.runtime.peer import Peer
from roost.actors.state import db, retention
from roost.actors.state.retention import Retention
from roost.actors.state.store import StateStore
from roost.wire import limits
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.messages import Event
from tests import kit


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection, _ = db.open_db(tmp_path / "state.db", "n-test")
    yield connection
    connection.close()


def fill(conn: sqlite3.Connection, n: int, record: str | None = None) -> list[int]:
    conn.execute("BEGIN")
    event: Event = (
        {"kind": "node.started"} if record is None else {"kind": "node.started", "record": record}
    )
    seqs = [db.append_event(conn, event)["seq"] for _ in range(n)]
    conn.execute("COMMIT")
    return seqs


# -- the limit -----------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [1000, "1000", "1000000", limits.MAX_LIMIT])
def test_check_limit_accepts_whole_numbers_in_range(raw: str | int) -> None:
    assert limits.check_limit(raw) == int(raw)


@pytest.mark.parametrize("raw", [999, "0", "-5", "1e6", "lots", "", limits.MAX_LIMIT + 1])
def test_check_limit_refuses_naming_the_flag(raw: str | int) -> None:
    with pytest.raises(RoostError) as info:
        limits.check_limit(raw)
    assert info.value.code == "bad-request"
    assert "--retain-events" in info.value.message
    assert info.value.detail == {"field": "retain-events"}


def test_the_limit_is_stored_and_kept_by_a_later_start(conn: sqlite3.Connection) -> None:
    assert retention.load_limit(conn, None) == limits.DEFAULT_LIMIT
    assert retention.load_limit(conn, 5000) == 5000
    assert retention.load_limit(conn, None) == 5000
    assert retention.load_limit(conn, 2000) == 2000
    assert retention.load_limit(conn, None) == 2000


def test_a_stored_limit_edited_to_nonsense_falls_back_to_the_default(
    conn: sqlite3.Connection,
) -> None:
    conn.execute("INSERT INTO meta VALUES (?, 'ten')", (retention.META_KEY,))
    assert retention.load_limit(conn, None) == limits.DEFAULT_LIMIT


# -- the plan ------------------------------------------------------------------------------------


def test_slack_is_at_least_a_thousand_and_one_percent() -> None:
    assert retention.slack(1000) == 1000
    assert retention.slack(1_000_000) == 10_000


def test_nothing_is_due_until_the_log_passes_limit_plus_slack() -> None:
    keep = Retention(limit=1000)
    assert keep.plan(1, 0) is None  # a fresh, empty log
    assert keep.plan(1, 2000) is None  # 2,000 events: limit + slack, not past it
    assert keep.plan(1, 2001) == 1001  # past it: down to the limit in one chunk
    assert keep.plan(1002, 2001) is None  # done; the next trim waits for another slack


def test_a_large_excess_is_trimmed_in_chunks_down_to_the_limit() -> None:
    keep = Retention(limit=1000, chunk=300)
    steps, first, last = [], 1, 2500
    while (upto := keep.plan(first, last)) is not None:
        steps.append(upto)
        first = upto + 1
        last += 10  # writes go on between chunks
    # The target follows the writes while the log is still past limit + slack, then stays.
    assert steps == [300, 600, 900, 1200, 1500, 1510]
    assert first == 1511 and keep.target == 1510


def test_the_target_never_moves_back() -> None:
    keep = Retention(limit=1000, chunk=10)
    assert keep.plan(1, 5000) == 10
    keep.limit = 100_000  # even when a larger limit is in force afterwards
    assert keep.plan(11, 5000) == 20 and keep.target == 4000


# -- trimming the database -----------------------------------------------------------------------


def test_seqs_are_never_reused_even_when_every_event_is_trimmed(conn: sqlite3.Connection) -> None:
    seqs = fill(conn, 50)
    assert db.seq_range(conn) == (1, 50)
    assert retention.trim_events(conn, 20) == 20
    assert db.seq_range(conn) == (21, 50)
    assert retention.trim_events(conn, 50) == 30
    assert db.last_seq(conn) == 50 and db.first_seq(conn) == 0
    assert db.seq_range(conn) == (51, 50)
    assert fill(conn, 1) == [seqs[-1] + 1]


def test_a_trimmed_eid_is_forgotten_with_its_event(conn: sqlite3.Connection) -> None:
    first = db.append_event(conn, {"kind": "node.started", "eid": "spooled-1"})
    assert db.append_event(conn, {"kind": "node.started", "eid": "spooled-1"})["duplicate"]
    retention.trim_events(conn, first["seq"])
    again = db.append_event(conn, {"kind": "node.started", "eid": "spooled-1"})
    assert "duplicate" not in again and again["seq"] == first["seq"] + 1


def test_old_operation_ids_go_recent_ones_stay(conn: sqlite3.Connection) -> None:
    for op_id in ("old", "new"):
        db.put_op(conn, {"id": op_id, "method": "session.prompt", "state": "terminal"})
    conn.execute("UPDATE ops SET updated = 100 WHERE id = 'old'")
    assert retention.trim_ops(conn, 200.0) == 1
    assert db.get_op(conn, "old") is None
    assert db.get_op(conn, "new") is not None


# -- the state store -----------------------------------------------------------------------------


def store_for(conn: sqlite3.Connection, limit: int, now: float = 1e9) -> StateStore:
    return StateStore(conn, cast(Peer, kit.FakePeer()), Retention(limit, chunk=400), lambda: now)


async def since(store: StateStore, after: int, **query: Any) -> dict[str, Any]:
    packed = await store.peer.handlers["state.events.since"](
        p.Header(kind="request"), {"after": after, **query}
    )
    assert isinstance(packed, p.Packed)  # the store answers with bytes the node relays
    return p.unpack(packed, limit=p.HARD_FRAME_LIMIT)


async def trim_until_done(store: StateStore) -> int:
    writer = asyncio.create_task(store.writer())
    steps = 1
    try:
        while (await asyncio.wait_for(store.write(store.trim_step), 5.0))["more"]:
            steps += 1
    finally:
        writer.cancel()
    return steps


def test_an_empty_fresh_log_is_no_gap(conn: sqlite3.Connection) -> None:
    reply = asyncio.run(since(store_for(conn, 1000), 0))
    assert reply == {"events": [], "more": False, "last_seq": 0, "first_seq": 1, "gap": False}


def test_the_store_trims_in_chunks_and_reports_the_gap(conn: sqlite3.Connection) -> None:
    fill(conn, 1000, record="r1")
    fill(conn, 1001, record="r2")
    store = store_for(conn, 1000)
    assert asyncio.run(trim_until_done(store)) == 3  # 1,001 rows in chunks of 400
    assert db.seq_range(conn) == (1002, 2001)
    assert not cast(kit.FakePeer, store.peer).published  # retention is not an event

    gone = asyncio.run(since(store, 0, limit=5))
    assert (gone["gap"], gone["first_seq"], gone["last_seq"]) == (True, 1002, 2001)
    assert [e["seq"] for e in gone["events"]] == [1002, 1003, 1004, 1005, 1006]
    assert asyncio.run(since(store, 1000))["gap"]  # seq 1001 is gone
    kept = asyncio.run(since(store, 1001, limit=1))
    assert (kept["gap"], kept["first_seq"], kept["events"][0]["seq"]) == (False, 1002, 1002)
    assert asyncio.run(since(store, 2001))["gap"] is False
    per_record = asyncio.run(since(store, 0, record="r1"))
    assert per_record["gap"] and per_record["events"] == []  # node-wide: r1's went too


def test_nothing_is_trimmed_within_limit_plus_slack(conn: sqlite3.Connection) -> None:
    fill(conn, 2000)
    store = store_for(conn, 1000)
    assert asyncio.run(trim_until_done(store)) == 1
    assert db.seq_range(conn) == (1, 2000)
    assert asyncio.run(since(store, 0, limit=1))["gap"] is False


def test_the_store_drops_week_old_operation_ids_at_most_every_ten_minutes(
    conn: sqlite3.Connection,
) -> None:
    now = [1e9]
    store = StateStore(conn, cast(Peer, kit.FakePeer()), Retention(1000), lambda: now[0])
    db.put_op(conn, {"id": "a", "method": "session.prompt", "state": "terminal"})
    conn.execute("UPDATE ops SET updated = ?", (now[0] - retention.OPS_KEEP_S - 1,))
    db.put_op(conn, {"id": "b", "method": "session.prompt", "state": "terminal"})
    conn.execute("UPDATE ops SET updated = ? WHERE id = 'b'", (now[0] - 60,))
    store.trim_step()
    assert db.get_op(conn, "a") is None and db.get_op(conn, "b") is not None
    now[0] += retention.OPS_KEEP_S  # "b" is old now, but the next sweep is not due yet...
    conn.execute("UPDATE ops SET updated = ? WHERE id = 'b'", (now[0] - retention.OPS_KEEP_S - 1,))
    store._ops_due = now[0] + 1
    store.trim_step()
    assert db.get_op(conn, "b") is not None
    now[0] += 1  # ...and then it is
    store.trim_step()
    assert db.get_op(conn, "b") is None


def test_an_idle_store_s_trimmer_does_not_write_until_events_come(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trimmer looks once, then waits for committed events (or for operation ids to be due),
    not once a second: an idle node's store does not wake."""

    async def scenario() -> list[int]:
        store = store_for(conn, 1000)
        steps: list[int] = []
        step = store.trim_step

        def counted() -> tuple[dict[str, Any], list[Event]]:
            steps.append(len(steps))
            return step()

        monkeypatch.setattr(store, "trim_step", counted)
        tasks = [asyncio.create_task(store.writer()), asyncio.create_task(store.trimmer(0.01))]
        try:
            async with asyncio.timeout(10):
                while not steps:
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.3)  # thirty periods: nothing was committed, no step
                assert len(steps) == 1
                event: Event = {"kind": "session.input", "record": "r1", "data": {}}
                await store.write(lambda: ({}, store.append([event])))
                while len(steps) < 2:
                    await asyncio.sleep(0.01)
        finally:
            for task in tasks:
                task.cancel()
        return steps

    assert asyncio.run(scenario()) == [0, 1]
