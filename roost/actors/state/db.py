"""The queries the state store runs on the node's SQLite database (schema: ``schema.py``).

Single writer (the state-store actor), WAL mode. Records, workspaces, operations and turns; the
event log's queries are ``eventlog.py``'s, named here too.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from typing import Any

import msgpack

from roost.actors.state.eventlog import REPLY_BUDGET as REPLY_BUDGET
from roost.actors.state.eventlog import append_event as append_event
from roost.actors.state.eventlog import event_seq as event_seq
from roost.actors.state.eventlog import events_page as events_page
from roost.actors.state.eventlog import events_since as events_since
from roost.actors.state.eventlog import first_seq as first_seq
from roost.actors.state.eventlog import last_seq as last_seq
from roost.actors.state.eventlog import packed_map as packed_map
from roost.actors.state.eventlog import seq_range as seq_range
from roost.actors.state.records import Record
from roost.actors.state.schema import PATH_SEMANTICS as PATH_SEMANTICS
from roost.actors.state.schema import SCHEMA_VERSION as SCHEMA_VERSION
from roost.actors.state.schema import get_meta as get_meta
from roost.actors.state.schema import open_db as open_db
from roost.actors.state.schema import refuse_foreign as refuse_foreign
from roost.wire.errors import RoostError

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
        "reset_at",
        "on_limit",
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
    """The record goes; its usage rows stay (``roost usage`` still counts them)."""
    conn.execute("DELETE FROM records WHERE id=?", (record_id,))
    conn.execute("DELETE FROM usage_marks WHERE record_id=?", (record_id,))


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
