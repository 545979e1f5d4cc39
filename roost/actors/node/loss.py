"""What the node does when a session's supervisor is gone: salvage, then fence, then record.

First the dead supervisor's spool is delivered (events and turn ends it wrote but never sent),
then every turn still running is marked ``interrupted`` (never replayed, never completed by
invention), then any process left of the session is killed (the supervisor's group, which holds a
stream turn's process, and the agent's group), so no other session is touched.

A turn end found in the spool is recorded as the supervisor saw it, with the turn's facts kept
beside the spool (``delivery.FACTS``): a turn whose process exited 0 after its result is
``completed``, though its supervisor died before delivering that. A turn with no end in the spool
is ``interrupted`` (its process's end was never seen); when its result line was recorded, the
interrupted turn keeps what the provider said (``result``, ``is_error``).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import structlog

from roost.actors.node.launcher import still_running
from roost.actors.runtime.caller import Caller
from roost.actors.state.records import ACTIVE_STATES, Record
from roost.actors.supervisor.delivery import FACTS, Deliverer, Facts, finished, interrupted_result
from roost.actors.supervisor.outbox import mark_delivered, pending
from roost.wire.errors import RoostError
from roost.wire.messages import Active

log = structlog.get_logger("roost.loss")


@dataclass
class Salvaged:
    """What a dead supervisor's spool gave: how many entries were delivered, the provider session
    id it had learned (from a turn's output or an identity report), and the facts of turns whose
    end it never wrote."""

    delivered: int = 0
    learned: list[str] = field(default_factory=list)
    facts: dict[str, Facts] = field(default_factory=dict)

    @property
    def provider_session(self) -> str | None:
        return self.learned[-1] if self.learned else None


async def salvage_spool(peer: Caller, record: Record, directory: Path) -> Salvaged:
    """Deliver what a dead supervisor left undelivered."""
    entries = pending(directory)
    salvaged = Salvaged()
    learned = salvaged.learned
    instance = str((record.active or {}).get("instance"))
    deliver = Deliverer(
        peer, record.provider, instance, on_identity=learned.append, directory=directory
    )
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
        salvaged.delivered += 1
    salvaged.facts = dict(deliver.facts)
    return salvaged


def kill_session_processes(active: Active) -> None:
    keys: tuple[Literal["pid", "agent_pid"], ...] = ("pid", "agent_pid")
    for key in keys:
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


async def interrupt_turns(
    peer: Caller, record: Record, reason: str, facts: dict[str, Facts] | None = None
) -> list[str]:
    """End the record's running turns ``interrupted``; those whose provider had finished (by the
    salvaged ``facts``) keep what it said. Returns the ids of the turns this ended."""
    ended: list[str] = []
    for turn, said in (facts or {}).items():
        if not finished(said):
            continue
        body = {"id": turn, "state": "interrupted", "result": interrupted_result(reason, said)}
        if (await peer.call("state", "state.turn.end", body))["ended"]:
            ended.append(turn)
    reply = await peer.call(
        "state", "state.turn.interrupt", {"record": record.id, "reason": reason}
    )
    return ended + list(reply["interrupted"])


def clear_facts(directory: Path) -> None:
    """The loss is settled: no turn of the dead supervisor needs its facts any more."""
    (directory / FACTS).unlink(missing_ok=True)


async def settle_orphans(
    peer: Caller,
    sessions_dir: Path,
    registered: set[str],
    locks: Mapping[str, asyncio.Lock],
    find: Callable[[str], Awaitable[Record]],
) -> list[str]:
    """Turns still running whose record is no longer active and whose supervisor is not
    registered (it died after its session was stopped, or left when fenced, with the turn's end
    still in its spool): the spool is delivered, then what still runs is ``interrupted``
    (reason ``orphaned``). Returns the ids of the turns this ended."""
    reply = await peer.call("state", "state.turn.orphans", {})
    ended: list[str] = []
    for record_id in sorted({str(turn["record"]) for turn in reply["turns"]}):
        if f"session/{record_id}" in registered or locks[record_id].locked():
            continue  # a supervisor may still be delivering its spool
        async with locks[record_id]:
            record = await find(record_id)
            if record.state in ACTIVE_STATES:
                continue
            directory = sessions_dir / record_id
            salvaged = await salvage_spool(peer, record, directory)
            interrupted = await interrupt_turns(peer, record, "orphaned", salvaged.facts)
            clear_facts(directory)
            log.warning(
                "turns-orphaned",
                record=record_id,
                delivered=salvaged.delivered,
                interrupted=interrupted,
            )
            ended += interrupted
    return ended
