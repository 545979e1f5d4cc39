"""Notifications from the node: commands (and a desktop notification) when a session needs a
human, ends a turn, or exits. They fire with no client connected.

The notifier subscribes to the node's own event socket, like any client, and reads the events the
state store publishes once they are committed: a record entering ``attention`` (``record.state``),
a turn's end (``session.turn`` of a stream turn; for a pty session, a ``session.classified`` whose
``turn_end`` is true: its supervisor reports one for each turn, whether its end was seen on the
screen or told by a signal, and however short the turn; from a supervisor that does not say
``turn_end``, a screen going from ``busy`` to ``ready``, or ``ready`` after a ``session.input``
prompt) and an exit
(``session.exited``, ``session.lost``). What to run is the configuration file's
``[[notify.command]]`` list; each gets the event as one JSON line on stdin, runs without a shell
unless the entry says ``shell``, in its own process group, and is killed at its timeout. A
command that fails or hangs is logged (``notify-failed``, ``notify-timeout``) and changes nothing
else: the node never waits for one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog
import zmq
import zmq.asyncio

from roost.actors.runtime.process import logged_crash
from roost.config import Config
from roost.wire import protocol as p
from roost.wire.errors import RoostError

log = structlog.get_logger("roost.notify")

Lookup = Callable[[str], Awaitable[dict[str, Any] | None]]
MAX_RUNNING = 16  # commands running at once; past it an event's commands are dropped (logged)
SECRETS = ("ROOST_TOKEN", "ROOST_ACTOR_TOKEN")
RECORD_FIELDS = ("id", "name", "provider", "mode", "state", "attention", "cwd", "generation")


@dataclass
class Watch:
    """What the decision needs to remember: each record's latest screen activity, and the
    records a prompt was typed into since their last turn's end."""

    activity: dict[str, str] = field(default_factory=dict)
    prompted: set[str] = field(default_factory=set)


def notice(event: dict[str, Any], watch: Watch) -> str | None:
    """The notification ``event`` calls for (``attention``, ``turn-end``, ``exit``) or None."""
    kind, data, rid = event.get("kind"), event.get("data") or {}, str(event.get("record") or "")
    if kind == "record.state":
        entered = data.get("to") == "attention" and data.get("from") != "attention"
        return "attention" if entered else None
    if kind == "session.turn":
        return "turn-end"
    if kind == "session.input":
        if data.get("input") == "prompt":  # a turn begins, however short
            watch.prompted.add(rid)
        return None
    if kind == "session.classified":
        before, now = watch.activity.get(rid), data.get("state")
        watch.activity[rid] = str(now)
        if "turn_end" in data:  # the supervisor keeps the turns: each end is told once
            watch.prompted.discard(rid)
            return "turn-end" if data["turn_end"] else None
        if now != "ready" or (before != "busy" and rid not in watch.prompted):
            return None
        watch.prompted.discard(rid)
        return "turn-end"
    if kind in ("session.exited", "session.lost"):
        watch.activity.pop(rid, None)
        watch.prompted.discard(rid)
        return "exit"
    return None


def payload(what: str, event: dict[str, Any], record: dict[str, Any] | None, node: str) -> str:
    """The JSON line a command reads on stdin."""
    rec = {k: (record or {}).get(k) for k in RECORD_FIELDS}
    rec["id"] = rec["id"] or event.get("record")
    doc = {
        "event": what,
        "node": node,
        "record": rec,
        "seq": event.get("seq"),
        "ts": event.get("ts"),
        "kind": event.get("kind"),
        "data": event.get("data") or {},
    }
    return json.dumps(doc, sort_keys=True, default=str) + "\n"


def desktop_text(what: str, record: dict[str, Any] | None, event: dict[str, Any]) -> list[str]:
    """Title and body of the ``notify-send`` notification."""
    rec = record or {}
    name = rec.get("name") or rec.get("id") or event.get("record")
    data = event.get("data") or {}
    if what == "attention":
        body = f"needs you: {rec.get('attention') or 'attention'}"
    elif what == "turn-end":
        body = f"turn {data['status']}" if data.get("status") else "is ready"
    else:
        body = "exited" if event.get("kind") == "session.exited" else "was lost"
    return [f"roost: {name}", f"{name} ({rec.get('provider') or '?'}) {body}"]


class Notifier:
    """Subscribes to ``events_ep`` and runs what ``cfg`` asks for each notification."""

    def __init__(
        self,
        ctx: zmq.asyncio.Context,
        events_ep: str,
        cfg: Config,
        node_id: str,
        lookup: Lookup,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._ctx, self._events_ep, self.node_id, self._lookup = ctx, events_ep, node_id, lookup
        self.commands = cfg.notify_commands()
        desktop, self.desktop_on = cfg.desktop()
        self.timeout_s = cfg.notify_timeout()
        env = dict(os.environ if environ is None else environ)
        self.env = {k: v for k, v in env.items() if k not in SECRETS}
        sender = shutil.which("notify-send", path=self.env.get("PATH")) if desktop else None
        self.desktop = sender
        self.watch = Watch()
        self._running: set[asyncio.Task[None]] = set()

    @property
    def wanted(self) -> bool:
        return bool(self.commands or self.desktop)

    async def run(self) -> None:
        if not self.wanted:
            return
        sub = self._ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.SUBSCRIBE, b"e/")
        sub.connect(self._events_ep)
        try:
            while True:
                frames = await sub.recv_multipart()
                try:
                    event = p.unpack(frames[-1], limit=p.HARD_FRAME_LIMIT)
                except RoostError:  # a frame we cannot read is no notification
                    continue
                await self.on_event(event)
        finally:
            for task in list(self._running):
                task.cancel()
            await asyncio.gather(*self._running, return_exceptions=True)
            sub.close()

    async def on_event(self, event: dict[str, Any]) -> None:
        what = notice(event, self.watch)
        if what is None:
            return
        todo = [c for c in self.commands if what in c.on]
        desktop = self.desktop is not None and what in self.desktop_on
        if not todo and not desktop:
            return
        record = await self._record(str(event.get("record") or ""))
        line = payload(what, event, record, self.node_id)
        if desktop and self.desktop:
            argv = [self.desktop, "--app-name=roost", *desktop_text(what, record, event)]
            self._start("desktop", argv, "", self.timeout_s)
        for command in todo:
            self._start(command.name, command.command(), line, command.timeout_s)

    async def _record(self, rid: str) -> dict[str, Any] | None:
        if not rid:
            return None
        with contextlib.suppress(RoostError):  # the event is told even without the record
            return await self._lookup(rid)
        return None

    def _start(self, name: str, argv: list[str], stdin: str, timeout: float) -> None:
        if len(self._running) >= MAX_RUNNING:
            log.warning("notify-dropped", command=name, running=len(self._running))
            return
        task = asyncio.create_task(self._run(name, argv, stdin, timeout))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        task.add_done_callback(logged_crash)

    async def _run(self, name: str, argv: list[str], stdin: str, timeout: float) -> None:
        """One command to its end or its timeout; whatever happens is logged, never raised."""
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                start_new_session=True,
            )
        except OSError as exc:
            log.warning("notify-failed", command=name, error=exc.strerror or str(exc))
            return
        try:
            _, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            log.warning("notify-timeout", command=name, timeout_s=timeout)
            return
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise
        if proc.returncode != 0:
            tail = err.decode("utf-8", "replace").strip()[-300:]
            log.warning("notify-failed", command=name, exit=proc.returncode, stderr=tail)
        else:
            log.info("notified", command=name)
