"""The state store's storage health: is the database file being written, and if not, why.

The writer reports each batch that committed (``committed``) or that SQLite failed to write
(``failed``, which returns the stable error the batch's requests get). A spell of failures is
logged once when it starts (naming ENOSPC when the disk is full) and once when a commit works
again; ``status`` is what ``node status`` shows as the state store's ``storage``.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from roost.actors.state import integrity
from roost.wire.errors import RoostError

log = structlog.get_logger("roost.state")
NEARLY_FULL = 256 * 1024  # an I/O error with less than this free is taken for ENOSPC


class Storage:
    """A spell of trouble starts at the first batch SQLite cannot write and ends at the first
    batch committed with room on the disk again (``NEARLY_FULL``): small commits that squeeze
    into a nearly full disk meanwhile do not end it, so it is logged once each way."""

    def __init__(self, directory: Path | None, clock: Callable[[], float] = time.time) -> None:
        self.directory, self.clock = directory, clock
        self.spell: RoostError | None = None  # the failure of the spell under way
        self.since: float | None = None
        self.refused = 0  # batches refused in this spell
        self.last_refused = False  # whether the latest batch was refused

    def free(self) -> int | None:
        """Bytes free to us on the database's file system, or None when unknown."""
        if self.directory is None or not hasattr(os, "statvfs"):
            return None
        try:
            st = os.statvfs(self.directory)
        except OSError:
            return None
        return st.f_bavail * st.f_frsize

    def classify(self, err: sqlite3.Error) -> RoostError:
        failure = integrity.storage_error(err)
        free = self.free()
        if (failure is None or failure.code == "storage-failed") and (
            free is not None and free < NEARLY_FULL
        ):
            failure = RoostError(
                "storage-full",
                "the state directory's disk is full (ENOSPC); the request was not committed",
                {"errno": "ENOSPC"},
            )
        return failure or RoostError("internal", "the state store could not commit")

    def failed(self, err: sqlite3.Error) -> RoostError:
        failure = self.classify(err)
        self.refused += 1
        self.last_refused = True
        if self.spell is None or self.spell.code != failure.code:
            self.since = self.clock()
            log.error(
                "storage-failed",
                code=failure.code,
                errno=failure.detail.get("errno"),
                sqlite=getattr(err, "sqlite_errorname", None),
                reason=str(err),
                free_bytes=self.free(),
            )
        self.spell = failure
        return failure

    def committed(self) -> None:
        self.last_refused = False
        if self.spell is None:
            return
        free = self.free()
        if free is None or free >= NEARLY_FULL:
            log.info("storage-recovered", code=self.spell.code, refused=self.refused)
            self.spell, self.since, self.refused = None, None, 0

    def status(self) -> dict[str, Any]:
        if self.spell is None:
            return {"health": "ok"}
        return {
            "health": "full" if self.spell.code == "storage-full" else "failing",
            "code": self.spell.code,
            "errno": self.spell.detail.get("errno"),
            "since": self.since,
            "refused": self.refused,
            "last_refused": self.last_refused,
            "free_bytes": self.free(),
        }
