"""``roost node repair``: salvage what is readable of a damaged ``state.db`` into a new file.

Run by the CLI as ``python -m roost.actors.state.repair --state-dir D`` while no node serves the
directory (it takes ``node.lock``); prints one JSON line, a report or ``{"error": ...}``. A
database that passes the open-time check (``integrity.check``) is left alone. Otherwise the
damaged file is read from a copy (so it stays byte for byte as it was): each table by its rowid
b-tree only (indexes are never trusted, the new file builds its own), in order, skipping past a
page that cannot be read; a header page that is not a database's any more is rebuilt from the
schema roost creates (``salvage.py``). The rows go into a new database of the current schema,
which must pass the check; then ``state.db`` (and its ``-wal``/``-shm``) is renamed to
``state.db.damaged-<UTC time>`` beside it and the new file takes its place. The report names
the problems found and, per table, the rows kept and the rowid ranges that could not be read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from roost.actors.runtime.lock import StateLock
from roost.actors.state import integrity, salvage
from roost.actors.state.schema import SCHEMA_VERSION, migrate
from roost.client.locate import LOCK_FILE
from roost.wire.errors import RoostError

DB = "state.db"
SIDES = ("", "-wal", "-shm")


def problems_of(path: Path) -> list[str]:
    """What the open-time check finds in the file (read-only); empty when it passes."""
    try:
        with contextlib.closing(
            sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        ) as ro:
            integrity.check(ro)
    except RoostError as err:
        return [str(err.detail.get("problem") or err.message)]
    except sqlite3.Error as err:
        return [str(err)]
    return []


def fresh(path: Path) -> sqlite3.Connection:
    """A new database of the current schema, with no rows."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE")
    migrate(conn, 0)
    return conn


def repair(state_dir: Path, node_id: str | None = None) -> dict[str, Any]:
    """Salvage ``state_dir/state.db``; returns the report (see the module docstring)."""
    path = state_dir / DB
    if not path.exists():
        raise RoostError("not-found", "there is no state database to repair")
    problems = problems_of(path)
    if not problems:
        return {"repaired": False, "damaged": False, "problems": []}
    with tempfile.TemporaryDirectory(dir=state_dir, prefix=".repair-") as tmp:
        work = Path(tmp)
        source, rebuilt = salvage.readable_copy(path, work, fresh)
        target = work / "repaired.db"
        with contextlib.closing(fresh(target)) as dst:
            with contextlib.closing(sqlite3.connect(source, isolation_level=None)) as src:
                tables = salvage.copy_tables(src, dst)
            ensure_node_id(dst, node_id)
        left = problems_of(target)
        if left:
            raise integrity.damaged("the salvaged copy does not pass the check: " + left[0])
        os.chmod(target, 0o600)
        kept_as = f"{DB}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        for side in SIDES:
            if (state_dir / (DB + side)).exists():
                os.replace(state_dir / (DB + side), state_dir / (kept_as + side))
        os.replace(target, path)
    return {
        "repaired": True,
        "damaged": True,
        "problems": problems,
        "damaged_file": kept_as,
        "header_rebuilt": rebuilt,
        "schema": SCHEMA_VERSION,
        "tables": tables,
    }


def ensure_node_id(conn: sqlite3.Connection, node_id: str | None) -> None:
    """The salvaged node id (or the one given, which must agree with a salvaged one)."""
    row = conn.execute("SELECT value FROM meta WHERE key='node_id'").fetchone()
    stored = str(row[0]) if row else None
    if stored and node_id and stored != node_id:
        raise RoostError(
            "durable-state-conflict",
            "the state database belongs to another node id",
            {"stored": stored, "requested": node_id},
        )
    if stored is None:
        if not node_id:
            raise integrity.damaged("the node id is unreadable; repair again with --node-id")
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('node_id', ?)", (node_id,))
    defaults = {"path_semantics": "windows" if sys.platform == "win32" else "posix"}
    defaults["created"] = str(time.time())
    for key, value in defaults.items():
        conn.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (key, value))


def main() -> None:
    parser = argparse.ArgumentParser(prog="roost-repair")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--node-id")
    args = parser.parse_args()
    state_dir = Path(args.state_dir)
    lock = StateLock(state_dir / LOCK_FILE)
    try:
        if not state_dir.is_dir():
            raise RoostError("not-found", "there is no state directory to repair")
        if not lock.acquire():
            raise RoostError("node-running", "stop the node before repairing its database")
        try:
            doc: dict[str, Any] = repair(state_dir, args.node_id)
        finally:
            lock.release()
    except RoostError as err:
        print(json.dumps({"error": err.to_body()}))
        sys.exit(2)
    except (sqlite3.Error, OSError, shutil.Error) as err:
        failure = (
            integrity.storage_error(err) if isinstance(err, sqlite3.Error) else None
        ) or RoostError("internal", f"the repair failed: {type(err).__name__}")
        print(json.dumps({"error": failure.to_body()}))
        sys.exit(2)
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
