"""The event log (roost.actors.state.eventlog): appends, reads, and the stored bytes of pages."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from roost.actors.state import db, eventlog
from roost.actors.state.repair import fresh
from roost.actors.state.salvage import copy_tables
from roost.wire.messages import Event

V4 = Path(__file__).parent.parent / "fixtures" / "state-v4.db"


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection, _ = db.open_db(tmp_path / "state.db", "n-test")
    yield connection
    connection.close()


def test_events_append_and_since(conn: sqlite3.Connection) -> None:
    assert (eventlog.first_seq(conn), eventlog.last_seq(conn)) == (0, 0)
    appended = [
        eventlog.append_event(
            conn, {"kind": "record.state", "record": rid, "generation": 1, "data": {"n": n}}
        )
        for n, rid in enumerate(["r1", "r2", "r1", "r2", "r1"])
    ]
    seqs = [e["seq"] for e in appended]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5
    assert (eventlog.first_seq(conn), eventlog.last_seq(conn)) == (seqs[0], seqs[-1])

    everything = eventlog.events_since(conn, 0, 100)
    assert [e["data"]["n"] for e in everything] == [0, 1, 2, 3, 4]
    assert everything[0] == appended[0]

    assert [e["seq"] for e in eventlog.events_since(conn, 0, 2)] == seqs[:2]
    assert [e["seq"] for e in eventlog.events_since(conn, seqs[1], 100)] == seqs[2:]
    assert eventlog.events_since(conn, seqs[-1], 100) == []

    only_r1 = eventlog.events_since(conn, 0, 100, record_id="r1")
    assert [e["data"]["n"] for e in only_r1] == [0, 2, 4]
    assert [e["data"]["n"] for e in eventlog.events_since(conn, seqs[0], 1, record_id="r1")] == [2]


def _decoded(page: list[bytes]) -> list[dict[str, Any]]:
    return [msgpack.unpackb(e, raw=False) for e in page]


def test_a_page_of_events_stops_at_its_size_budget_and_says_more(
    conn: sqlite3.Connection,
) -> None:
    big = "x" * 300_000  # a long assistant output: a dozen of them pass a 4-MiB reply
    for _ in range(30):
        eventlog.append_event(
            conn, {"kind": "session.output", "record": "r1", "data": {"text": big}}
        )
    page, more = eventlog.events_page(conn, 0, 1000)
    assert 0 < len(page) < 30 and more
    assert sum(len(e) for e in page) <= eventlog.REPLY_BUDGET
    seen = [e["seq"] for e in _decoded(page)]
    while more:  # paging by the last seq returned reads every event once
        page, more = eventlog.events_page(conn, seen[-1], 1000)
        seen += [e["seq"] for e in _decoded(page)]
    assert seen == list(range(1, 31))
    one, more = eventlog.events_page(conn, 0, 1000, budget=10)  # never an empty page
    assert len(one) == 1 and more
    assert _decoded(eventlog.events_page(conn, 28, 2)[0]) == eventlog.events_since(conn, 28, 2)
    assert eventlog.events_page(conn, 28, 2)[1] is False
    assert eventlog.events_page(conn, 27, 2)[1] is True


def test_an_encoded_page_decodes_to_the_events_as_stored(conn: sqlite3.Connection) -> None:
    """The page splices stored bytes: it must decode to exactly what decoding each row gives,
    for every shape of row (no record, no generation, a large seq, nested data, unicode)."""
    shapes: list[Event] = [
        {"kind": "node.started"},
        {"kind": "record.state", "record": "r1", "generation": 3, "data": {"state": "live"}},
        {"kind": "session.output", "record": "r2", "generation": 1, "data": {"text": "é" * 40}},
        {"kind": "turn.ended", "record": "r1", "data": {"result": {"a": [1, 2.5, None, True]}}},
    ]
    for event in shapes * 3:
        eventlog.append_event(conn, event)
    conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'events'", ((1 << 32) + 5,))
    eventlog.append_event(conn, shapes[1])  # a seq past uint32 takes the general path
    page, more = eventlog.events_page(conn, 0, 1000)
    assert not more
    assert _decoded(page) == eventlog.events_since(conn, 0, 1000)
    assert _decoded(page)[-1]["seq"] == (1 << 32) + 6
    only_r1, _ = eventlog.events_page(conn, 0, 1000, record_id="r1")
    assert _decoded(only_r1) == eventlog.events_since(conn, 0, 1000, record_id="r1")
    assert msgpack.unpackb(eventlog.packed_map({"more": False}, "events", page)) == {
        "more": False,
        "events": eventlog.events_since(conn, 0, 1000),
    }


def test_each_event_is_stored_once_as_the_bytes_a_page_sends(conn: sqlite3.Connection) -> None:
    """Schema 5: a page is the stored bytes, joined; ``data`` is not stored a second time."""
    for n in range(3):
        eventlog.append_event(conn, {"kind": "record.state", "record": "r1", "data": {"n": n}})
    stored = conn.execute("SELECT packed, data FROM events ORDER BY seq").fetchall()
    assert [data for _, data in stored] == [b""] * 3
    page, _ = eventlog.events_page(conn, 0, 1000)
    assert page == [packed for packed, _ in stored]
    assert [msgpack.unpackb(p) for p in page] == eventlog.events_since(conn, 0, 1000)


def _stored(conn: sqlite3.Connection, seq: int) -> bytes:
    blob: bytes = conn.execute("SELECT packed FROM events WHERE seq = ?", (seq,)).fetchone()[0]
    return blob


def test_a_damaged_stored_event_is_refused_not_spliced(conn: sqlite3.Connection) -> None:
    for n in range(3):
        eventlog.append_event(conn, {"kind": "record.state", "record": "r1", "data": {"n": n}})
    good, other = _stored(conn, 2), _stored(conn, 3)
    seq_key = good.replace(b"\xa3seq", b"\xa3seR", 1)
    for damaged in (good[:-1], good + b"\xc0", b"\xc1", b"", other, seq_key):
        conn.execute("UPDATE events SET packed = ? WHERE seq = 2", (damaged,))
        with pytest.raises(ValueError):
            eventlog.events_page(conn, 0, 1000)
        with pytest.raises(ValueError):
            eventlog.events_page(conn, 0, 1000, record_id="r1")
        with pytest.raises(ValueError):
            eventlog.events_since(conn, 1, 1)
        assert _decoded(eventlog.events_page(conn, 2, 1000)[0])[0]["seq"] == 3  # past it: served
    conn.execute("UPDATE events SET packed = ? WHERE seq = 2", (good,))
    assert [e["data"]["n"] for e in _decoded(eventlog.events_page(conn, 0, 1000)[0])] == [0, 1, 2]


def _legacy(conn: sqlite3.Connection, seq: int, data: Any) -> None:
    """Make the row ``seq`` what schema 4 wrote: ``data`` stored, no ``packed``."""
    conn.execute(
        "UPDATE events SET packed = NULL, data = ? WHERE seq = ?", (msgpack.packb(data), seq)
    )


def test_a_damaged_row_from_before_schema_5_is_refused_not_spliced(
    conn: sqlite3.Connection,
) -> None:
    for n in range(3):
        eventlog.append_event(conn, {"kind": "record.state", "record": "r1", "data": {"n": n}})
        _legacy(conn, n + 1, {"n": n})
    good = conn.execute("SELECT data FROM events WHERE seq = 2").fetchone()[0]
    for damaged in (good[:-1], good + b"\xc0", b"\xc1", b""):
        conn.execute("UPDATE events SET data = ? WHERE seq = 2", (damaged,))
        with pytest.raises(ValueError):
            eventlog.events_page(conn, 0, 1000)
    conn.execute("UPDATE events SET data = ? WHERE seq = 2", (good,))
    assert [e["data"]["n"] for e in _decoded(eventlog.events_page(conn, 0, 1000)[0])] == [0, 1, 2]


def test_rows_from_before_schema_5_read_beside_new_ones(conn: sqlite3.Connection) -> None:
    """A page mixing rows of both schemas (any order, with a record filter, cut by the budget)
    decodes to what each row holds."""
    for n in range(12):
        eventlog.append_event(
            conn, {"kind": "session.output", "record": f"r{n % 2}", "data": {"n": n}}
        )
    for seq in (1, 2, 5, 8, 9, 12):
        _legacy(conn, seq, {"n": seq - 1, "old": True})
    everything = eventlog.events_since(conn, 0, 1000)
    assert [e["data"].get("old", False) for e in everything[:3]] == [True, True, False]
    assert _decoded(eventlog.events_page(conn, 0, 1000)[0]) == everything
    assert _decoded(eventlog.events_page(conn, 3, 4)[0]) == everything[3:7]
    r1 = eventlog.events_page(conn, 0, 1000, record_id="r1")[0]
    assert _decoded(r1) == eventlog.events_since(conn, 0, 1000, record_id="r1")
    cut, more = eventlog.events_page(conn, 0, 1000, budget=len(r1[0]) * 3)
    assert more and _decoded(cut) == everything[: len(cut)]


def _v4_events() -> list[dict[str, Any]]:
    """The events of the schema-4 fixture, read from its columns."""
    with contextlib.closing(sqlite3.connect(V4)) as v4:
        rows = v4.execute("SELECT seq, ts, kind, record_id, generation, data FROM events")
        return [
            {"seq": s, "ts": t, "kind": k, "record": r, "generation": g, "data": msgpack.unpackb(d)}
            for s, t, k, r, g, d in rows.fetchall()
        ]


def test_a_migrated_schema_4_log_reads_as_before_and_grows(tmp_path: Path) -> None:
    expected = _v4_events()
    path = tmp_path / "state.db"
    shutil.copy(V4, path)
    conn, _ = db.open_db(path, None)
    try:
        assert conn.execute("SELECT count(*) FROM events WHERE packed IS NULL").fetchone()[0] == 21
        added = eventlog.append_event(conn, {"kind": "node.started", "data": {"pid": 1}})
        assert added["seq"] == len(expected) + 1
        assert _decoded(eventlog.events_page(conn, 0, 1000)[0]) == [*expected, added]
        assert eventlog.events_since(conn, 0, 1000) == [*expected, added]
    finally:
        conn.close()


def test_salvage_copies_stored_events_of_either_schema(
    conn: sqlite3.Connection, tmp_path: Path
) -> None:
    """``roost node repair`` copies rows as they are: a schema-4 file's rows keep their data (and
    no ``packed``), a schema-5 file's their stored bytes; both read back the same."""
    for n in range(5):
        eventlog.append_event(conn, {"kind": "record.state", "record": "r1", "data": {"n": n}})
    with contextlib.closing(sqlite3.connect(V4)) as v4:
        for source, expected in ((conn, eventlog.events_since(conn, 0, 100)), (v4, _v4_events())):
            with contextlib.closing(fresh(tmp_path / f"from-{len(expected)}.db")) as target:
                copy_tables(source, target)
                target.row_factory = sqlite3.Row
                assert eventlog.events_since(target, 0, 100) == expected
                assert _decoded(eventlog.events_page(target, 0, 100)[0]) == expected


