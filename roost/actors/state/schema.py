"""The node database's schema: creation, ordered migrations, and refusing state that is not ours.

The schema version is ``PRAGMA user_version``. Opening an older database first copies it to
``state.db.v<N>.bak`` beside it (SQLite's online backup), then runs each migration in order, each in
its own transaction. A database from a newer roost, of another node id, or holding paths of another
OS's semantics is refused by read-only checks, before anything (the database or a backup) is
written, and the refusal names no host path; so is a damaged file (``integrity.check``, a quick
check at every open).
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from roost.actors.state import integrity
from roost.wire.errors import RoostError

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

# v2: idempotent event ids (spooled events may be sent twice), operations, turns.
MIGRATE_2 = """
ALTER TABLE events ADD COLUMN eid TEXT;
CREATE UNIQUE INDEX events_eid ON events(eid) WHERE eid IS NOT NULL;
CREATE TABLE ops (
  id TEXT PRIMARY KEY, method TEXT NOT NULL, record_id TEXT, state TEXT NOT NULL,
  result BLOB, created REAL NOT NULL, updated REAL NOT NULL);
CREATE TABLE turns (
  id TEXT PRIMARY KEY, record_id TEXT NOT NULL, generation INTEGER NOT NULL, op_id TEXT,
  state TEXT NOT NULL, text TEXT NOT NULL, result BLOB, started REAL NOT NULL, ended REAL);
CREATE INDEX turns_record ON turns(record_id, state);
"""

# v3: a record may run in a git worktree of its own (spawn --worktree): {repo, path, branch, base}.
MIGRATE_3 = """
ALTER TABLE records ADD COLUMN worktree BLOB;
"""

# v4: restore policies after a reboot (spawn --restore never|resume). Version 1 knew one policy,
# "dormant" (stay dormant), which is what "never" means now.
MIGRATE_4 = """
UPDATE records SET restore_policy = 'never' WHERE restore_policy NOT IN ('never', 'resume');
"""

# v5: each event stored once as the msgpack map events.since sends (eventlog.py); rows from before
# keep their data column and are encoded when read, so the migration rewrites nothing.
MIGRATE_5 = """
ALTER TABLE events ADD COLUMN packed BLOB;
"""

# v6: tokens and cost. One row per figure a provider reported (a stream turn's result, or the
# part of a session's running total that is new since the last report), kept after its record is
# forgotten (``name`` and ``provider`` as they were); a session's running totals as last
# reported, per source, so a report repeated or re-sent adds nothing.
MIGRATE_6 = """
CREATE TABLE usage (
  id INTEGER PRIMARY KEY AUTOINCREMENT, record_id TEXT NOT NULL, name TEXT,
  provider TEXT NOT NULL, provider_session TEXT, turn_id TEXT, source TEXT NOT NULL,
  ts REAL NOT NULL, input INTEGER NOT NULL, output INTEGER NOT NULL,
  cache_read INTEGER NOT NULL, cache_write INTEGER NOT NULL, cost_usd REAL);
CREATE UNIQUE INDEX usage_turn ON usage(turn_id) WHERE source = 'stream';
CREATE INDEX usage_record ON usage(record_id);
CREATE INDEX usage_ts ON usage(ts);
CREATE TABLE usage_marks (
  record_id TEXT NOT NULL, key TEXT NOT NULL, totals BLOB NOT NULL, updated REAL NOT NULL,
  PRIMARY KEY (record_id, key));
"""


# v7: what a usage limit does to the record (spawn --on-limit wait|continue), and the reset time
# its screen showed while it is in attention for one.
MIGRATE_7 = """
ALTER TABLE records ADD COLUMN on_limit TEXT NOT NULL DEFAULT 'wait';
ALTER TABLE records ADD COLUMN reset_at REAL;
"""


MIGRATE_8 = """
ALTER TABLE records ADD COLUMN owner TEXT;
"""


def _script(sql: str) -> Callable[[sqlite3.Connection], None]:
    def run(conn: sqlite3.Connection) -> None:
        for statement in filter(str.strip, sql.split(";")):
            conn.execute(statement)

    return run


# MIGRATIONS[n] takes a database at version n-1 to version n.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _script(SCHEMA_V1),
    2: _script(MIGRATE_2),
    3: _script(MIGRATE_3),
    4: _script(MIGRATE_4),
    5: _script(MIGRATE_5),
    6: _script(MIGRATE_6),
    7: _script(MIGRATE_7),
    8: _script(MIGRATE_8),
}
SCHEMA_VERSION = max(MIGRATIONS)

_WINDOWS_PATH = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")


def path_semantics(path: str) -> str | None:
    """Which OS's semantics an absolute path has: ``posix``, ``windows`` or None (unclear)."""
    if _WINDOWS_PATH.match(path):
        return "windows"
    if path.startswith("/"):
        return "posix"
    return None


