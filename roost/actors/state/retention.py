"""Event-log retention: how many events the state store keeps, and the trimming that keeps it so.

The log keeps the events of the last ``limit`` sequence numbers. Trimming starts only once the log
holds ``limit + slack`` of them and then deletes down to ``limit``, in chunks of at most ``CHUNK``
rows (one transaction each, a few milliseconds), so a burst never costs one delete per write and
no write waits long behind one. Sequence numbers are never reused: ``events.seq`` is an SQLite
AUTOINCREMENT key, whose high-water mark (``sqlite_sequence``) survives deleting every row, and
``db.last_seq`` reads it. Operation ids are kept for ``OPS_KEEP_S`` (7 days) after their last
update; turns are kept (per record, small, removed with nothing else).

Event ids (``eid``) of trimmed events are gone with them: a spooled event re-sent after its first
copy was trimmed would be appended again as new. A supervisor re-sends its spool within seconds to
minutes (when the node is back), while trimming needs at least ``MIN_LIMIT + slack`` (2,000) newer
events first, so in practice a trimmed eid is never re-sent.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from roost.actors.state.schema import get_meta
from roost.wire.errors import RoostError
from roost.wire.limits import DEFAULT_LIMIT, check_limit

CHUNK = 5_000
OPS_KEEP_S = 7 * 24 * 3600.0
OPS_EVERY_S = 600.0
META_KEY = "retain_events"


def slack(limit: int) -> int:
    """How far past ``limit`` the log may grow before a trim starts."""
    return max(1_000, limit // 100)


@dataclass
class Retention:
    """The trimming plan: plain data, so tests drive it without a database."""

    limit: int = DEFAULT_LIMIT
    chunk: int = CHUNK
    target: int = 0  # delete every seq <= target; grows, never shrinks (seqs are never reused)

    def plan(self, first: int, last: int) -> int | None:
        """The highest seq to delete in this step, or None when nothing is due.

        ``first`` is the oldest retained seq (``last + 1`` when the log is empty), ``last`` the
        highest ever given (``db.seq_range``)."""
        if last - first + 1 > self.limit + slack(self.limit):
            self.target = max(self.target, last - self.limit)
        if first > self.target:
            return None
        return min(self.target, first + self.chunk - 1)


def trim_events(conn: sqlite3.Connection, upto: int) -> int:
    """Delete the events with ``seq <= upto``; returns how many went."""
    return conn.execute("DELETE FROM events WHERE seq <= ?", (upto,)).rowcount


def trim_ops(conn: sqlite3.Connection, before: float) -> int:
    """Delete the operations last updated before ``before`` (Unix seconds)."""
    return conn.execute("DELETE FROM ops WHERE updated < ?", (before,)).rowcount


def load_limit(conn: sqlite3.Connection, given: int | None) -> int:
    """The limit in force: ``given`` (stored for later starts), else the one stored last."""
    if given is not None:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (META_KEY, str(check_limit(given))),
        )
        return given
    try:
        return check_limit(get_meta(conn, META_KEY) or DEFAULT_LIMIT)
    except RoostError:
        return DEFAULT_LIMIT  # an unreadable stored value (edited by hand): the default