def test_a_repeated_event_id_gives_back_the_stored_event(conn: sqlite3.Connection) -> None:
    first = eventlog.append_event(
        conn, {"kind": "session.input", "eid": "e1", "data": {"text": "hi"}}
    )
    again = eventlog.append_event(
        conn, {"kind": "session.input", "eid": "e1", "data": {"text": "no"}}
    )
    assert again == {**first, "duplicate": True}
    assert eventlog.event_seq(conn, "e1") == first["seq"]
    assert eventlog.events_since(conn, 0, 10) == [first]


def test_seqs_go_on_past_a_trimmed_log(conn: sqlite3.Connection) -> None:
    """The store gives each seq itself (the stored bytes hold it): past what was trimmed."""
    for _ in range(3):
        eventlog.append_event(conn, {"kind": "node.started"})
    conn.execute("DELETE FROM events")
    event = eventlog.append_event(conn, {"kind": "node.started"})
    assert event["seq"] == 4 and _decoded(eventlog.events_page(conn, 0, 10)[0]) == [event]


def test_event_without_record_or_data(conn: sqlite3.Connection) -> None:
    event = eventlog.append_event(conn, {"kind": "node.started"})
    assert (event["record"], event["generation"], event["data"]) == (None, None, {})
    assert eventlog.events_since(conn, 0, 10)[0]["data"] == {}
