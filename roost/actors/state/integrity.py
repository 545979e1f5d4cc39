"""What SQLite's own failures mean to roost: a damaged database file, a full or failing disk.

``check`` runs ``PRAGMA quick_check`` on a read-only connection when the database is opened (at
``roost node up`` and at each state-store start): a damaged file is refused with
``durable-state-damaged`` before anything is written, and ``roost node repair`` salvages it
(``repair.py``). ``storage_error`` maps an ``sqlite3.Error`` raised by a write to the stable
codes ``storage-full`` (ENOSPC) and ``storage-failed`` (an I/O error), else to
``durable-state-damaged`` (SQLITE_CORRUPT, SQLITE_NOTADB) or None (not a storage failure).
"""

from __future__ import annotations

import sqlite3

from roost.wire.errors import RoostError

ADVICE = "run `roost node repair` to salvage it into a new file (the damaged one is kept)"
_FULL = {sqlite3.SQLITE_FULL}
_IO = {sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY}
_DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}


def damaged(problem: str = "") -> RoostError:
    """The refusal of a damaged state database (``problem``: SQLite's first complaint)."""
    detail = {"problem": problem[:200]} if problem else {}
    return RoostError("durable-state-damaged", f"the state database is damaged; {ADVICE}", detail)


def check(conn: sqlite3.Connection) -> None:
    """``PRAGMA quick_check`` (pages, b-trees, key order), the full ``integrity_check`` of the
    small tables, and what quick_check does not see in the event log: ``events_record``
    counted against the table (a row missing from it) and ``events_eid`` holding a key twice.
    Raises ``durable-state-damaged`` naming the first problems. (The whole file's
    ``integrity_check`` would take about 9 times as long: bench/bench_open.py.)"""
    try:
        problems = _problems(conn)
    except sqlite3.DatabaseError as err:
        problems = [str(err)]
    if problems:
        raise damaged("; ".join(problems))


SMALL_TABLES = ("meta", "workspaces", "records", "ops", "turns")
EVENT_COUNTS = {  # the same number counted through the table and through an index
    "events": "SELECT count(*) FROM events NOT INDEXED",
    "events_record": "SELECT count(*) FROM events INDEXED BY events_record",
}
EID_COUNTS = {  # a unique index holds each key once
    "events_eid": "SELECT count(*) FROM events INDEXED BY events_eid WHERE eid IS NOT NULL",
    "events_eid distinct": "SELECT count(DISTINCT eid) FROM events INDEXED BY events_eid "
    "WHERE eid IS NOT NULL",
}


def _problems(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("PRAGMA quick_check(5)").fetchall()
    problems = [str(r[0]) for r in rows if r[0] != "ok"]
    if problems or not rows:
        return problems or ["quick_check gave no answer"]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    for table in sorted(tables.intersection(SMALL_TABLES)):
        found = conn.execute(f"PRAGMA integrity_check({table})").fetchall()
        problems += [str(r[0]) for r in found if r[0] != "ok"]
    for counts, index in ((EVENT_COUNTS, "events_record"), (EID_COUNTS, "events_eid")):
        if "events" in tables and index in indexes:
            seen = {name: conn.execute(sql).fetchone()[0] for name, sql in counts.items()}
            if len(set(seen.values())) > 1:
                problems.append(f"index {index} disagrees with table events: {seen}")
    return problems[:5]


def primary_code(err: sqlite3.Error) -> int:
    return int(getattr(err, "sqlite_errorcode", 0) or 0) & 0xFF


def storage_error(err: sqlite3.Error) -> RoostError | None:
    """The stable code for SQLite's failure to read or write the file, or None (a bug)."""
    code = primary_code(err)
    if code in _FULL:
        return RoostError(
            "storage-full",
            "the state directory's disk is full (ENOSPC); the request was not committed",
            {"errno": "ENOSPC"},
        )
    if code in _IO:
        return RoostError(
            "storage-failed",
            "the state database could not be written (disk I/O error); the request was not "
            "committed",
            {"sqlite": str(getattr(err, "sqlite_errorname", "") or "")},
        )
    if code in _DAMAGED:
        return damaged(str(err))
    return None
