"""The queries the state store runs on the node's SQLite database (schema: ``schema.py``).

Single writer (the state-store actor), WAL mode. Records, workspaces, the event log (node-wide
sequence; an optional event id makes a re-sent spooled event a no-op), operations and turns.
"""

from __future__ import annotations

import sqlite3
import struct
import time
import uuid
from typing import Any

import msgpack

from roost.actors.state.records import Record
from roost.actors.state.schema import PATH_SEMANTICS as PATH_SEMANTICS
from roost.actors.state.schema import SCHEMA_VERSION as SCHEMA_VERSION
from roost.actors.state.schema import get_meta as get_meta
from roost.actors.state.schema import open_db as open_db
from roost.actors.state.schema import refuse_foreign as refuse_foreign
from roost.broker.errors import RoostError

PACKED = ("active", "last_exit", "env", "worktree")


def _pack(value: Any) -> bytes | None:
    return None if value is None else msgpack.packb(value, use_bin_type=True)


def _unpack(value: bytes | None) -> Any:
    return None if value is None else msgpack.unpackb(value, raw=False)


# -- records -----------------------------------------------------------------------------------


def row_to_record(row: sqlite3.Row) -> Record:
    data = dict(row)
    for key in PACKED:
        data[key] = _unpack(data[key])
    data["env"] = data["env"] or {}
    return Record.from_row(data)


def insert_record(conn: sqlite3.Connection, record: Record) -> None:
    data = {k: getattr(record, k) for k in Record.__dataclass_fields__}
    for key in PACKED:
        data[key] = _pack(data[key])
    cols = ", ".join(data)
    marks = ", ".join("?" for _ in data)
    try:
        conn.execute(f"INSERT INTO records ({cols}) VALUES ({marks})", tuple(data.values()))
    except sqlite3.IntegrityError:
        raise RoostError("name-taken", "another record already has that name") from None


UPDATABLE = frozenset(
    {
        "name",
        "provider_session",
        "state",
        "generation",
        "active",
        "activity",
        "attention",
        "last_exit",
        "updated",
        "rows",
        "cols",
    }
)


def update_record(conn: sqlite3.Connection, record_id: str, changes: dict[str, Any]) -> None:
    bad = set(changes) - UPDATABLE
    if bad:
        raise RoostError("bad-request", f"fields {sorted(bad)} cannot be updated")
    data = {k: (_pack(v) if k in PACKED else v) for k, v in changes.items()}
    assignments = ", ".join(f"{k}=?" for k in data)
    try:
        conn.execute(f"UPDATE records SET {assignments} WHERE id=?", (*data.values(), record_id))
    except sqlite3.IntegrityError:
        raise RoostError("name-taken", "another record already has that name") from None


def get_record(conn: sqlite3.Connection, record_id: str) -> Record:
    row = conn.execute("SELECT * FROM records WHERE id=?", (record_id,)).fetchone()
    if row is None:
        raise RoostError("not-found", f"no record {record_id!r}", {"ref": record_id})
    return row_to_record(row)


def find_record(conn: sqlite3.Connection, ref: str) -> Record:
    """A record by id, else by unique name."""
    row = conn.execute("SELECT * FROM records WHERE id=?", (ref,)).fetchone()
    if row is None:
        rows = conn.execute("SELECT * FROM records WHERE name=?", (ref,)).fetchall()
        if len(rows) > 1:
            raise RoostError("ambiguous-name", f"{ref!r} names {len(rows)} records")
        row = rows[0] if rows else None
    if row is None:
        raise RoostError("not-found", f"no record with id or name {ref!r}", {"ref": ref})
    return row_to_record(row)


def list_records(conn: sqlite3.Connection) -> list[Record]:
    rows = conn.execute("SELECT * FROM records ORDER BY created, id").fetchall()
    return [row_to_record(r) for r in rows]


def delete_record(conn: sqlite3.Connection, record_id: str) -> None:
    conn.execute("DELETE FROM records WHERE id=?", (record_id,))


# -- workspaces --------------------------------------------------------------------------------


