"""``session.fork``: a new record whose conversation begins as a copy of another's.

The copy is the provider CLI's own fork (the adapter's ``fork`` launch, or in stream mode its
``fork_turn`` as the first turn), started from the source record's provider session id. The new
record keeps the source's provider, mode, cwd, environment, size and policies, gets a name of
its own and, once known, a provider session id of its own; the source record is only read. Its
supervisor verifies the fork as it verifies a resume (``checks``): the copy reached, and never
the source's own id taken.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from roost.actors.node.sessions import Sessions
from roost.actors.state import records as r
from roost.actors.state.records import Record
from roost.wire import messages as msg
from roost.wire.errors import RoostError

NAME_TRIES = 100  # a derived name: NAME-fork, NAME-fork-2, ... up to this many


async def source_session(sessions: Sessions, source: Record) -> str:
    """The provider session id a fork of ``source`` starts from: ``no-provider-session`` when
    there is none (a CLI that names it only after its first message, or a stream record no turn
    ran in yet: there is no conversation to copy)."""
    started = source.provider_session is not None
    if started and source.mode == "stream":
        latest = await sessions.peer.call("state", "state.turn.latest", {"record": source.id})
        started = latest["turn"] is not None
    if not started or source.provider_session is None:
        raise RoostError(
            "no-provider-session",
            f"record {source.id} has no provider session id yet (no conversation to copy); "
            "fork it after its first turn",
            {"record": source.id},
        )
    return source.provider_session


async def derived_name(sessions: Sessions, source: Record) -> str | None:
    """``<source name>-fork`` (then ``-fork-2``, ...), the first no record has; None for a source
    without a name."""
    if not source.name:
        return None
    for n in range(1, NAME_TRIES + 1):
        name = f"{source.name}-fork" + (f"-{n}" if n > 1 else "")
        try:
            await sessions.find(name)
        except RoostError as err:
            if err.code == "not-found":
                return r.validate_name(name)
            raise
    raise RoostError("name-taken", f"{source.name}-fork and its next names are taken")


@dataclasses.dataclass(frozen=True)
class Fork:
    """A fork read from its source: the new record (not created yet), its env and its origin."""

    record: Record
    env: dict[str, str]
    origin: dict[str, str]  # {record, provider_session}: the source and the id copied


async def prepare(
    sessions: Sessions,
    source: Record,
    name: str | None,
    check_cwd: Callable[[str], object],
) -> Fork:
    """The fork of ``source`` as its record stands (the caller holds its lock only for this)."""
    from_session = await source_session(sessions, source)
    check_cwd(source.cwd)  # the fork runs where the source ran, or not at all
    env = await sessions.env(source.id)
    record = dataclasses.replace(
        source,
        id=r.new_record_id(),
        name=name or await derived_name(sessions, source),
        state=r.STARTING,
        generation=0,
        provider_session=None,
        active=None,
        activity=None,
        attention=None,
        last_exit=None,
        worktree=None,  # the source's worktree stays the source's: a forget never removes it
        env=env,
        created=0.0,
        updated=0.0,
    )
    return Fork(record, env, {"record": source.id, "provider_session": from_session})


async def launch(sessions: Sessions, fork: Fork) -> dict[str, Any]:
    """Create the fork's record and launch it. The adapter is asked first, so a refusal
    (``provider-cannot-fork``, ``provider-missing``) leaves no record behind."""
    record, env, origin = fork.record, fork.env, fork.origin
    created = msg.event(
        "record.created",
        record.id,
        0,
        {"name": record.name, "provider": record.provider, "mode": record.mode, "fork": origin},
    )
    row = record.to_wire()
    row["env"] = env
    row.pop("size")
    source = origin["provider_session"]
    plan = await sessions.plan(record, env, resume=None, fork=source)
    await sessions.create(row, [created])
    async with sessions.locks[record.id]:
        live = await sessions.launch(record, env, resume=None, fork=source, plan=plan)
    return {"record": live.to_wire(), "source": origin}
