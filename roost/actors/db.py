"""The SQLite database of a node: schema, migrations, and the queries the state store runs.

Single writer (the state-store actor), WAL mode. The schema version lives in the database
(``PRAGMA user_version``); a database from a newer roost, another node or another OS's path
semantics is refused before anything is written to it.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import msgpack

from roost.actors.records import Record
from roost.broker.errors import RoostError

SCHEMA_VERSION = 1
PATH_SEMANTICS = "windows" if sys.platform == "win32" else "posix"

SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE workspaces (
  id TEXT PRIMARY KEY, name TEXT, path TEXT NOT NULL UNIQUE, created REAL NOT NULL);
CREATE TABLE records (
  id TEXT PRIMARY KEY, name TEXT UNIQUE, workspace_id TEXT, cwd TEXT NOT NULL,
  provider TEXT NOT NULL, mode TEXT NOT NULL, provider_session TEXT, state TEXT NOT NULL,
  generation INTEGER NOT NULL, active BLOB, activity TEXT, attention TEXT, last_exit BLOB,
  restore_policy TEXT NOT NULL, env BLOB, rows INTEGER NOT NULL, cols INTEGER NOT NULL,
  created REAL NOT NULL, updated REAL NOT NULL);
CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, kind TEXT NOT NULL,
  record_id TEXT, generation INTEGER, data BLOB NOT NULL);
CREATE INDEX events_record ON events(record_id, seq);
"""

PACKED = ("active", "last_exit", "env")


def _pack(value: Any) -> bytes | None:
    return None if value is None else msgpack.packb(value, use_bin_type=True)


def _unpack(value: bytes | None) -> Any:
    return None if value is None else msgpack.unpackb(value, raw=False)


def open_db(path: Path, node_id: str | None) -> tuple[sqlite3.Connection, str]:
    """Open (creating if new) and check the database; returns the connection and node id."""
    fresh = not path.exists()
    if not fresh:
        refuse_foreign(path, node_id)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    if fresh:
        os.chmod(path, 0o600)
        with conn:
            conn.executescript("BEGIN;" + SCHEMA_V1 + "COMMIT;")
            chosen = node_id or ("n-" + uuid.uuid4().hex[:10])
            meta = {
                "node_id": chosen,
                "path_semantics": PATH_SEMANTICS,
                "created": str(time.time()),
            }
            conn.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    return conn, get_meta(conn, "node_id")


def refuse_foreign(path: Path, node_id: str | None) -> None:
    """Read-only checks of an existing database; raise the durable-state-* refusal codes."""
    uri = path.resolve().as_uri() + "?mode=ro"  # escaped: '#', '?' and '%' are legal in paths
    try:
        ro = sqlite3.connect(uri, uri=True)
        try:
            version = ro.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise RoostError(
                    "durable-state-schema-unsupported",
                    f"the state database has schema {version}; this roost reads up "
                    f"to {SCHEMA_VERSION}",
                    {"schema": version},
                )
            meta = dict(ro.execute("SELECT key, value FROM meta").fetchall())
        finally:
            ro.close()
    except sqlite3.DatabaseError:
        raise RoostError(
            "durable-state-schema-unsupported",
            "the state database cannot be read as a roost database",
        ) from None
    if node_id and meta.get("node_id") != node_id:
        raise RoostError(
            "durable-state-conflict",
            "the state database belongs to another node id",
            {"stored": meta.get("node_id"), "requested": node_id},
        )
    if meta.get("path_semantics", PATH_SEMANTICS) != PATH_SEMANTICS:
        raise RoostError(
            "durable-state-path-semantics-unsupported",
            f"the state database holds {meta.get('path_semantics')} paths",
        )


def get_meta(conn: sqlite3.Connection, key: str) -> str:
    row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return str(row[0]) if row else ""


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