def open_db(
    path: Path, node_id: str | None, *, check: bool = True
) -> tuple[sqlite3.Connection, str]:
    """Open (creating or migrating) and check the database; returns the connection and node id.
    A damaged file is ``durable-state-damaged``, a full or failing disk ``storage-*``;
    ``check=False`` skips the integrity check (just done by the daemon starting the store)."""
    try:
        return _open(path, node_id, check)
    except sqlite3.Error as err:
        raise integrity.storage_error(err) or integrity.damaged(str(err)) from None


def _open(path: Path, node_id: str | None, check: bool) -> tuple[sqlite3.Connection, str]:
    fresh = not path.exists()
    version = 0 if fresh else refuse_foreign(path, node_id, check=check)
    if 0 < version < SCHEMA_VERSION:
        backup(path, version)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    if fresh:
        os.chmod(path, 0o600)
    migrate(conn, version)
    if fresh:
        chosen = node_id or ("n-" + uuid.uuid4().hex[:10])
        meta = {"node_id": chosen, "path_semantics": PATH_SEMANTICS, "created": str(time.time())}
        with conn:
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
    return conn, get_meta(conn, "node_id")


def migrate(conn: sqlite3.Connection, version: int) -> None:
    for target in range(version + 1, SCHEMA_VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            MIGRATIONS[target](conn)
            conn.execute(f"PRAGMA user_version={target}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


def backup(path: Path, version: int) -> Path:
    """Copy the database (consistently, WAL included) to ``<name>.v<version>.bak`` beside it."""
    target = path.with_name(f"{path.name}.v{version}.bak")
    src = sqlite3.connect(path)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()
    os.chmod(target, 0o600)
    return target


def refuse_foreign(path: Path, node_id: str | None, *, check: bool = True) -> int:
    """Read-only checks of an existing database; returns its schema version or raises the
    durable-state-* refusal codes."""
    uri = path.resolve().as_uri() + "?mode=ro"  # escaped: '#', '?' and '%' are legal in paths
    try:
        ro = sqlite3.connect(uri, uri=True)
        try:
            if check:
                integrity.check(ro)
            version = int(ro.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise RoostError(
                    "durable-state-schema-unsupported",
                    f"the state database has schema {version}; this roost reads up to "
                    f"{SCHEMA_VERSION}",
                    {"schema": version, "supported": SCHEMA_VERSION},
                )
            meta = dict(ro.execute("SELECT key, value FROM meta").fetchall())
            paths = [row[0] for row in ro.execute("SELECT path FROM workspaces")]
            paths += [row[0] for row in ro.execute("SELECT cwd FROM records")]
        finally:
            ro.close()
    except sqlite3.OperationalError as err:
        if (failure := integrity.storage_error(err)) is not None:
            raise failure from None
        raise RoostError(  # readable SQLite, but not ours (no meta table, say)
            "durable-state-schema-unsupported",
            "the state database cannot be read as a roost database",
        ) from None
    except sqlite3.DatabaseError as err:
        raise integrity.damaged(str(err)) from None
    if node_id and meta.get("node_id") != node_id:
        raise RoostError(
            "durable-state-conflict",
            "the state database belongs to another node id",
            {"stored": meta.get("node_id"), "requested": node_id},
        )
    foreign = {path_semantics(p) for p in paths} - {PATH_SEMANTICS, None}
    stored = meta.get("path_semantics", PATH_SEMANTICS)
    if stored != PATH_SEMANTICS or foreign:
        raise RoostError(
            "durable-state-path-semantics-unsupported",
            f"the state database holds {stored if stored != PATH_SEMANTICS else foreign.pop()} "
            f"paths; this node uses {PATH_SEMANTICS} paths",
        )
    return version


def get_meta(conn: sqlite3.Connection, key: str) -> str:
    row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return str(row[0]) if row else ""
