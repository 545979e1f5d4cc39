"""What the node does when a session's supervisor is gone: salvage, then fence, then record.

First the dead supervisor's spool is delivered (events and turn ends it wrote but never sent),
then every turn still running is marked ``interrupted`` (never replayed, never completed by
invention), then any process left of the session is killed (the supervisor's group, which holds a
stream turn's process, and the agent's group), so no other session is touched.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import structlog

from roost.actors.delivery import Deliverer
from roost.actors.launcher import still_running
from roost.actors.outbox import mark_delivered, pending
from roost.actors.peer import Peer
from roost.actors.records import Record
from roost.broker.errors import RoostError

log = structlog.get_logger("roost.loss")


async def salvage_spool(peer: Peer, record: Record, directory: Path) -> tuple[int, str | None]:
    """Deliver what a dead supervisor left undelivered; returns how many entries were, and the
    provider session id it had learned (from a turn's output or an identity report), if any."""
    entries = pending(directory)
    learned: list[str] = []
    instance = str((record.active or {}).get("instance"))
    deliver = Deliverer(peer, record.provider, instance, on_identity=learned.append)
    done = 0
    for entry in entries:
        if entry.get("t") == "report":
            found = (entry.get("body") or {}).get("provider_session")
            if entry.get("method") == "node.session.identity" and found:
                learned.append(str(found))
            continue  # other reports are about the process, which the node now settles itself
        try:
            await deliver(entry)
        except RoostError as err:
            if err.code in ("unavailable", "unreachable", "timeout"):
                raise
            log.error("salvage-refused", record=record.id, n=entry.get("n"), code=err.code)
        mark_delivered(directory, int(entry["n"]))
        done += 1
    return done, (learned[-1] if learned else None)


def kill_session_processes(active: dict[str, Any]) -> None:
    for key in ("pid", "agent_pid"):
        pid = active.get(key)
        if not pid:
            continue
        if key == "pid" and not still_running(pid, active.get("started")):
            continue
        for kill in (os.killpg, os.kill):
            try:
                kill(int(pid), signal.SIGKILL)
                break
            except (ProcessLookupError, PermissionError):
                continue


async def interrupt_turns(peer: Peer, record: Record, reason: str) -> list[str]:
    reply = await peer.call(
        "state", "state.turn.interrupt", {"record": record.id, "reason": reason}
    )
    interrupted: list[str] = reply["interrupted"]
    return interrupted
