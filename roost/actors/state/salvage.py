"""Reading what can be read of a damaged SQLite file (for ``repair.py``).

``readable_copy`` copies the file (and its WAL) to a work directory and, when SQLite no longer
takes it for a database (its header page overwritten), puts in place a header page rebuilt from
the schema roost creates, whose tables have the same root pages, so the pages after it can be
read. ``copy_tables`` reads each table through its rowid b-tree only, in rowid order, a row at
a time; where a page cannot be read it finds the next rowid it can seek to (doubling, then
bisecting) and notes the range it skipped; the rows go into the new database's table of the
same name (shared columns only; rowids kept, so event seqs stay what they were).
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from roost.actors.state import integrity

HEADER = b"SQLite format 3\x00"
TABLE_PAGES = (0x05, 0x0D)
INDEX_PAGES = (0x02, 0x0A)
LOWEST = -(2**63)
FAR = 2**40  # where the search for a readable rowid gives up when the largest is unreadable


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def readable_copy(
    path: Path, work: Path, fresh: Callable[[Path], sqlite3.Connection]
) -> tuple[Path, bool]:
    """A copy SQLite can open; True when its header page had to be rebuilt."""
    source = work / "source.db"
    shutil.copyfile(path, source)
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        shutil.copyfile(wal, work / "source.db-wal")
    if _opens(source):
        return source, False
    (work / "source.db-wal").unlink(missing_ok=True)  # frames of a file we could not read
    with contextlib.closing(fresh(work / "template.db")):
        pass
    template = (work / "template.db").read_bytes()
    size = int.from_bytes(template[16:18], "big")
    data = bytearray(source.read_bytes())
    if len(data) < 2 * size:
        raise integrity.damaged("nothing past the header page is left to salvage")
    page = bytearray(template[:size])
    page[28:32] = (len(data) // size).to_bytes(4, "big")  # the pages the file holds
    page[32:40] = bytes(8)  # no freelist: its pages are not read anyway
    data[:size] = page
    source.write_bytes(bytes(data[: len(data) // size * size]))
    if not _opens(source) or not _roots_fit(source, bytes(data), size):
        raise integrity.damaged("the header page is unreadable and cannot be rebuilt")
    return source, True


def _opens(path: Path) -> bool:
    try:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            conn.execute("SELECT count(*) FROM meta NOT INDEXED").fetchone()
    except sqlite3.DatabaseError:
        return False
    return True


def _roots_fit(path: Path, data: bytes, size: int) -> bool:
    """Each root page the rebuilt schema names is a b-tree page of the right kind."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        roots = conn.execute("SELECT type, rootpage FROM sqlite_master WHERE rootpage > 1")
        for kind, root in roots.fetchall():
            offset = (int(root) - 1) * size
            if offset >= len(data):
                continue  # past a truncation: nothing of it to read either way
            wanted = TABLE_PAGES if kind == "table" else INDEX_PAGES
            if data[offset] not in wanted:
                return False
    return True


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    try:
        return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({q(table)})")]
    except sqlite3.DatabaseError:
        return []


def copy_tables(src: sqlite3.Connection, dst: sqlite3.Connection) -> dict[str, Any]:
    """Every table of ``dst`` (but SQLite's own) filled from ``src``; returns what was kept."""
    report: dict[str, Any] = {}
    tables = [
        str(r[0])
        for r in dst.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY rowid")
        if not str(r[0]).startswith("sqlite_")
    ]
    dst.execute("BEGIN")
    for table in tables:
        shared = [c for c in columns(dst, table) if c in set(columns(src, table))]
        if not shared:
            report[table] = {"kept": 0, "absent": True}  # not in the damaged file's schema
            continue
        report[table] = _copy(src, dst, table, shared)
    _keep_sequence(src, dst)
    dst.execute("COMMIT")
    return report


def _copy(
    src: sqlite3.Connection, dst: sqlite3.Connection, table: str, cols: list[str]
) -> dict[str, Any]:
    names = ", ".join(q(c) for c in cols)
    insert = (
        f"INSERT OR IGNORE INTO {q(table)} (rowid, {names}) "
        f"VALUES ({', '.join('?' for _ in range(len(cols) + 1))})"
    )
    select = f"SELECT rowid, {names} FROM {q(table)} NOT INDEXED WHERE rowid > ? ORDER BY rowid"
    kept = dropped = 0
    first = last = None
    unreadable: list[list[int | None]] = []
    for row in _rows(src, select, unreadable):
        if dst.execute(insert, row).rowcount:
            kept += 1
            first = row[0] if first is None else first
            last = row[0]
        else:
            dropped += 1  # a duplicate of a unique value already kept
    out: dict[str, Any] = {"kept": kept, "unreadable": unreadable, "duplicates_dropped": dropped}
    if table == "events":
        out.update(first_seq=first, last_seq=last)
    return out


def _rows(src: sqlite3.Connection, select: str, gaps: list[list[int | None]]) -> Iterator[Any]:
    """The rows of ``select`` from the lowest rowid on, stepping over what cannot be read."""
    after = LOWEST
    top = _top(src, select)
    while True:
        try:
            for row in src.execute(select, (after,)):
                after = int(row[0])
                yield tuple(row)
            return
        except sqlite3.DatabaseError:
            resume = _next_readable(src, select, after, top)
            gaps.append([after + 1 if after > LOWEST else None, resume])
            if resume is None:
                return
            after = resume


def _top(src: sqlite3.Connection, select: str) -> int | None:
    table = select.split(" FROM ", 1)[1].split(" ", 1)[0]
    try:
        row = src.execute(f"SELECT max(rowid) FROM {table} NOT INDEXED").fetchone()
    except sqlite3.DatabaseError:
        return None
    return None if row is None or row[0] is None else int(row[0])


def _seeks(src: sqlite3.Connection, select: str, after: int) -> bool:
    try:
        src.execute(select + " LIMIT 1", (after,)).fetchall()
    except sqlite3.DatabaseError:
        return False
    return True


def _next_readable(src: sqlite3.Connection, select: str, after: int, top: int | None) -> int | None:
    """The least ``y > after`` from which the rows after ``y`` can be sought (the rows in
    ``(after, y]`` are lost), or None when nothing past ``after`` can be read."""
    base = max(after, 0)
    limit = top if top is not None else base + FAR
    step = 1
    while base + step <= limit and not _seeks(src, select, base + step):
        step *= 2
    if base + step > limit:
        return None if not _seeks(src, select, limit) else limit
    lo, hi = base + step // 2, base + step  # lo fails (or is base), hi seeks
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _seeks(src, select, mid) else (mid, hi)
    return hi


def _keep_sequence(src: sqlite3.Connection, dst: sqlite3.Connection) -> None:
    """Event seqs never go back: the new file's sequence starts past the old file's."""
    try:
        row = src.execute("SELECT seq FROM sqlite_sequence WHERE name='events'").fetchone()
    except sqlite3.DatabaseError:
        row = None
    kept = dst.execute("SELECT max(seq) FROM events").fetchone()[0] or 0
    seq = max(kept, int(row[0]) if row and row[0] is not None else 0)
    dst.execute("DELETE FROM sqlite_sequence WHERE name='events'")
    dst.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('events', ?)", (seq,))
