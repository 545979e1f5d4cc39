"""``node.backup``: a consistent copy of the state database, written by the state store.

The node only forwards: the store owns the database and copies it with SQLite's online backup
(``roost/actors/state/backup.py``) while it goes on serving. Only an operator gets here (the
broker refuses an observer every method not in ``READ_METHODS``).
"""

from __future__ import annotations

from typing import Any

from roost.actors.runtime.caller import Caller
from roost.actors.runtime.peer import Handler
from roost.wire import fields as f
from roost.wire import protocol as p

BACKUP_TIMEOUT_S = 600.0  # a copy runs at disk speed: gigabytes take a while


def handler(peer: Caller) -> Handler:
    """The request handler: ``{path, force?}`` -> ``{path, bytes, last_seq, seconds}``."""

    async def backup(h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        request = {"path": f.req_str(body, "path", max_len=4096), "force": bool(body.get("force"))}
        return await peer.call("state", "state.backup", request, timeout=BACKUP_TIMEOUT_S)

    return backup
