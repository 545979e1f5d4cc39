"""Limits shared by the CLI and the processes that enforce them: the event log's retention bounds
(``roost node up --retain-events``, checked by the CLI before it starts a daemon, and again by the
daemon and the state store); and the wire's version and limits, which ``roost.wire.codec`` (and
so the protocol) takes from here, as do the parts of ``roost ls``'s fast path that must not import
msgpack (``roost.cli.quick``, ``roost.client.fast.tinypack``, ``roost.client.fast.zmtp``).
"""

from __future__ import annotations

from roost.wire.errors import RoostError

DEFAULT_LIMIT = 1_000_000
MIN_LIMIT = 1_000
MAX_LIMIT = 1_000_000_000_000

PROTOCOL_VERSION = 1
# A frame over HARD_FRAME_LIMIT is dropped by libzmq (MAXMSGSIZE) and the peer disconnected;
# anything between BODY_LIMIT and the hard limit is answered with frame-too-large.
HEADER_LIMIT = 4 * 1024
BODY_LIMIT = 1024 * 1024
HARD_FRAME_LIMIT = 8 * 1024 * 1024
MAX_STR = 1024 * 1024
MAX_BIN = 1024 * 1024
MAX_ARRAY = 10_000
MAX_MAP = 1_000
MAX_DEPTH = 32
MAX_FRAMES = 4
# Typed input accepted for a pty session and not yet read by its agent: past this the node
# accepts no more (`agent-not-reading`) until the agent reads.
INPUT_PENDING_MAX = 256 * 1024

__all__ = [
    "BODY_LIMIT",
    "DEFAULT_LIMIT",
    "HARD_FRAME_LIMIT",
    "HEADER_LIMIT",
    "INPUT_PENDING_MAX",
    "MAX_ARRAY",
    "MAX_BIN",
    "MAX_DEPTH",
    "MAX_FRAMES",
    "MAX_LIMIT",
    "MAX_MAP",
    "MAX_STR",
    "MIN_LIMIT",
    "PROTOCOL_VERSION",
    "check_limit",
]


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
