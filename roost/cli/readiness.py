"""``spawn --wait-ready`` and ``resume --wait-ready``: wait until the session is ready for input,
needs a human, or has ended, within a deadline, and say which.

A spawn answers once the agent runs (record ``live``), before its screen has been read: its
``activity`` is then ``starting``. What comes a moment later (a prompt, a login screen, an exit) is
what the user wants to know, so the wait subscribes to the record's events and reads the record
again at each one (and at least every second, in case PUB dropped one) until an outcome:

- ``ready``: a pty session's screen was classified ``ready`` (a stream session is ready once live);
- ``attention``: the record is in ``attention`` (login, trust, ...): ``needs-attention``, exit 1;
- ``exited``: the record is ``dormant`` or ``failed``: ``session-not-live``, exit 1;
- the deadline passed first: ``timeout``, exit 1, naming what the record still shows.
"""

from __future__ import annotations

import time
from typing import Any

from roost.client.client import Client
from roost.wire.errors import RoostError

READY_TIMEOUT_S = 60.0
RECHECK_S = 1.0


def outcome(record: dict[str, Any]) -> str | None:
    """``ready``, ``attention`` or ``exited`` when the record shows one; None to wait on."""
    state = record.get("state")
    if state in ("dormant", "failed"):
        return "exited"
    if state == "attention":
        return "attention"
    if state == "live" and (record.get("mode") == "stream" or record.get("activity") == "ready"):
        return "ready"
    return None


def wait_ready(client: Client, record: dict[str, Any], deadline_s: float) -> dict[str, Any]:
    """The record once it is ready; a RoostError for attention, an exit or the deadline."""
    rid = str(record["id"])
    stream = client.subscribe(f"e/{rid}/")  # first, then read: nothing falls between
    end = time.monotonic() + deadline_s
    try:
        while True:
            record = client.call("session.show", {"id": rid})["record"]
            found = outcome(record)
            if found == "ready":
                return record
            if found is not None:
                raise _not_ready(found, record)
            left = end - time.monotonic()
            if left <= 0:
                raise _not_ready("timeout", record, deadline_s)
            stream.recv(timeout=min(left, RECHECK_S))
    finally:
        stream.close()


def _not_ready(found: str, record: dict[str, Any], waited: float = 0.0) -> RoostError:
    name = record.get("name") or record["id"]
    detail = {"outcome": found, "record": record}
    if found == "attention":
        why = record.get("attention") or "attention"
        return RoostError(
            "needs-attention",
            f"{name} needs a human: attention ({why}); see it with `roost attach {name}`",
            detail,
        )
    if found == "exited":
        return RoostError(
            "session-not-live",
            f"{name} ended before it was ready ({record['state']}); `roost show {name} --screen`"
            " shows its last screen",
            detail,
        )
    return RoostError(
        "timeout",
        f"{name} was not ready within {waited:g} s (state {record['state']}, "
        f"activity {record.get('activity') or 'unknown'})",
        detail,
    )
