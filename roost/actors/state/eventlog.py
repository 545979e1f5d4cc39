"""The event log's queries: append, read back, and pages of stored bytes for ``events.since``.

Seqs are node-wide (SQLite AUTOINCREMENT: never reused, even after retention trims); an optional
event id (``eid``) makes a re-sent spooled event a no-op. Since schema 5 each event is stored
once, as the msgpack map ``events.since`` sends (``seq ts kind record generation data``), in the
``packed`` column, written at append time; its ``data`` column is then empty (the map holds it).
A page is those bytes fetched and joined, nothing decoded or encoded on the way out. Rows
written before schema 5 (``packed`` NULL) keep ``data`` and are encoded when read.
Stored bytes are checked before they go into a reply: each one msgpack value, its seq the
row's; a damaged row raises ``ValueError`` (the store answers ``durable-state-damaged``).
"""

from __future__ import annotations

import bisect
import itertools
import operator
import sqlite3
import struct
import time
from typing import Any, cast

import msgpack

from roost.wire.messages import Event

REPLY_BUDGET = 4 * 1024 * 1024  # bytes of events in one reply: half the 8-MiB frame limit
_PAGE_SQL = "SELECT seq, packed FROM events WHERE seq > ?{} ORDER BY seq LIMIT ?"
_LEGACY_SQL = (
    "SELECT seq, ts, kind, record_id, generation, data FROM events "
    "WHERE seq >= ? AND seq <= ? AND packed IS NULL"
)

# The head of an encoded event: fixmap of 6, "seq" uint32, "ts" float64 (msgpack takes an integer
# in any width that holds it; the decoder gives back the same number). A seq past uint32 (only
# ever by hand) takes msgpack's own encoding.
_HEAD = struct.Struct(">5sBI3sBd")
_SEQ_KEY = b"\x86\xa3seq"
_SEQ32 = struct.Struct(">6sI")  # the head up to the end of the seq, for checking it
_SEQ32_KEY = _SEQ_KEY + b"\xce"
_FIRST_10 = operator.itemgetter(slice(0, _SEQ32.size))


def append_event(conn: sqlite3.Connection, event: Event) -> Event:
    """Append one event, stored as the bytes ``events.since`` will send; an ``eid`` already in
    the log makes this a no-op (``duplicate``). The seq is given here (the store is the only
    writer, inside its transaction) because the stored bytes hold it."""
    eid = event.get("eid")
    if eid:
        row = conn.execute("SELECT * FROM events WHERE eid=?", (eid,)).fetchone()
        if row is not None:
            return cast(Event, {**row_event(row), "duplicate": True})
    seq, ts = last_seq(conn) + 1, time.time()
    data = event.get("data") or {}
    kind, record, generation = event["kind"], event.get("record"), event.get("generation")
    pack = msgpack.Packer(use_bin_type=True).pack
    packed = _head(pack, seq, ts) + _middle(pack, kind, record, generation) + pack(data)
    conn.execute(
        "INSERT INTO events (seq, ts, kind, record_id, generation, data, eid, packed) "
        "VALUES (?, ?, ?, ?, ?, X'', ?, ?)",
        (seq, ts, kind, record, generation, eid, packed),
    )
    return {
        "seq": seq,
        "ts": ts,
        "kind": kind,
        "record": record,
        "generation": generation,
        "data": data,
    }


def event_seq(conn: sqlite3.Connection, eid: str) -> int | None:
    """The seq of the event with this event id, if it is in the log."""
    row = conn.execute("SELECT seq FROM events WHERE eid=?", (eid,)).fetchone()
    return int(row[0]) if row else None


def row_event(row: sqlite3.Row) -> dict[str, Any]:
    """One event of ``SELECT *``, decoded (``ValueError`` when its stored bytes are damaged)."""
    packed = row["packed"]
    if packed is not None:
        check([row["seq"]], [packed])
        event: dict[str, Any] = msgpack.unpackb(packed, raw=False)
        return event
    data = row["data"]
    return {
        "seq": row["seq"],
        "ts": row["ts"],
        "kind": row["kind"],
        "record": row["record_id"],
        "generation": row["generation"],
        "data": None if data is None else msgpack.unpackb(data, raw=False),
    }


def events_since(
    conn: sqlite3.Connection, after: int, limit: int, record_id: str | None = None
) -> list[dict[str, Any]]:
    sql = "SELECT * FROM events WHERE seq > ?"
    args: list[Any] = [after]
    if record_id:
        sql += " AND record_id = ?"
        args.append(record_id)
    rows = conn.execute(sql + " ORDER BY seq LIMIT ?", (*args, limit)).fetchall()
    return [row_event(r) for r in rows]


def events_page(
    conn: sqlite3.Connection,
    after: int,
    limit: int,
    record_id: str | None = None,
    budget: int = REPLY_BUDGET,
) -> tuple[list[bytes], bool]:
    """Up to ``limit`` events after ``after``, each the encoded map ``events.since`` sends, as
    stored (see the module docstring); fewer when their size would pass ``budget`` (one event
    at least), so a reply always fits a frame; and whether more events follow. A damaged row
    raises ``ValueError`` rather than being spliced into the reply."""
    cur = conn.cursor()
    cur.row_factory = None  # plain tuples: no sqlite3.Row per event
    args = (after, record_id, limit + 1) if record_id else (after, limit + 1)
    rows = cur.execute(_PAGE_SQL.format(" AND record_id = ?" if record_id else ""), args)
    page = rows.fetchall()
    more = len(page) > limit
    del page[limit:]
    seqs: list[int] = list(map(operator.itemgetter(0), page))
    blobs: list[bytes] = list(map(operator.itemgetter(1), page))
    if None in blobs:
        _encode_legacy(cur, seqs, blobs, record_id)
    ends = list(itertools.accumulate(map(len, blobs)))
    if ends and ends[-1] > budget:
        keep = max(1, bisect.bisect_right(ends, budget))
        del seqs[keep:], blobs[keep:], ends[keep:]
        more = True
    check(seqs, blobs, ends)
    return blobs, more