def add_workspace(
    conn: sqlite3.Connection, path: str, name: str | None
) -> tuple[dict[str, Any], str | None]:
    """Register ``path``; returns the workspace and what changed: ``"added"``, ``"renamed"`` (a
    registered path given another name) or None. A name another workspace has is ``name-taken``."""
    if name is not None:
        other = conn.execute(
            "SELECT id FROM workspaces WHERE name=? AND path<>?", (name, path)
        ).fetchone()
        if other is not None:
            raise RoostError(
                "name-taken",
                f"workspace {other['id']} is already named {name!r}",
                {"field": "name", "workspace": other["id"]},
            )
    row = conn.execute("SELECT * FROM workspaces WHERE path=?", (path,)).fetchone()
    if row is not None:
        ws = dict(row)
        if name is None or name == ws["name"]:
            return ws, None
        conn.execute("UPDATE workspaces SET name=? WHERE id=?", (name, ws["id"]))
        return {**ws, "name": name}, "renamed"
    ws = {"id": "w" + uuid.uuid4().hex[:8], "name": name, "path": path, "created": time.time()}
    conn.execute("INSERT INTO workspaces VALUES (:id, :name, :path, :created)", ws)
    return ws, "added"


def find_workspace(conn: sqlite3.Connection, ref: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT * FROM workspaces WHERE id=? OR name=? OR path=? LIMIT 1", (ref, ref, ref)
    ).fetchone()
    return dict(row) if row else None


def list_workspaces(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute("SELECT * FROM workspaces ORDER BY created")]


# -- events ------------------------------------------------------------------------------------


def append_event(conn: sqlite3.Connection, event: dict[str, Any]) -> dict[str, Any]:
    """Append one event; an ``eid`` already in the log makes this a no-op (``duplicate``)."""
    eid = event.get("eid")
    if eid:
        row = conn.execute("SELECT * FROM events WHERE eid=?", (eid,)).fetchone()
        if row is not None:
            return {**_event(row), "duplicate": True}
    ts = time.time()
    cur = conn.execute(
        "INSERT INTO events (ts, kind, record_id, generation, data, eid) VALUES (?, ?, ?, ?, ?, ?)",
        (
            ts,
            event["kind"],
            event.get("record"),
            event.get("generation"),
            _pack(event.get("data") or {}),
            eid,
        ),
    )
    return {
        "seq": cur.lastrowid,
        "ts": ts,
        "kind": event["kind"],
        "record": event.get("record"),
        "generation": event.get("generation"),
        "data": event.get("data") or {},
    }


def event_seq(conn: sqlite3.Connection, eid: str) -> int | None:
    """The seq of the event with this event id, if it is in the log."""
    row = conn.execute("SELECT seq FROM events WHERE eid=?", (eid,)).fetchone()
    return int(row[0]) if row else None


