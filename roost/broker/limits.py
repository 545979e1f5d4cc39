"""Limits shared by the CLI and the processes that enforce them: the event log's retention bounds
(``roost node up --retain-events``, checked by the CLI before it starts a daemon, and again by the
daemon and the state store).
"""

from __future__ import annotations

from roost.broker.errors import RoostError

DEFAULT_LIMIT = 1_000_000
MIN_LIMIT = 1_000
MAX_LIMIT = 1_000_000_000_000

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "MIN_LIMIT", "check_limit"]


def check_limit(raw: str | int) -> int:
    """A ``--retain-events`` value, or ``bad-request`` naming the flag."""
    try:
        limit = int(raw)
    except (TypeError, ValueError):
        limit = -1
    if not MIN_LIMIT <= limit <= MAX_LIMIT:
        raise RoostError(
            "bad-request",
            f"--retain-events must be a whole number from {MIN_LIMIT:,} to {MAX_LIMIT:,}",
            {"field": "retain-events"},
        )
    return limit
