"""Session lifecycle on the node: spawn, resume, stop, loss, forget (``reports`` has what
supervisors report, ``sweep`` finds the supervisors that died).

The node is the only actor that changes a record's lifecycle state. Every change goes through the
state store as a compare-and-set (expected states, expected generation) together with its event,
so a record and the log never disagree; the record as committed is kept in memory (``known``),
where every read of the node finds it. A per-record lock serialises lifecycle requests.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, cast

import structlog

from roost.actors.node.known import KnownRecords, record_of
from roost.actors.node.launcher import Launcher, agent_env, process_started
from roost.actors.node.loss import (
    clear_facts,
    interrupt_turns,
    kill_session_processes,
    salvage_spool,
)
from roost.actors.runtime.caller import Caller
from roost.actors.state import records as r
from roost.actors.state.records import Record
from roost.actors.supervisor.terminal import session_dir, write_private
from roost.wire import messages as msg
from roost.wire.errors import RoostError
from roost.wire.messages import Event, LaunchSpec, RecordState, TurnPlan

log = structlog.get_logger("roost.sessions")

ATTACH_TIMEOUT = 20.0


def state_event(record: Record, state: RecordState, **data: Any) -> Event:
    return msg.event(
        "record.state", record.id, record.generation, {"from": record.state, "to": state, **data}
    )


class Sessions:
    """Lifecycle operations; ``peer`` is the node actor's broker peer."""

    def __init__(
        self,
        peer: Caller,
        launcher: Launcher,
        state_dir: Path,
        endpoint: str,
        token: str,
        node_id: str = "",
    ) -> None:
        self.peer, self.launcher, self.node_id = peer, launcher, node_id
        self.state_dir, self.endpoint, self._token = state_dir, endpoint, token
        self.locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        # launches waiting for their supervisor to attach (or fail), by instance
        self.attaching: dict[str, asyncio.Future[dict[str, Any]]] = {}
        # restores waiting for a cold resume's verdict, by (record, generation)
        self.verdicts: dict[tuple[str, int], asyncio.Future[dict[str, Any]]] = {}
        # each live pty session's last classification as its supervisor reported it (with
        # ``via``) and its generation, by record: what ``session.show`` tells beside the record
        self.classified: dict[str, tuple[int, dict[str, Any]]] = {}
        self.cleaning = 0  # losses being settled: the node answers busy to a shutdown meanwhile
        self.records = KnownRecords(self._state)

    # -- state store helpers -------------------------------------------------------------------

    async def _state(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.peer.call("state", method, body)

    async def find(self, ref: str) -> Record:
        """The record an id or a unique name names (from memory once the node knows them)."""
        return await self.records.get(ref)

    async def env(self, record_id: str) -> dict[str, str]:
        """A record's env with its values (kept in the state store only)."""
        reply = await self.peer.call("state", "state.record.get", {"id": record_id})
        env: dict[str, str] = reply.get("env") or {}
        return env

    async def create(self, row: dict[str, Any], events: list[Event]) -> Record:
        async with self.records.writing(row["id"]):
            reply = await self.peer.call(
                "state", "state.record.create", {"record": row, "events": events}
            )
            return self.records.put(record_of(reply))

    async def update(
        self,
        record: Record,
        changes: dict[str, Any],
        *,
        expect: tuple[RecordState, ...] = (),
        events: list[Event] | None = None,
    ) -> Record:
        async with self.records.writing(record.id):
            reply = await self.peer.call(
                "state",
                "state.record.update",
                {
                    "id": record.id,
                    "set": changes,
                    "expect_states": list(expect),
                    "expect_generation": record.generation,
                    "events": events or [],
                },
            )
            return self.records.put(record_of(reply))

    async def set_state(
        self,
        record: Record,
        state: RecordState,
        *,
        expect: tuple[RecordState, ...] = (),
        extra: list[Event] | None = None,
        **changes: Any,
    ) -> Record:
        event = state_event(record, state)
        return await self.update(
            record, {"state": state, **changes}, expect=expect, events=[*(extra or []), event]
        )

    # -- launching -----------------------------------------------------------------------------

    async def plan(
        self, record: Record, env: dict[str, str], *, resume: str | None, fork: str | None = None
    ) -> TurnPlan:
        """The adapter's launch plan (argv, env, identity); it refuses ``provider-missing`` when
        the CLI's program is not there (``provider-cannot-fork`` for a fork the CLI has not). A
        spawn or fork asks before its record exists, so a refusal leaves nothing behind (no
        record to hold the name)."""
        plan = await self.peer.call(
            f"adapter/{record.provider}",
            "adapter.launch",
            {
                "mode": record.mode,
                "cwd": record.cwd,
                "env": env,
                "resume": resume,
                **({"fork": fork} if fork else {}),
                "data_dir": str(self.state_dir / "providers" / record.provider),
                "session_dir": str(self.state_dir / "sessions" / record.id),
            },
        )
        return cast(TurnPlan, plan)

    async def launch(
        self,
        record: Record,
        env: dict[str, str],
        *,
        resume: str | None,
        plan: TurnPlan | None = None,
        fork: str | None = None,
    ) -> Record:
        """Start a new generation of ``record`` and wait until its supervisor attaches;
        ``fork``: its first launch copies that provider session's conversation."""
        if resume and fork is None:  # a fork's record: its CLI may need the source again
            fork = await self.fork_origin(record)
        if plan is None:
            plan = await self.plan(record, env, resume=resume, fork=fork)
        instance = uuid.uuid4().hex[:12]
        generation = record.generation + 1
        started = bool(resume)
        if resume and record.mode == "stream":  # a stream conversation exists once a turn ran
            latest = await self.peer.call("state", "state.turn.latest", {"record": record.id})
            started = latest["turn"] is not None  # a fork's first turn forks, even resumed
        identity = plan.get("provider_session") or record.provider_session
        spec = self._spec(record, plan, env, instance, started, generation, identity)
        write_launch_files(session_dir(self.state_dir, record.id), plan.get("files") or {})
        if fork:
            spec["fork"] = fork
        path = self.launcher.prepare(spec)
        # the launch is durable before any supervisor can exist: a node that comes up after this
        # one died knows the instance, and adopts its supervisor or withdraws its spec file
        pending = {"record": record.id, "generation": generation, "instance": instance}
        try:
            starting = await self.update(
                record,
                {
                    "state": r.STARTING,
                    "generation": generation,
                    "active": pending,
                    "provider_session": identity,
                    "activity": None,
                    "attention": None,
                },
                expect=(r.STARTING, r.DORMANT, r.FAILED),
                events=[
                    {
                        **state_event(record, r.STARTING, resume=bool(resume)),
                        "generation": generation,
                    }
                ],
            )
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        if identity and identity != record.provider_session:
            await self.peer.call(
                "state",
                "state.events.append",
                {
                    "events": [
                        msg.event(
                            "session.identity",
                            record.id,
                            generation,
                            {"provider_session": identity},
                        )
                    ]
                },
            )
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.attaching[instance] = future
        try:
            pid = await self.launcher.start(path)
            attached = await asyncio.wait_for(future, ATTACH_TIMEOUT)
        except (TimeoutError, OSError):
            attached = {
                "error": RoostError(
                    "launch-failed", "the supervisor did not start in time"
                ).to_body()
            }
            pid = None
        finally:
            self.attaching.pop(instance, None)
        if "error" in attached:
            self.launcher.withdraw(instance)  # a zygote that forks it late starts nothing
            await self._failed(starting, attached["error"], fresh=not resume)
            raise RoostError.from_body(attached["error"])
        active = {
            "record": record.id,
            "generation": generation,
            "instance": instance,
            "pid": attached.get("pid", pid),
            "agent_pid": attached.get("agent_pid"),
            "started": process_started(attached.get("pid") or 0),
            "supervisor": attached.get("supervisor"),
        }
        # a screen classified while starting (a trust dialog, a login) decides where it lands;
        # so does a supervisor of a wire this node does not serve (reports.supervisor_version)
        current = await self.find(record.id)
        unserved = attached.get("unserved")
        landing = r.ATTENTION if unserved or current.activity == "attention" else r.LIVE
        # what is known now: the agent runs, its screen not read yet (a pty's activity says so)
        seen = current.activity or ("starting" if record.mode == "pty" else None)
        return await self.set_state(
            current,
            landing,
            expect=(r.STARTING,),
            active=active,
            activity=seen,
            attention=unserved or current.attention,
        )

    async def fork_origin(self, record: Record) -> str | None:
        """The provider session a record was forked from (its ``record.created`` event says),
        or None. A fork resumed before its first turn still makes its copy: in stream mode at
        that turn, in pty mode as the adapter's ``resume_fork`` says."""
        page = await self.peer.call(
            "state", "state.events.since", {"after": 0, "limit": 1, "record": record.id}
        )
        for event in page.get("events") or ():
            if event.get("kind") == "record.created":
                origin = (event.get("data") or {}).get("fork") or {}
                found = origin.get("provider_session")
                return found if isinstance(found, str) else None
        return None

    async def _failed(self, record: Record, error: dict[str, Any], *, fresh: bool) -> None:
        """A launch that failed: the record is ``failed`` with the error. A fresh spawn's record
        gives its name up (kept in ``last_exit.name``), so the spawn can simply be retried."""
        last_exit: dict[str, Any] = {"error": error}
        changes: dict[str, Any] = {}
        if fresh and record.name:
            last_exit["name"], changes["name"] = record.name, None
        await self.set_state(record, r.FAILED, active=None, last_exit=last_exit, **changes)

    def _spec(
        self,
        record: Record,
        plan: TurnPlan,
        env: dict[str, str],
        instance: str,
        resume: bool,
        generation: int,
        identity: str | None,
    ) -> LaunchSpec:
        return {
            "record_id": record.id,
            "name": record.name,  # with the node id, what ps shows of the supervisor
            "node_id": self.node_id,
            "generation": generation,
            "instance_id": instance,
            "provider": record.provider,
            "mode": record.mode,
            "argv": plan["argv"],
            "cwd": record.cwd,
            "env": agent_env(dict(os.environ), env, plan.get("env") or {}),
            "rows": record.rows,
            "cols": record.cols,
            "submit": plan.get("submit", b"\r"),
            "submit_delay_s": plan.get("submit_delay_s", 0.0),
            "endpoint": self.endpoint,
            "token": self._token,
            "session_dir": str(session_dir(self.state_dir, record.id)),
            "provider_session": identity,
            "data_dir": str(self.state_dir / "providers" / record.provider),
            "resume": resume,
            "turn_silence_s": plan.get("turn_silence_s"),
            "turn_deadline_s": plan.get("turn_deadline_s"),
            "osc9": plan.get("osc9"),
        }

    # -- stop, lost, forget --------------------------------------------------------------------

    async def stop(self, record: Record, grace_ms: int) -> Record:
        if record.state not in r.ACTIVE_STATES:
            return record
        stopping = await self.set_state(record, r.STOPPING)
        try:
            reply = await self.peer.call(
                f"session/{record.id}",
                "session.stop",
                {"grace_ms": grace_ms},
                timeout=grace_ms / 1000 + 10,
                session={"generation": record.generation},
            )
        except RoostError as err:
            if err.code not in ("unreachable", "timeout", "session-not-live"):
                await self.set_state(stopping, record.state)  # still running: say so
                raise
            return await self.lost(stopping, reason=err.code)
        exited = msg.event(
            "session.exited", record.id, record.generation, {"exit": reply.get("exit")}
        )
        return await self.set_state(
            stopping,
            r.DORMANT,
            extra=[exited],
            active=None,
            last_exit=reply.get("exit"),
            activity=None,
            attention=None,
        )

    async def lost(self, record: Record, *, reason: str) -> Record:
        """The supervisor is gone: make the record dormant (resumable by id) and say so."""
        self.cleaning += 1
        try:
            return await self._lost(record, reason)
        finally:
            self.cleaning -= 1

    async def _lost(self, record: Record, reason: str) -> Record:
        active = record.active or {}
        kill_session_processes(active)
        directory = self.state_dir / "sessions" / record.id
        salvaged = await salvage_spool(self.peer, record, directory)
        learned = salvaged.provider_session
        identity: dict[str, Any] = {}
        if learned and record.provider_session is None:  # keep what makes it resumable by id
            identity = {"provider_session": learned}
        interrupted = await interrupt_turns(self.peer, record, reason, salvaged.facts)
        clear_facts(directory)
        lost = msg.event(
            "session.lost",
            record.id,
            record.generation,
            {"reason": reason, "interrupted_turns": interrupted},
        )
        log.warning("session-lost", record=record.id, reason=reason)
        extra = [lost]
        if identity:
            extra.insert(
                0,
                msg.event("session.identity", record.id, record.generation, identity),
            )
        return await self.set_state(
            record,
            r.DORMANT,
            extra=extra,
            active=None,
            activity=None,
            attention=None,
            last_exit={"lost": reason},
            **identity,
        )

    async def forget(self, record: Record) -> Record:
        r.check_forget(record)
        event: Event = {
            "kind": "record.forgotten",
            "record": record.id,
            "data": {"name": record.name},
        }
        async with self.records.writing(record.id):
            reply = await self.peer.call(
                "state",
                "state.record.delete",
                {"id": record.id, "expect_states": [r.DORMANT, r.FAILED], "events": [event]},
            )
            self.records.drop(record.id)
        shutil.rmtree(self.state_dir / "sessions" / record.id, ignore_errors=True)
        return record_of(reply)


MAX_LAUNCH_FILES = 8


def write_launch_files(directory: Path, files: dict[str, str]) -> None:
    """Write a launch plan's ``files`` (name -> text) into the record's session directory, each
    mode 0600, before the agent that reads them starts (claude's per-record settings file). A
    name is a plain file name: anything else is the adapter's fault, ``launch-failed``."""
    if len(files) > MAX_LAUNCH_FILES:
        raise RoostError("launch-failed", f"the launch plan names {len(files)} files")
    for name, text in files.items():
        if not name or "/" in name or name.startswith(".") or "\0" in name:
            raise RoostError("launch-failed", f"the launch plan names a file {name[:64]!r}")
        try:
            write_private(directory / name, text.encode())
        except OSError as err:
            raise RoostError("launch-failed", f"writing {name}: {err.strerror}") from None