def _event(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "seq": row["seq"],
        "ts": row["ts"],
        "kind": row["kind"],
        "record": row["record_id"],
        "generation": row["generation"],
        "data": _unpack(row["data"]),
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
    return [_event(r) for r in rows]


REPLY_BUDGET = 4 * 1024 * 1024  # bytes of events in one reply: half the 8-MiB frame limit
_EVENTS_PAGE_SQL = (
    "SELECT seq, ts, kind, record_id, generation, data FROM events WHERE seq > ?{} "
    "ORDER BY seq LIMIT ?"
)


# The head of an encoded event: fixmap of 6, "seq" uint32, "ts" float64 (msgpack takes an integer
# in any width that holds it; the decoder gives back the same number).
_HEAD = struct.Struct(">5sBI3sBd")


def events_page(
    conn: sqlite3.Connection,
    after: int,
    limit: int,
    record_id: str | None = None,
    budget: int = REPLY_BUDGET,
) -> tuple[list[bytes], bool]:
    """Up to ``limit`` events after ``after``, each already encoded as the msgpack map
    ``events.since`` sends (``seq ts kind record generation data``, the stored ``data`` bytes
    spliced in as they are: nothing is decoded and encoded again on the way out); fewer when
    their size would pass ``budget`` (one event at least), so a reply always fits a frame; and
    whether more events follow. A stored ``data`` that is not exactly one msgpack value (a
    damaged row) raises ``ValueError`` rather than being spliced into the reply."""
    cur = conn.cursor()
    cur.row_factory = None  # plain tuples: no sqlite3.Row per event
    if record_id:
        query = _EVENTS_PAGE_SQL.format(" AND record_id = ?")
        rows = cur.execute(query, (after, record_id, limit + 1)).fetchall()
    else:
        rows = cur.execute(_EVENTS_PAGE_SQL.format(""), (after, limit + 1)).fetchall()
    more = len(rows) > limit
    pack = msgpack.Packer(use_bin_type=True).pack
    middles: dict[tuple[Any, Any, Any], bytes] = {}  # kind, record, generation repeat a lot
    page: list[bytes] = []
    datas: list[bytes] = []
    size = 0
    for seq, ts, kind, record, generation, data in rows[:limit]:
        middle = middles.get((kind, record, generation))
        if middle is None:
            parts = (b"\xa4kind", pack(kind), b"\xa6record", pack(record), b"\xaageneration")
            middle = b"".join((*parts, pack(generation), b"\xa4data"))
            middles[(kind, record, generation)] = middle
        if type(ts) is float and 0 <= seq < 1 << 32:  # always, but for a hand-edited row
            # One C call: the map header, "seq" as uint32, "ts" as float64.
            head = _HEAD.pack(b"\x86\xa3seq", 0xCE, seq, b"\xa2ts", 0xCB, ts)
        else:
            head = b"".join((b"\x86\xa3seq", pack(seq), b"\xa2ts", pack(ts)))
        event = head + middle + data
        size += len(event)
        if page and size > budget:
            more = True
            break
        page.append(event)
        datas.append(data)
    _check_values(datas)
    return page, more


def _check_values(blobs: list[bytes]) -> None:
    """Raise ``ValueError`` unless each of ``blobs`` is exactly one msgpack value: parsed in C
    without building the objects, one unpacker for them all."""
    unpacker = msgpack.Unpacker(max_buffer_size=0)
    unpacker.feed(b"".join(blobs))
    end = 0
    for blob in blobs:
        end += len(blob)
        try:
            unpacker.skip()
        except msgpack.OutOfData:
            raise ValueError("a stored event's data is cut short") from None
        if unpacker.tell() != end:
            raise ValueError("a stored event's data is not one msgpack value")


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


# -- operations and turns ----------------------------------------------------------------------

OP_STATES = ("accepted", "terminal", "interrupted")
TURN_STATES = ("running", "completed", "failed", "interrupted")


def get_op(conn: sqlite3.Connection, op_id: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM ops WHERE id=?", (op_id,)).fetchone()
    if row is None:
        return None
    return {
        "id": row["id"],
        "method": row["method"],
        "record": row["record_id"],
        "state": row["state"],
        "result": _unpack(row["result"]),
        "created": row["created"],
        "updated": row["updated"],
    }


def put_op(conn: sqlite3.Connection, op: dict[str, Any]) -> None:
    now = time.time()
    conn.execute(
        "INSERT INTO ops (id, method, record_id, state, result, created, updated) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET state=excluded.state, "
        "result=excluded.result, updated=excluded.updated",
        (op["id"], op["method"], op.get("record"), op["state"], _pack(op.get("result")), now, now),
    )


def begin_turn(conn: sqlite3.Connection, turn: dict[str, Any]) -> None:
    conn.execute(
        "INSERT INTO turns (id, record_id, generation, op_id, state, text, started) "
        "VALUES (?, ?, ?, ?, 'running', ?, ?)",
        (turn["id"], turn["record"], turn["generation"], turn.get("op"), turn["text"], time.time()),
    )


def get_turn(conn: sqlite3.Connection, turn_id: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM turns WHERE id=?", (turn_id,)).fetchone()
    return _turn(row) if row else None


def latest_turn(conn: sqlite3.Connection, record_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT * FROM turns WHERE record_id=? ORDER BY started DESC LIMIT 1", (record_id,)
    ).fetchone()
    return _turn(row) if row else None


def running_turns(conn: sqlite3.Connection, record_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT * FROM turns WHERE record_id=? AND state='running'", (record_id,)
    ).fetchall()
    return [_turn(r) for r in rows]


def orphan_turns(conn: sqlite3.Connection, active: frozenset[str]) -> list[dict[str, Any]]:
    """Running turns whose record is in none of the ``active`` states (per record, by index)."""
    marks = ",".join("?" * len(active))
    rows = conn.execute(
        "SELECT t.* FROM records r JOIN turns t ON t.record_id = r.id AND t.state='running' "
        f"WHERE r.state NOT IN ({marks})",
        sorted(active),
    ).fetchall()
    return [_turn(r) for r in rows]


def end_turn(conn: sqlite3.Connection, turn_id: str, state: str, result: Any) -> bool:
    """Close a running turn; False when it had already ended (ending is idempotent)."""
    cur = conn.execute(
        "UPDATE turns SET state=?, result=?, ended=? WHERE id=? AND state='running'",
        (state, _pack(result), time.time(), turn_id),
    )
    return cur.rowcount == 1


def _turn(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "record": row["record_id"],
        "generation": row["generation"],
        "op": row["op_id"],
        "state": row["state"],
        "text": row["text"],
        "result": _unpack(row["result"]),
        "started": row["started"],
        "ended": row["ended"],
    }
