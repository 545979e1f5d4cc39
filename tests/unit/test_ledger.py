"""Usage in the state store (roost.actors.state.ledger): a stream turn's figures kept with its end,
a session's running totals kept as what is new (a report delivered twice adds nothing), the
totals per record, and the sums by session, provider and day. Real SQLite, the store's own
writer task; the broker is a fake."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from roost.actors.runtime.peer import Peer
from roost.actors.state import db, ledger
from roost.actors.state.records import Record
from roost.actors.state.store import StateStore
from roost.wire import protocol as p
from roost.wire import usage as u
from roost.wire.errors import RoostError
from tests import kit

H = p.Header(kind="request")
Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection, _ = db.open_db(tmp_path / "state.db", "n-test")
    for rid, name, provider in (("r1", "alpha", "claude"), ("r2", "beta", "codex")):
        db.insert_record(conn=connection, record=Record(rid, name, provider, "pty", "/w"))
    yield connection
    connection.close()


def run(conn: sqlite3.Connection, scenario: Callable[[Call], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        peer = kit.FakePeer()
        store = StateStore(conn, cast(Peer, peer))
        writer = asyncio.create_task(store.writer())

        async def call(method: str, body: dict[str, Any]) -> dict[str, Any]:
            handler = cast(Peer, peer).handlers[method]
            return cast(dict[str, Any], await handler(H, body))

        try:
            return await scenario(call)
        finally:
            writer.cancel()

    return asyncio.run(main())


def report(record: str, totals: u.Usage, source: str = "files", **rest: Any) -> Any:
    return {"record": record, "generation": 0, "source": source, "totals": totals, **rest}


def usage_events(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [e for e in db.events_since(conn, 0, 100) if e["kind"] == "session.usage"]


def test_running_totals_add_what_is_new_once(conn: sqlite3.Connection) -> None:
    async def scenario(call: Call) -> list[Any]:
        first = await call(
            "state.usage.add", report("r2", u.make(100, 10, 7), provider_session="t")
        )
        again = await call(
            "state.usage.add", report("r2", u.make(100, 10, 7), provider_session="t")
        )
        later = await call(
            "state.usage.add", report("r2", u.make(250, 30, 14), provider_session="t")
        )
        return [first["added"], again["added"], later["added"]]

    assert run(conn, scenario) == [u.make(100, 10, 7), None, u.make(150, 20, 7)]
    assert ledger.totals(conn) == {"r2": u.make(250, 30, 14)}
    events = usage_events(conn)
    assert [e["data"]["usage"] for e in events] == [u.make(100, 10, 7), u.make(150, 20, 7)]
    assert events[-1]["data"]["total"] == u.make(250, 30, 14)
    assert events[-1]["record"] == "r2" and events[-1]["data"]["source"] == "files"


def test_each_source_and_provider_session_counts_apart(conn: sqlite3.Connection) -> None:
    async def scenario(call: Call) -> None:
        await call("state.usage.add", report("r1", u.make(10, 1), "files"))
        await call("state.usage.add", report("r1", u.make(cost=0.5), "statusline"))
        await call("state.usage.add", report("r1", u.make(cost=0.75), "statusline"))
        await call("state.usage.add", report("r1", u.make(5, 5), "files", provider_session="b"))

    run(conn, scenario)
    assert ledger.totals(conn)["r1"] == u.make(15, 6, 0, 0, 0.75)


def test_a_stream_turns_usage_is_kept_with_its_end(conn: sqlite3.Connection) -> None:
    used = u.make(14, 25, cost=3.9e-05)

    async def scenario(call: Call) -> dict[str, Any]:
        turn = {"id": "t1", "record": "r1", "generation": 0, "text": "hi"}
        await call("state.turn.begin", {"turn": turn, "events": []})
        end = {"id": "t1", "state": "completed", "result": {"exit": 0, "usage": used}}
        await call("state.turn.end", end)
        return await call("state.turn.end", end)  # ended once: its figures count once

    assert run(conn, scenario)["ended"] is False
    assert ledger.totals(conn) == {"r1": used}
    turn_event = [e for e in db.events_since(conn, 0, 100) if e["kind"] == "session.turn"]
    assert turn_event[0]["data"]["usage"] == used


def test_sums_by_session_provider_and_day_and_since(conn: sqlite3.Connection) -> None:
    record = {"id": "r1", "name": "alpha", "provider": "claude"}
    other = {"id": "r2", "name": "beta", "provider": "codex"}
    day = 86400.0
    base = 1796083200.0  # 2026-12-01T00:00Z
    ledger.insert(conn, record, u.make(100, 10, cost=0.25), source="stream", turn="t1", ts=base)
    ledger.insert(conn, record, u.make(50, 5, cost=0.25), source="stream", turn="t2", ts=base + day)
    ledger.insert(conn, other, u.make(1000, 100), source="files", ts=base + day + 5)

    async def scenario(call: Call) -> list[dict[str, Any]]:
        return [
            await call("state.usage.sum", {}),
            await call("state.usage.sum", {"since": base + 1}),
        ]

    every, recent = run(conn, scenario)
    assert every["total"] == u.make(1150, 115, cost=0.5)
    assert [(s["name"], s["provider"], s["usage"], s["reports"]) for s in every["session"]] == [
        ("beta", "codex", u.make(1000, 100), 1),
        ("alpha", "claude", u.make(150, 15, cost=0.5), 2),
    ]
    assert [(r["provider"], r["usage"]) for r in every["provider"]] == [
        ("codex", u.make(1000, 100)),
        ("claude", u.make(150, 15, cost=0.5)),
    ]
    assert [(d["day"], d["usage"]) for d in every["day"]] == [
        ("2026-12-01", u.make(100, 10, cost=0.25)),
        ("2026-12-02", u.make(1050, 105, cost=0.25)),
    ]
    assert recent["total"] == u.make(1050, 105, cost=0.25) and recent["since"] == base + 1


def test_a_forgotten_records_usage_still_counts_under_its_name(conn: sqlite3.Connection) -> None:
    ledger.insert(
        conn,
        {"id": "r1", "name": "alpha", "provider": "claude"},
        u.make(3, 4),
        source="stream",
        turn="t1",
    )
    ledger.advance(conn, "r1", "claude-transcript:", u.make(3, 4))
    db.delete_record(conn, "r1")
    assert conn.execute("SELECT COUNT(*) FROM usage_marks").fetchone()[0] == 0
    rows = ledger.summed(conn, 0.0, "session")
    assert [(r["record"], r["name"], r["usage"]) for r in rows] == [("r1", "alpha", u.make(3, 4))]


def test_nothing_reported_sums_to_zero_and_lists_records_without_usage(
    conn: sqlite3.Connection,
) -> None:
    async def scenario(call: Call) -> list[dict[str, Any]]:
        return [await call("state.usage.sum", {}), await call("state.record.list", {})]

    summed, listed = run(conn, scenario)
    assert summed["total"] == u.zero() and summed["session"] == [] and summed["day"] == []
    assert [r["usage"] for r in listed["records"]] == [None, None]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (report("r1", u.zero(), source="made-up"), "source"),
        ({**report("r1", u.zero()), "totals": [1, 2]}, "totals"),
    ],
)
def test_bad_reports_are_refused(
    conn: sqlite3.Connection, body: dict[str, Any], field: str
) -> None:
    async def scenario(call: Call) -> None:
        await call("state.usage.add", body)

    with pytest.raises(RoostError) as info:
        run(conn, scenario)
    assert info.value.code == "bad-request" and info.value.detail == {"field": field}


def test_a_report_for_an_unknown_record_is_refused(conn: sqlite3.Connection) -> None:
    async def scenario(call: Call) -> None:
        await call("state.usage.add", report("r9", u.make(1)))

    with pytest.raises(RoostError) as info:
        run(conn, scenario)
    assert info.value.code == "not-found"
    assert ledger.totals(conn) == {}


def test_a_forks_copy_of_its_sources_conversation_is_not_counted_twice(
    conn: sqlite3.Connection,
) -> None:
    """A fork's files begin as a copy of its source's, figures included: its first read counts
    only what it added; a CLI whose copy leaves the figures out (a first read below the
    source's) is counted in full."""
    fork = Record("r3", "alpha-fork", "claude", "pty", "/w").to_wire()
    plain = Record("r4", "alpha-fork-2", "claude", "pty", "/w").to_wire()

    def created(record: dict[str, Any]) -> dict[str, Any]:
        origin = {"record": "r1", "provider_session": "s1"}
        data = {"name": record["name"], "provider": "claude", "mode": "pty", "fork": origin}
        event = {"kind": "record.created", "record": record["id"], "generation": 0, "data": data}
        return {"record": record, "events": [event]}

    async def scenario(call: Call) -> list[Any]:
        await call("state.usage.add", report("r1", u.make(100, 10, 5), provider_session="s1"))
        await call("state.record.create", created(fork))
        await call("state.record.create", created(plain))
        grown = await call(
            "state.usage.add", report("r3", u.make(130, 12, 5), provider_session="s3")
        )
        bare = await call("state.usage.add", report("r4", u.make(20, 2), provider_session="s4"))
        return [grown["added"], bare["added"]]

    assert run(conn, scenario) == [u.make(30, 2, 0), u.make(20, 2)]
    assert ledger.totals(conn)["r1"] == u.make(100, 10, 5)
