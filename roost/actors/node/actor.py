"""The node actor (address ``node``): the façade clients talk to, and the node's orchestrator.

It resolves record references, applies the lifecycle rules of ``records``, forwards runtime
requests (prompt, input, keys, resize, screen) to the live session's supervisor with its session
address for fencing, and reconciles records with the supervisors that re-register after a restart.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import Any

import psutil
import structlog

from roost.actors.node import backup, checkup, forking, limits, scope, usage
from roost.actors.node import worktrees as wt
from roost.actors.node.control import TURN_TOPIC, Control
from roost.actors.node.inputs import Inputs
from roost.actors.node.reports import Reports
from roost.actors.node.restore import Restorer
from roost.actors.node.sessions import Sessions
from roost.actors.node.sweep import Sweep
from roost.actors.node.workspaces import unknown_cwd
from roost.actors.runtime.peer import Handler, Peer, Serving
from roost.actors.state import records as r
from roost.actors.state.records import Record
from roost.actors.supervisor.terminal import read_transcript
from roost.adapters.base import key_names
from roost.client.scoped import ScopedTokens
from roost.providers import names
from roost.suggest import close_matches, did_you_mean
from roost.wire import fields as f
from roost.wire import messages as msg
from roost.wire import protocol as p
from roost.wire.errors import RoostError

log = structlog.get_logger("roost.node")

QUIESCE_S = 2.0  # a stop waits at most this long for the inputs being accepted
REATTACH_WAIT_S = 6.0  # a supervisor re-registers within ~2 heartbeats of a node restart


def _known_provider(provider: str) -> None:
    """``unknown-provider``, naming the known ones (a provider the configuration file no longer
    defines is not one)."""
    known = names()
    if provider not in known:
        hint = did_you_mean(close_matches(provider, known))
        raise RoostError(
            "unknown-provider",
            f"no adapter for provider {provider!r}{'; ' + hint if hint else ''} "
            f"(known: {', '.join(sorted(known))})",
            {"provider": provider, "known": sorted(known)},
        )


class NodeActor:
    """Serves the client methods and the supervisors' reports."""

    def __init__(
        self,
        peer: Peer,
        sessions: Sessions,
        status: Callable[[], dict[str, Any]],
        shutdown: Callable[[], None],
        registered: Callable[[], Collection[str]],
        restorer: Restorer,
    ) -> None:
        self.peer, self.sessions, self.restorer = peer, sessions, restorer
        self._status, self._shutdown, self._registered = status, shutdown, registered
        self.started = time.time()
        self.sweep = Sweep(sessions, registered)
        peer.on_notify = self._on_notify
        self.inputs = Inputs(peer, sessions)
        follow = sessions.records.listener  # the sweep's (pidfds), then the inputs'

        def listener(record: Record) -> None:
            if follow is not None:
                follow(record)
            self.inputs.follow(record)

        sessions.records.listener = listener
        self.limits = limits.for_node(sessions, self.inputs, self.call_session)
        reports = Reports(sessions, self.limits.seen)
        self.control = control = Control(peer, sessions)
        self.providers = checkup.ProviderChecks(peer)
        # Every method the node serves, and only those (``p.served_by(p.NODE)``): the table of
        # methods in the protocol module says which are mutating and node-wide, not this map.
        handlers: dict[str, Serving] = {
            "node.status": self.status,
            "node.shutdown": self.shutdown,
            "node.doctor": checkup.handler(self.providers),
            "node.usage": usage.handler(peer),
            "node.backup": backup.handler(peer),
            "node.claim": control.node_claim,
            "node.release": control.node_release,
            "workspace.add": self.workspace_add,
            "workspace.list": self.workspace_list,
            "session.spawn": self.spawn,
            "session.list": self.list,
            "session.show": self.show,
            "session.prompt": self.forward,
            "session.input": self.forward,
            "session.key": self.forward,
            "session.resize": self.forward,
            "session.turn": self.forward,
            "session.rename": self.rename,
            "session.stop": self.stop,
            "session.resume": self.resume,
            "session.fork": self.fork,
            "session.forget": self.forget,
            "session.restore": restorer.handle,
            "session.transcript": self.transcript,
            "session.diff": self.diff,
            "session.turn.wait": control.turn_wait,
            "session.claim": control.claim,
            "session.release": control.release,
            "operation.lookup": control.lookup,
            "events.since": self.events_since,  # answers with the store's bytes
            "node.session.attach": self._report(self._attached(reports.on_attach), locked=False),
            "node.session.exited": self._report(reports.on_exited),
            "node.session.failed": self._report(reports.on_failed, locked=False),
            "node.session.classified": self._report(reports.on_classified),
            "node.session.identity": self._report(reports.on_identity),
            "node.session.resume": self._report(reports.on_resume),
            "node.session.usage": self._report(reports.on_usage, locked=False),
        }
        self.scope = scope.Scope(sessions, ScopedTokens(sessions.state_dir))
        peer.handlers.update(self.scope.guarded(control.guarded(handlers)))

    def _report(self, fn: Callable[[dict[str, Any]], Any], *, locked: bool = True) -> Handler:
        """A supervisor's report. attach/failed resolve a launch that holds the record's lock,
        so they must not wait for it; exited/classified are applied in order under it."""

        async def handler(h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
            if not h.sender.startswith("session/"):
                raise RoostError("forbidden", "only supervisors report on sessions")
            if not locked:
                result: dict[str, Any] = await fn(body)
                return result
            async with self.sessions.locks[str(body.get("record"))]:
                result = await fn(body)
                return result

        return handler

    def _attached(self, on_attach: Callable[[dict[str, Any]], Any]) -> Callable[..., Any]:
        """A supervisor (re)attaching: its input gate is shut until it opens it again."""

        async def attached(body: dict[str, Any]) -> Any:
            self.inputs.closed(str(body.get("record")))
            return await on_attach(body)

        return attached

    async def _on_notify(self, h: p.Header, body: dict[str, Any]) -> None:
        """The broker's ``peer.up`` of the state store: the records' copy follows it; a
        supervisor's input gate (``node.session.gate``)."""
        if "gate" in body:
            self.inputs.on_gate(h.sender, body)
            return
        if (
            h.sender == "broker"
            and body.get("event") == "peer.up"
            and body.get("address") == "state"
        ):
            self.sessions.records.store_up(str(body.get("incarnation")))

    # -- node ----------------------------------------------------------------------------------

    def turn_event(self, topic: str) -> None:
        """A ``session.turn`` event the state store published (``e/<record>/session.turn``, a
        turn's end): the record's waits look again, and its next turn may wait for the gate."""
        record_id = topic[2 : -len(TURN_TOPIC)]
        self.control.turn_ended(record_id)
        self.inputs.turn_ended(record_id)

    async def status(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        opened = await self._opened()  # None while the state store restarts: status still answers
        counts = None if opened is None else await self._counts()
        status = self._status()
        if h.extra.get("r") == p.OBSERVER:  # a watcher learns no host paths nor process ids
            status = _without_host_facts(status)
        return {
            **status,
            "records": counts,
            "event_log": None
            if opened is None
            else {k: opened[k] for k in ("retain_events", "first_seq", "last_seq")},
            "storage": None if opened is None else opened.get("storage"),
            "uptime_s": time.time() - self.started,
            "busy": self.control.busy,
            "accepting": self.control.accepting,
            "cleaning": self.sessions.cleaning,
            "inputs": self.inputs.status(),
            "host": host_load(),
            **(
                {"providers": await self.providers.latest()}
                if f.opt_bool(body, "providers")
                else {}
            ),
        }

    async def _counts(self) -> dict[str, int] | None:
        """Records by state: from the node's copy once it holds them (a node of 10k records
        answers without listing them), else from the store."""
        records = self.sessions.records
        if records.loaded:
            return records.counts()
        try:
            listing = await self.peer.call("state", "state.record.list", {}, timeout=2.0)
        except RoostError:
            return None
        counts: dict[str, int] = {}
        for rec in listing["records"]:
            counts[rec["state"]] = counts.get(rec["state"], 0) + 1
        return counts

    async def _opened(self) -> dict[str, Any] | None:
        """The state store's ``state.open``: the retention limit in force, the retained seq
        range, its storage health; None without an answer."""
        try:
            opened: dict[str, Any] = await self.peer.call("state", "state.open", {}, timeout=2.0)
        except RoostError:
            return None
        return opened

    async def shutdown(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        stop_sessions = f.opt_bool(body, "stop_sessions")  # a bad body is refused before busy
        await self._quiesce()
        try:
            return await self._shut_down(stop_sessions)
        except BaseException:
            self.inputs.refusing = False
            raise

    async def _quiesce(self) -> None:
        """Under steady traffic something is always being accepted: new input is refused
        (``unavailable``, which a client retries) while what is under way finishes, for at most
        ``QUIESCE_S``; ``busy`` if it has not by then (a commit waiting on a stalled state store,
        a loss being settled), and input is accepted again."""
        self.inputs.refusing = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + QUIESCE_S
        while self.control.busy and loop.time() < deadline:
            await asyncio.sleep(0.01)  # what is under way ends in a commit's time
        if self.control.busy:
            self.inputs.refusing = False
            raise RoostError("busy", "a turn is being accepted or cleaned up; nothing was stopped")

    async def _shut_down(self, stop_sessions: bool | None) -> dict[str, Any]:
        stopped = []
        if stop_sessions:
            listing = await self.peer.call("state", "state.record.list", {})
            for raw in listing["records"]:
                if raw["state"] in r.ACTIVE_STATES:
                    record = await self.sessions.find(raw["id"])
                    async with self.sessions.locks[record.id]:
                        await self.sessions.stop(record, 3000)
                    stopped.append(record.id)
        try:
            await self.peer.call(
                "state",
                "state.events.append",
                {"events": [{"kind": "node.stopping", "data": {"stopped": stopped}}]},
                timeout=3.0,
            )
        except RoostError as err:  # a failed state store must not keep the node from stopping
            log.warning("stop-not-logged", code=err.code)
        asyncio.get_running_loop().call_later(0.05, self._shutdown)
        return {"stopping": True, "stopped_sessions": stopped}

    # -- workspaces ----------------------------------------------------------------------------

    async def workspace_add(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        path = _existing_dir(f.req_str(body, "path", max_len=4096), "path")
        return await self.peer.call(
            "state",
            "state.workspace.add",
            {"path": path, "name": f.opt_str(body, "name", max_len=128)},
        )

    async def workspace_list(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        return await self.peer.call("state", "state.workspace.list", {})

    async def _resolve_cwd(
        self, ref: str, check: Callable[[str], Awaitable[object]] | None = None
    ) -> tuple[str, str]:
        """The directory ``ref`` names and its workspace: a registered one, or an existing
        directory registered now, once ``check`` (spawn --worktree: a repository) accepts it."""
        found = await self.peer.call("state", "state.workspace.find", {"ref": ref})
        if found.get("workspace"):
            ws = found["workspace"]
            return _existing_dir(ws["path"]), ws["id"]
        try:
            path = _existing_dir(ref)
        except RoostError as err:  # say what was asked for, and what could have been meant
            listing = await self.peer.call("state", "state.workspace.list", {})
            raise unknown_cwd(ref, listing["workspaces"]) from err
        if check is not None:
            await check(path)
        added = await self.peer.call("state", "state.workspace.add", {"path": path})
        return added["workspace"]["path"], added["workspace"]["id"]

    # -- records -------------------------------------------------------------------------------

    async def spawn(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        provider = f.req_str(body, "provider", max_len=64)
        mode = f.opt_str(body, "mode", max_len=16) or "pty"
        if mode not in r.MODES:
            must = " or ".join(r.MODES)
            raise RoostError("bad-request", f"field 'mode' must be {must}", {"field": "mode"})
        name = f.opt_str(body, "name", max_len=128)
        restore = f.opt_str(body, "restore", max_len=16) or r.NEVER
        if restore not in r.RESTORE_POLICIES:
            must = " or ".join(r.RESTORE_POLICIES)
            raise RoostError("bad-request", f"field 'restore' must be {must}", {"field": "restore"})
        on_limit = f.opt_str(body, "on_limit", max_len=16) or limits.WAIT
        if on_limit not in limits.ON_LIMIT:
            must = " or ".join(limits.ON_LIMIT)
            raise RoostError(
                "bad-request", f"field 'on_limit' must be {must}", {"field": "on_limit"}
            )
        env = f.str_map(body, "env")
        rows = f.opt_int(body, "rows", lo=2, hi=1000) or 40
        cols = f.opt_int(body, "cols", lo=2, hi=1000) or 120
        _known_provider(provider)
        if f"adapter/{provider}" not in self._registered():  # known, but its host is restarting
            raise RoostError(
                "unavailable", f"the {provider} adapter is restarting", {"provider": provider}
            )
        name = r.validate_name(name) if name else None
        branch = wt.requested(body)
        cwd, workspace = await self._resolve_cwd(
            f.req_str(body, "cwd", max_len=4096), wt.toplevel if branch is not None else None
        )
        record_id = r.new_record_id()
        worktree = None
        if branch is not None:  # the session runs in a new worktree of cwd's repository
            worktree, cwd = await wt.create(cwd, branch or wt.default_branch(name, record_id))
        record = Record(
            id=record_id,
            name=name,
            provider=provider,
            mode=mode,
            cwd=cwd,
            workspace_id=workspace,
            env=env,
            rows=rows,
            cols=cols,
            worktree=worktree,
            restore_policy=restore,
            on_limit=on_limit,
            owner=scope.of(h),
        )
        created = msg.event(
            "record.created",
            record.id,
            0,
            {"name": record.name, "provider": provider, "mode": mode},
        )
        row = record.to_wire()
        row["env"] = env
        row.pop("size")
        try:
            plan = await self.sessions.plan(record, env, resume=None)  # before the record exists
            await self.sessions.create(row, [created])
            async with self.sessions.locks[record.id]:
                live = await self.sessions.launch(record, env, resume=None, plan=plan)
        except RoostError:
            if record.worktree is not None:
                await wt.discard_unless_kept(record.worktree, self.sessions.find(record.id))
            raise
        return {"record": live.to_wire()}

    async def list(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        return await self.peer.call("state", "state.record.list", {})

    async def show(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        record = await self.sessions.find(f.req_str(body, "id"))
        reply: dict[str, Any] = {"record": record.to_wire()}
        used = await self.peer.call("state", "state.usage.totals", {"records": [record.id]})
        reply["usage"] = used["totals"].get(record.id)
        if record.state in (r.LIVE, r.ATTENTION) and record.mode == "pty":
            generation, verdict = self.sessions.classified.get(record.id, (None, None))
            reply["classification"] = verdict if generation == record.generation else None
        if f.opt_bool(body, "screen"):
            reply["screen"] = None
            if record.state in (r.LIVE, r.ATTENTION):
                reply.update(await self.call_session(record, "session.screen", {}))
            else:
                reply["last_screen"] = self._last_screen(record)
        return reply

    def _last_screen(self, record: Record) -> str | None:
        path = self.sessions.state_dir / "sessions" / record.id / "screen.txt"
        try:
            return path.read_text()
        except OSError:
            return None

    async def rename(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        name = r.validate_name(f.req_str(body, "name", max_len=128))
        async with self._locked(f.req_str(body, "id")) as record:
            event = msg.event(
                "record.renamed", record.id, record.generation, {"from": record.name, "to": name}
            )
            renamed = await self.sessions.update(record, {"name": name}, events=[event])
        return {"record": renamed.to_wire()}

    async def stop(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        grace = f.opt_int(body, "grace_ms", lo=0, hi=60_000)
        grace = 3000 if grace is None else grace
        async with self._locked(f.req_str(body, "id")) as record:
            r.check_generation(record, h.session)
            stopped = await self.sessions.stop(record, grace)
        return {"record": stopped.to_wire()}

    async def resume(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        async with self._locked(f.req_str(body, "id")) as record:
            r.check_resume(record)
            _known_provider(record.provider)  # a provider the config file no longer defines
            _existing_dir(record.cwd)  # resumed in its original cwd, or not at all
            env = await self.sessions.env(record.id)
            live = await self.sessions.launch(record, env, resume=record.provider_session)
        return {"record": live.to_wire()}

    async def fork(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        name = f.opt_str(body, "name", max_len=128)
        name = r.validate_name(name) if name else None
        async with self._locked(f.req_str(body, "id")) as source:
            _known_provider(source.provider)  # a provider the config file no longer defines
            if f"adapter/{source.provider}" not in self._registered():
                raise RoostError(
                    "unavailable",
                    f"the {source.provider} adapter is restarting",
                    {"provider": source.provider},
                )
            fork = await forking.prepare(self.sessions, source, name, _existing_dir)
        return await forking.launch(self.sessions, fork)  # the source's lock is not held

    async def forget(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        remove = f.opt_bool(body, "remove_worktree")
        async with self._locked(f.req_str(body, "id")) as record:
            removed = None
            if remove:  # only a clean worktree, and only of a record that may be forgotten
                r.check_forget(record)
                removed = await wt.remove(wt.of(record))
            gone = await self.sessions.forget(record)
            self.control.claims.forget(record.id)
        return {"record": gone.to_wire(), "forgotten": True, "worktree": removed}

    async def diff(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        record = await self.sessions.find(f.req_str(body, "id"))
        return {"record": record.id, **await wt.diff(wt.of(record))}

    async def forward(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        record = await self.sessions.find(f.req_str(body, "id"))
        if h.method == "session.key":  # checked here too: a bad request whatever the state
            key_names(body)
        r.check_generation(record, h.session)
        active = r.check_live(record)

        def forward() -> Awaitable[dict[str, Any]]:
            return self.call_session(
                record, h.method, body, generation=active["generation"], op=h.op
            )

        if h.method in p.COMMITTED_HERE:  # checked and committed here, executed by the supervisor
            reply = await self.inputs.accept(record, active, h, body, forward)
        else:
            reply = await forward()
        if h.method == "session.resize":  # the next launch (resume) uses the size last asked for
            await self.sessions.update(record, {"rows": reply["rows"], "cols": reply["cols"]})
        if reply.get("duplicate"):  # the first operation's outcome, its record named by Control
            return reply
        return {**reply, "record": record.id, "generation": record.generation}

    async def call_session(
        self,
        record: Record,
        method: str,
        body: dict[str, Any],
        *,
        generation: int | None = None,
        op: str = "",
    ) -> dict[str, Any]:
        """Call a live record's supervisor; after a node restart, wait for it to re-register."""
        address = f"session/{record.id}"
        deadline = asyncio.get_running_loop().time() + REATTACH_WAIT_S
        while address not in self._registered():
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
        return await self.peer.call(
            address,
            method,
            body,
            session={"generation": record.generation if generation is None else generation},
            op=op,
        )

    async def transcript(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        record = await self.sessions.find(f.req_str(body, "id"))
        offset = f.opt_int(body, "offset") or 0
        limit = f.opt_int(body, "limit", lo=1, hi=p.MAX_BIN // 2) or 65536
        directory = self.sessions.state_dir / "sessions" / record.id
        return {"record": record.id, **read_transcript(directory, offset, limit)}

    async def events_since(self, h: p.Header, body: dict[str, Any]) -> p.Packed:
        query: dict[str, Any] = {
            "after": f.opt_int(body, "after") or 0,
            "limit": f.opt_int(body, "limit", lo=1, hi=5000) or 1000,
        }
        ref = f.opt_str(body, "id")
        if ref:
            query["record"] = (await self.sessions.find(ref)).id
        # The state store's reply is relayed as it is: its events are stored bytes.
        return await self.peer.call_packed("state", "state.events.since", query)

    def _locked(self, ref: str) -> _RecordLock:
        return _RecordLock(self.sessions, ref)


class _RecordLock:
    """``async with``: resolve a reference, take the record's lock, re-read it under the lock."""

    def __init__(self, sessions: Sessions, ref: str) -> None:
        self.sessions, self.ref = sessions, ref
        self._lock: asyncio.Lock | None = None

    async def __aenter__(self) -> Record:
        record = await self.sessions.find(self.ref)
        self._lock = self.sessions.locks[record.id]
        await self._lock.acquire()
        try:
            return await self.sessions.find(record.id)
        except BaseException:
            self._lock.release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        assert self._lock is not None
        self._lock.release()


def host_load() -> dict[str, Any]:
    """``node.status``'s ``host``: what a hub weighs to place a session here."""
    memory = psutil.virtual_memory()
    return {
        "load": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "cpus": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "memory_mb": {"total": memory.total >> 20, "available": memory.available >> 20},
    }


def _without_host_facts(status: dict[str, Any]) -> dict[str, Any]:
    """``node.status`` for an observer: no state directory, no process ids."""
    actors = {
        name: {k: v for k, v in info.items() if k not in ("pid", "path")}
        for name, info in (status.get("actors") or {}).items()
    }
    hidden = ("state_dir", "pid")
    return {**{k: v for k, v in status.items() if k not in hidden}, "actors": actors}


def _existing_dir(path: str, field: str = "cwd") -> str:
    resolved = Path(path).expanduser()
    if not resolved.is_absolute() or not resolved.is_dir():
        raise RoostError(
            "bad-cwd",
            f"{path[:256]!r} is not an existing absolute directory",
            {"field": field, "value": path[:4096]},
        )
    return str(resolved.resolve())