def _encode_legacy(
    cur: sqlite3.Cursor, seqs: list[Any], blobs: list[Any], record_id: str | None
) -> None:
    """Fill in the page's rows stored before schema 5 (no ``packed``), encoded from their
    columns with the stored ``data`` bytes spliced in."""
    sql, args = _LEGACY_SQL, [seqs[0], seqs[-1]]
    if record_id:
        sql += " AND record_id = ?"
        args.append(record_id)
    pack = msgpack.Packer(use_bin_type=True).pack
    middles: dict[tuple[Any, Any, Any], bytes] = {}  # kind, record, generation repeat a lot
    encoded: dict[int, bytes] = {}
    for seq, ts, kind, record, generation, data in cur.execute(sql, args):
        middle = middles.get((kind, record, generation))
        if middle is None:
            middle = middles[(kind, record, generation)] = _middle(pack, kind, record, generation)
        encoded[seq] = _head(pack, seq, ts) + middle + data
    for i, blob in enumerate(blobs):
        if blob is None:
            blobs[i] = encoded[seqs[i]]


def _head(pack: Any, seq: int, ts: Any) -> bytes:
    if type(ts) is float and 0 <= seq < 1 << 32:  # always, but for a hand-edited row
        # One C call: the map header, "seq" as uint32, "ts" as float64.
        return _HEAD.pack(_SEQ_KEY, 0xCE, seq, b"\xa2ts", 0xCB, ts)
    return b"".join((_seq_head(seq), b"\xa2ts", pack(ts)))


def _seq_head(seq: int) -> bytes:
    """The map header and the seq, as every stored or built event opens."""
    return _SEQ32.pack(_SEQ32_KEY, seq) if 0 <= seq < 1 << 32 else _SEQ_KEY + msgpack.packb(seq)


def _middle(pack: Any, kind: Any, record: Any, generation: Any) -> bytes:
    parts = (b"\xa4kind", pack(kind), b"\xa6record", pack(record), b"\xaageneration")
    return b"".join((*parts, pack(generation), b"\xa4data"))


def check(seqs: list[int], blobs: list[bytes], ends: list[int] | None = None) -> None:
    """Raise ``ValueError`` unless each of ``blobs`` opens with the head of its seq in
    ``seqs`` (ascending) and is exactly one msgpack value; ``ends``: the running total of
    their lengths, when the caller has it. Parsed in C without building the objects."""
    if seqs and seqs[0] >= 0 and seqs[-1] < 1 << 32:  # always, but for a hand-edited row
        heads = list(map(_SEQ32.pack, itertools.repeat(_SEQ32_KEY), seqs))
        agree = heads == list(map(_FIRST_10, blobs))
    else:
        heads = list(map(_seq_head, seqs))
        agree = all(b[: len(h)] == h for h, b in zip(heads, blobs, strict=True))
    if not agree:
        raise ValueError("a stored event's seq is not its row's")
    unpacker = msgpack.Unpacker(max_buffer_size=0)
    unpacker.feed(b"".join(blobs))
    skip, tell = unpacker.skip, unpacker.tell
    try:
        found = [skip() or tell() for _ in blobs]
    except msgpack.OutOfData:
        raise ValueError("a stored event is cut short") from None
    if found != (ends if ends is not None else list(itertools.accumulate(map(len, blobs)))):
        raise ValueError("a stored event is not one msgpack value")


def packed_map(head: dict[str, Any], key: str, items: list[bytes]) -> bytes:
    """One msgpack map: the pairs of ``head`` and then ``key``, an array of ``items`` (each
    already one encoded value), in a single copy of the items."""
    packer = msgpack.Packer(use_bin_type=True)
    first = packer.pack_map_header(len(head) + 1)
    pairs = [packer.pack(k) + packer.pack(v) for k, v in head.items()]
    tail = packer.pack(key) + packer.pack_array_header(len(items))
    return b"".join((first, *pairs, tail, *items))


def last_seq(conn: sqlite3.Connection) -> int:
    """The highest seq ever given, even when retention has trimmed it: AUTOINCREMENT keeps its
    high-water mark in ``sqlite_sequence``, so seqs are never reused."""
    row = conn.execute(
        "SELECT MAX(n) FROM (SELECT seq AS n FROM sqlite_sequence WHERE name='events' "
        "UNION ALL SELECT MAX(seq) FROM events)"
    ).fetchone()
    return int(row[0] or 0)


def first_seq(conn: sqlite3.Connection) -> int:
    """The oldest retained seq; 0 when the log is empty."""
    row = conn.execute("SELECT MIN(seq) FROM events").fetchone()
    return int(row[0] or 0)


def seq_range(conn: sqlite3.Connection) -> tuple[int, int]:
    """``(first, last)``: the oldest retained seq (``last + 1`` when the log is empty, whether
    fresh or trimmed), and the highest seq ever given."""
    last = last_seq(conn)
    return first_seq(conn) or last + 1, last
