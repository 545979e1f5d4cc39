"""The queries the state store runs on the node's SQLite database (schema: ``schema.py``).

Single writer (the state-store actor), WAL mode. Records, workspaces, the event log (node-wide
sequence; an optional event id makes a re-sent spooled event a no-op), operations and turns.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from typing import Any

import msgpack

from roost.actors.records import Record
from roost.actors.schema import (  # noqa: F401 - re-exported: the database's public face
    PATH_SEMANTICS,
    SCHEMA_VERSION,
    get_meta,
    open_db,
    refuse_foreign,
)
from roost.broker.errors import RoostError

PACKED = ("active", "last_exit", "env")


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
) -> tuple[dict[str, Any], bool]:
    row = conn.execute("SELECT * FROM workspaces WHERE path=?", (path,)).fetchone()
    if row is not None:
        return dict(row), False
    ws = {"id": "w" + uuid.uuid4().hex[:8], "name": name, "path": path, "created": time.time()}
    conn.execute("INSERT INTO workspaces VALUES (:id, :name, :path, :created)", ws)
    return ws, True


def find_workspace(conn: sqlite3.Connection, ref: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT * FROM workspaces WHERE id=? OR name=? OR path=? LIMIT 1", (ref, ref, ref)
    ).fetchone()
    return dict(row) if row else None


def list_workspaces(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute("SELECT * FROM workspaces ORDER BY created")]


# -- events ------------------------------------------------------------------------------------


def append_event(conn: sqlite3.Connection, event: dict[str, Any]) -> dict[str, Any]:
    ts = time.time()
    cur = conn.execute(
        "INSERT INTO events (ts, kind, record_id, generation, data) VALUES (?, ?, ?, ?, ?)",
        (
            ts,
            event["kind"],
            event.get("record"),
            event.get("generation"),
            _pack(event.get("data") or {}),
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


def events_since(
    conn: sqlite3.Connection, after: int, limit: int, record_id: str | None = None
) -> list[dict[str, Any]]:
    sql = "SELECT * FROM events WHERE seq > ?"
    args: list[Any] = [after]
    if record_id:
        sql += " AND record_id = ?"
        args.append(record_id)
    rows = conn.execute(sql + " ORDER BY seq LIMIT ?", (*args, limit)).fetchall()
    return [
        {
            "seq": r["seq"],
            "ts": r["ts"],
            "kind": r["kind"],
            "record": r["record_id"],
            "generation": r["generation"],
            "data": _unpack(r["data"]),
        }
        for r in rows
    ]


def last_seq(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT MAX(seq) FROM events").fetchone()
    return int(row[0] or 0)


def first_seq(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT MIN(seq) FROM events").fetchone()
    return int(row[0] or 0)
