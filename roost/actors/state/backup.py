"""``state.backup``: a consistent copy of the state database while the store keeps serving.

SQLite's online backup API copies the database page by page (``PAGES`` a step) from a second,
read-only connection that holds one read transaction for the whole copy: in WAL mode that is a
snapshot, so the copy is the database as it was when the backup began (every event committed
before is in it, none committed after), the writer is never blocked, and the copy never restarts
because of a write. The copy runs in a worker thread because ``sqlite3.Connection.backup`` runs
all its steps in one blocking call; the event loop meanwhile serves every other request.

The copy is written to a private temporary file beside the destination (mode 0600) and renamed
over it once complete, so the destination is never a half-written database.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import structlog

from roost.actors.state import integrity
from roost.wire import fields as f
from roost.wire import protocol as p
from roost.wire.errors import RoostError, write_refused

log = structlog.get_logger("roost.state")

PAGES = 256  # pages copied per step (1 MiB at SQLite's default 4 KiB page)


def check_destination(raw: str, force: bool, source: Path) -> Path:
    """An absolute path in an existing directory, not the database itself; one that exists is
    refused unless ``force``."""
    dest = Path(raw)
    if not dest.is_absolute():
        raise RoostError("bad-request", "the backup path must be absolute", {"field": "path"})
    live = {source.resolve().with_name(source.name + end) for end in ("", "-wal", "-shm")}
    if dest.resolve() in live:
        raise RoostError(
            "bad-request", "the backup path is the state database itself", {"field": "path"}
        )
    if not dest.parent.is_dir():
        raise RoostError(
            "bad-request", "the backup path's directory does not exist", {"field": "path"}
        )
    if dest.is_dir() or (dest.exists() and not force):
        raise RoostError(
            "backup-exists",
            f"{dest} already exists; choose another path or use --force to replace it",
            {"path": str(dest)},
        )
    return dest


def copy(source: Path, dest: Path, pages: int = PAGES) -> dict[str, Any]:
    """Copy ``source`` to ``dest`` (blocking; see the module docstring); the reply of
    ``state.backup``."""
    began = time.monotonic()
    temp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.partial")
    try:
        os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as err:
        raise write_refused(err, f"cannot create the backup file: {err.strerror}") from None
    try:
        last_seq = _copy(source, temp, pages)
        os.replace(temp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return {
        "path": str(dest),
        "bytes": dest.stat().st_size,
        "last_seq": last_seq,
        "seconds": round(time.monotonic() - began, 3),
    }


def _copy(source: Path, temp: Path, pages: int) -> int:
    uri = source.resolve().as_uri() + "?mode=ro"
    src = sqlite3.connect(uri, uri=True, isolation_level=None)
    dst = sqlite3.connect(temp, isolation_level=None)
    try:
        src.execute("BEGIN")  # one read transaction, held across every step: the snapshot
        src.execute("SELECT count(*) FROM meta").fetchone()
        src.backup(dst, pages=pages, sleep=0)
        src.execute("COMMIT")
        dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
        row = dst.execute("SELECT max(seq) FROM events").fetchone()
        return int(row[0] or 0)
    except sqlite3.Error as err:
        mapped = integrity.storage_error(err)
        if mapped is not None and mapped.code == "storage-full":
            raise RoostError("storage-full", "the backup's disk is full", mapped.detail) from None
        name = str(getattr(err, "sqlite_errorname", "") or "")
        raise RoostError("storage-failed", f"the backup failed: {err}", {"sqlite": name}) from None
    finally:
        dst.close()
        src.close()


class Backup:
    """The ``state.backup`` method of the store whose database is ``source``."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self._lock = asyncio.Lock()  # one backup at a time

    async def handle(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        path, force = f.req_str(body, "path", max_len=4096), bool(body.get("force"))
        dest = check_destination(path, force, self.source)
        async with self._lock:
            reply = await asyncio.to_thread(copy, self.source, dest)
        log.info("backup-written", **reply)
        return reply
