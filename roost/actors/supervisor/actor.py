"""The session supervisor (address ``session/<record_id>``): one detached process per live session.

In ``pty`` mode it owns the agent's PTY (``pty_agent``), feeds a pyte screen, appends raw output to
the transcript and publishes it with byte offsets while anyone subscribes to it (the broker says
so; unwatched, it reads its terminal at a slower pace), and types input only after its event is
committed. Its signal channel (``signals``), bound before the agent starts, takes the exact
signals of the CLI's hooks and of OSC 9 notifications in its output (``osc9``), as evidence the
screen's verdicts are weighed against (``verdicts``). In ``stream`` mode it runs one headless
provider process per turn (``turns``). Either
way, what must not be lost goes through the on-disk outbox, so a node that is away for a while
finds it all, in order, when it returns. It runs in its own session and process group, outlives
the node daemon and re-registers when the broker is back.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import msgpack
import structlog
import zmq.asyncio

from roost import __version__
from roost.actors.runtime.peer import Peer
from roost.actors.runtime.process import (
    SUPERVISOR_LOG,
    Tasks,
    retitle,
    run_until_stopped,
    setup_logging,
)
from roost.actors.supervisor import probe
from roost.actors.supervisor.checks import IdentityAndResume
from roost.actors.supervisor.classifying import ScreenClassifier
from roost.actors.supervisor.delivery import Deliverer
from roost.actors.supervisor.fanout import Fanout
from roost.actors.supervisor.keyboard import Keyboard
from roost.actors.supervisor.osc9 import Osc9Scanner, meaning, rules
from roost.actors.supervisor.outbox import Outbox
from roost.actors.supervisor.pty_agent import READ_PACE_S, UNWATCHED_PACE_S, PtyAgent
from roost.actors.supervisor.pty_backend import ExitStatus
from roost.actors.supervisor.signals import SignalChannel, socket_path
from roost.actors.supervisor.terminal import Terminal, Transcript
from roost.actors.supervisor.turns import TurnRunner
from roost.actors.supervisor.usage import UsageWatch
from roost.adapters.limits import screen_digest
from roost.wire import fields as f
from roost.wire import protocol as p
from roost.wire import signals as ws
from roost.wire.errors import RoostError
from roost.wire.messages import LaunchSpec, OutboxEntry
from roost.wire.signals import Signal

log = structlog.get_logger("roost.supervisor")

RETRY_S = 0.5
# what this supervisor speaks (the hello's meta and node.session.attach carry it)
VERSION = {"roost": __version__, "wire": p.SUPERVISOR_WIRE}


class Supervisor:
    """The actor; ``spec`` is what the node wrote for this launch."""

    def __init__(self, spec: LaunchSpec, peer: Peer, stop: asyncio.Event) -> None:
        self.spec, self.peer, self._stop = spec, peer, stop
        self.tasks = Tasks(on_crash=lambda _: stop.set())  # its long-lived ones: see serve
        self.record_id: str = spec["record_id"]
        self.generation: int = spec["generation"]
        self.instance_id: str = spec["instance_id"]
        self.provider: str = spec["provider"]
        self.dir = Path(spec["session_dir"])
        self.term = Terminal(spec["rows"], spec["cols"])
        self.transcript = Transcript(self.dir)
        self.fanout = Fanout(self._publish)
        # whether a subscriber takes this session's output: until the broker says otherwise, yes
        # (a broker that does not say publishes to whoever is there, as before)
        self.watched = True
        peer.on_notify = self._on_notify
        self.deliver = Deliverer(
            peer, self.provider, self.instance_id, self._render, self.learn, directory=self.dir
        )
        self.outbox = Outbox(self.dir, self.deliver, instance=self.instance_id)
        self.agent: PtyAgent | None = None
        self.turns: TurnRunner | None = None
        self.exit: ExitStatus | None = None
        self.classification: dict[str, Any] = {}
        self.classified_screen: str | None = None  # the digest of the screen it was read from
        self.identity: str | None = spec.get("provider_session")
        self.launched_at = time.time()
        self.checks = IdentityAndResume(self)
        self.classifier = ScreenClassifier(self)
        self.keyboard = Keyboard(self)
        self.usage = UsageWatch(self)
        self.channel = SignalChannel(self.record_id, self.generation, socket_path(spec))
        for kind in ("session", "turn-start", "turn-end", "attention", "session-end"):
            self.channel.handlers[kind] = self.classifier.signal
        self.channel.handlers["usage"] = self.on_usage
        self.channel.identity = lambda: self.identity
        self._osc9_rules = rules(spec.get("osc9"))
        self._osc9 = Osc9Scanner()
        handlers = {
            **self.keyboard.handlers(),
            "session.resize": self.on_resize,
            "session.screen": self.on_screen,
            "session.stop": self.on_stop,
            "session.transcript": self.on_transcript,
            "session.run": self.on_run,
        }
        p.check_served(p.SUPERVISOR, handlers)  # the table of methods says what it serves
        peer.handlers.update(handlers)
        peer.on_registered.append(self.attach)

    @property
    def session_address(self) -> dict[str, Any]:
        return {
            "record": self.record_id,
            "generation": self.generation,
            "instance": self.instance_id,
        }

    @property
    def typing(self) -> bool:
        return self.keyboard.typing

    def _stamp(self, entry: OutboxEntry) -> OutboxEntry:
        return {**entry, "record": self.record_id, "generation": self.generation}

    # -- the agent -----------------------------------------------------------------------------

    def launch(self) -> None:
        if self.spec["mode"] == "stream":
            self.turns = TurnRunner(self.peer, self.outbox, self.spec, self.term, self.transcript)
            self.turns.on_idle = self.keyboard.update_gate
            self.turns.on_end = self.usage.soon
            self.turns.prefetch()
            return
        self.channel.open()  # before the agent: its hooks may signal as it starts
        env = {k: v for k, v in self.spec["env"].items() if k not in ws.ENV_NAMES}
        self.spec["env"] = {**env, **self.channel.env()}
        self.agent = PtyAgent(self.spec, self._on_output, self._on_exit)
        self.watch(self.watched)  # the pace the broker's word so far asks for
        self.term.before_read = self.agent.read_now
        self.agent.on_unpaced = self.classifier.unpaced
        self.agent.on_drained = self.keyboard.update_gate
        self.agent.launch()
        log.info("agent-started", record=self.record_id, pid=self.agent.pid)
        self.checks.start()

    def _on_output(self, data: bytes) -> None:
        """Each read: to the transcript at once (it keeps every byte the supervisor has read);
        the screen, the subscribers and the classifier take it in batches (``terminal``,
        ``fanout``, ``classifying``)."""
        offset = self.transcript.append(data)
        self.term.feed(data)
        if self.watched:
            self.fanout.push(offset, data)
        self.classifier.changed()
        if self._osc9_rules:
            for text, end in self._osc9.feed(data):
                self._notified(text, offset + len(data) - (self._osc9.fed - end))
        self.keyboard.update_gate()  # the terminal's mode may have changed with it (line_max)

    def _notified(self, text: str, at: int) -> None:
        """An OSC 9 notification ending at transcript offset ``at``: a signal, when the
        provider's rules give it a meaning (the offset is its ``seq``)."""
        found = meaning(text, self._osc9_rules)
        if found is None:
            return
        kind, data = found
        sig: ws.Signal = {
            "v": ws.VERSION,
            "record": self.record_id,
            "generation": self.generation,
            "seq": at,
            "source": "osc9",
            "kind": kind,
            "at": time.time(),
            "data": data,
            "event": text[:64],
        }
        self.channel.inject(sig)

    async def _on_notify(self, header: p.Header, body: dict[str, Any]) -> None:
        """The broker's word on whether anyone subscribes to this session's output."""
        if header.sender == "broker" and body.get("event") == "output.watched":
            self.watch(body.get("watched") is not False)

    def watch(self, watched: bool) -> None:
        """Publish the output and read the terminal at the attached pace while watched; else
        neither (the transcript and the screen take every byte either way: a subscriber that
        comes later reads what it missed from the transcript)."""
        if watched != self.watched:
            log.info("output-watched" if watched else "output-unwatched", record=self.record_id)
        self.watched = watched
        if self.agent is not None:
            self.agent.pace = READ_PACE_S if watched else UNWATCHED_PACE_S

    def _publish(self, offset: int, data: bytes) -> None:
        if self.peer.registered.is_set() and self.watched:
            self.peer.publish(
                f"o/{self.record_id}",
                {
                    "record": self.record_id,
                    "generation": self.generation,
                    "offset": offset,
                    "data": data,
                },
            )

    def _on_exit(self, status: ExitStatus) -> None:
        self.exit = status
        self.snapshot()
        self.checks.on_exit()
        self.keyboard.update_gate()
        self.tasks.start(self._report_exit(status), "finish")

    async def _report_exit(self, status: ExitStatus) -> None:
        """The exit, after a pending resume's verdict (a CLI that gave up the resume at once)."""
        await self.checks.settled()
        self.report("node.session.exited", {"exit": status.to_wire()})
        await self._finish()

    async def _finish(self) -> None:
        """Leave once the node has everything (however long it is away), the end of a turn
        whose command was still being asked included."""
        if self.turns is not None:
            await self.turns.settled()
        while not await self.outbox.drained(60.0):
            pass
        self._stop.set()

    def _render(self, events: list[dict[str, Any]]) -> None:
        if self.turns is not None:
            self.turns.render(events)

    def snapshot(self) -> None:
        """Keep the last screen beside the transcript, for ``show --screen`` of a dormant record."""
        with contextlib.suppress(OSError):
            tmp = self.dir / "screen.tmp"
            tmp.write_text(self.term.text())
            os.replace(tmp, self.dir / "screen.txt")

    # -- talking to the node -------------------------------------------------------------------

    async def attach(self) -> None:
        """After every (re)registration: tell the node who we are, then type what the node had
        committed and not handed over (a catch-up) before the gate opens; a fenced supervisor
        leaves."""
        self.keyboard.registration_lost()
        while True:
            try:
                reply = await self.peer.call(
                    "node",
                    "node.session.attach",
                    {
                        **self.session_address,
                        **VERSION,
                        "pid": os.getpid(),
                        "agent_pid": self.agent.pid if self.agent else None,
                        "exited": self.exit.to_wire() if self.exit else None,
                        "classification": self.classification or None,
                        "screen": self.classified_screen,
                    },
                    timeout=5.0,
                )
                if reply.get("served") is False:  # the node marked the record; we run on
                    log.warning(
                        "wire-not-served",
                        record=self.record_id,
                        wire=p.SUPERVISOR_WIRE,
                        node_serves=reply.get("serves"),
                        reason=reply.get("reason"),
                    )
                await self.keyboard.catch_up()
                return
            except RoostError as err:
                if err.code in ("stale-generation", "not-found"):
                    log.warning("fenced", record=self.record_id, code=err.code)
                    await self.shutdown(grace=2.0)
                    self._stop.set()
                    return
                await asyncio.sleep(RETRY_S)

    def evidence(self) -> dict[str, Any] | None:
        if self.agent is None or self.agent.pty is None:
            return None
        return probe.sample(self.agent.pid, self.agent.pty.fd).to_wire()

    def classified(
        self,
        result: dict[str, Any],
        *,
        via: str = "screen",
        ended: int = 0,
        screen: str | None = None,
    ) -> None:
        """The adapter's verdict on the screen, ``via`` the evidence it stands on, and the
        turns it ends (``verdicts``). A change of the verdict, or of ``via`` to a signal, is
        reported to the node, and each turn's end once (``turn_end`` in the map), with the
        digest of the screen it read (the node's usage-limit policy compares it)."""
        before = self.classification
        verdict = {**result, "via": via}
        self.classification = verdict
        changed = _core(result) != _core(before)
        if changed:
            self.keyboard.update_gate()  # closed before anyone can see a login screen's verdict
        reports = max(ended, int(changed or (via != "screen" and via != before.get("via"))))
        for n in range(reports):
            body: dict[str, Any] = {"classification": {**verdict, "turn_end": n < ended}}
            if screen is not None:
                body["screen"] = self.classified_screen = screen_digest(screen)
            self.report("node.session.classified", body)
        if (changed or ended) and result.get("state") != "busy":  # a turn ended, or a
            self.usage.soon()  # question: the CLI's files have its figures

    def on_usage(self, signal: Signal) -> None:
        """A ``usage`` signal (the signal channel's handler for that kind): claude's
        statusline's cost so far, and a read of the CLI's files for the tokens."""
        self.usage.on_signal(signal)

    def prompted(self) -> None:
        self.classifier.prompted()

    def report(self, method: str, body: dict[str, Any]) -> None:
        """A durable report to the node (through the outbox, in order with everything else)."""
        self.outbox.put(
            self._stamp({"t": "report", "method": method, "body": {**self.session_address, **body}})
        )

    def learn(self, provider_session: str) -> None:
        """The provider's own session id became known (a screen, its files, or a turn's line)."""
        if provider_session == self.identity or self.checks.refuse_identity(provider_session):
            return
        self.identity = self.spec["provider_session"] = provider_session
        self.report("node.session.identity", {"provider_session": provider_session})
        if self.turns is None:  # a pty turn may have ended before the id was known
            self.usage.soon()
        if self.turns is not None:  # the next turn resumes it: its command is asked again
            self.turns.relearnt()

    def cleared(self, provider_session: str) -> None:
        """The CLI started a new conversation itself (claude's ``/clear``, told by its
        SessionStart hook): the session's id moves to it, and the node is told which it
        replaces (a resume then continues the conversation on the screen, not the cleared
        one)."""
        previous = self.identity
        if previous is None or provider_session == previous:
            return
        log.info("identity-cleared", previous=previous, provider_session=provider_session)
        self.identity = self.spec["provider_session"] = provider_session
        body = {"provider_session": provider_session, "previous": previous, "how": "clear"}
        self.report("node.session.identity", body)
        self.usage.soon()

    # -- requests ------------------------------------------------------------------------------

    def _fence(self, header: p.Header) -> None:
        session = header.session or {}
        if session.get("generation", self.generation) != self.generation:
            raise RoostError(
                "stale-generation",
                "the request names another generation",
                {"generation": self.generation},
            )
        if self.exit is not None:
            raise RoostError("session-not-live", "the agent has exited")

    def pty(self, header: p.Header) -> PtyAgent:
        self._fence(header)
        if self.agent is None:
            raise RoostError(
                "bad-request",
                "a stream-mode session takes turns, not typed input",
                {"field": "mode"},
            )
        return self.agent

    async def on_run(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """A turn the node began (its gate was open): run it."""
        if header.sender != "node":
            raise RoostError("forbidden", "only the node hands over a begun turn")
        self._fence(header)
        if self.turns is None:
            raise RoostError("bad-request", "a pty session takes typed input", {"field": "mode"})
        turn = f.req_str(body, "turn", max_len=64)
        try:
            if body.get("text") is None:  # a repeated operation's turn: run it if nobody did
                return await self.turns.adopt(turn, self.generation)
            return await self.turns.run_begun(turn, f.text(body, "text"))
        finally:
            self.keyboard.update_gate()

    async def on_resize(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        rows, cols = f.req_int(body, "rows", lo=2, hi=1000), f.req_int(body, "cols", lo=2, hi=1000)
        self._fence(header)
        if self.agent is not None:
            self.agent.resize(rows, cols)
        self.term.resize(rows, cols)
        return {"rows": rows, "cols": cols}

    async def on_screen(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "screen": self.term.text(),
            "cursor": self.term.cursor(),
            "offset": self.transcript.offset,
            "generation": self.generation,
            "classification": self.classification or None,
            "turn": self.turns.running if self.turns else None,
            "accepting": self.turns.preparing if self.turns else self.typing,
            "undelivered": self.outbox.size,
        }

    async def on_transcript(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        offset = f.opt_int(body, "offset") or 0
        limit = f.opt_int(body, "limit", lo=1, hi=p.MAX_BIN // 2) or 65536
        return self.transcript.read(offset, limit)

    async def on_stop(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        grace_ms = f.opt_int(body, "grace_ms", hi=60_000)
        await self.shutdown((3000 if grace_ms is None else grace_ms) / 1000)
        if self.agent is None:  # stream mode: the supervisor's end is the session's exit
            self.exit = ExitStatus(0, None)
            self.snapshot()
            self.tasks.start(self._finish(), "finish")
        # no waiting for the outbox here: the node holds the record while it awaits this reply
        assert self.exit is not None
        return {"exit": self.exit.to_wire()}

    async def shutdown(self, grace: float) -> None:
        self.checks.on_stop()
        if self.turns is not None:
            await self.turns.stop()
        if self.agent is not None:
            await self.agent.terminate(grace)


async def serve(spec: LaunchSpec, stop: asyncio.Event) -> None:
    ctx = zmq.asyncio.Context()
    peer = Peer(
        ctx,
        spec["endpoint"],
        f"session/{spec['record_id']}",
        spec["token"],
        incarnation=spec["instance_id"],
        meta={
            "record": spec["record_id"],
            "generation": spec["generation"],
            "instance": spec["instance_id"],
            "pid": os.getpid(),
            **VERSION,
        },
    )
    supervisor = Supervisor(spec, peer, stop)
    # This process holds the agent's terminal: were it to exit, the agent would die with it,
    # and with it whatever the agent was in the middle of. So its two loops, the link to the
    # broker and the outbox to the node, are started again when they crash (each crash logged
    # as task-crashed with its traceback; the back-off and limit of the node's own children):
    # a fresh link says hello and re-attaches, and the outbox's entries stay queued (and on
    # disk) for the next try. Only past the limit does the supervisor stop (the agent with it,
    # as on session.stop) and exit non-zero, and the node's loss handling makes the record
    # dormant (resumable), rather than the agent running on unheard of.
    tasks = supervisor.tasks
    tasks.keep(peer.run, "link")
    tasks.keep(supervisor.outbox.run, "outbox")
    try:
        supervisor.launch()
    except RoostError as err:
        log.error("launch-failed", record=supervisor.record_id, reason=err.message)
        supervisor.exit = ExitStatus(127, None)
        supervisor.outbox.put(
            supervisor._stamp(
                {
                    "t": "report",
                    "method": "node.session.failed",
                    "body": {**supervisor.session_address, "error": err.to_body()},
                }
            )
        )
        await supervisor.outbox.drained(30.0)
        stop.set()
    await stop.wait()
    await supervisor.shutdown(grace=2.0)
    supervisor.classifier.close()
    supervisor.usage.close()
    supervisor.channel.close()
    supervisor.fanout.close()
    await tasks.cancel()
    supervisor.transcript.close()
    supervisor.outbox.close()
    ctx.destroy(0)
    if tasks.failure is not None:
        raise tasks.failure  # run_until_stopped: exit status CRASHED


def _core(classification: dict[str, Any]) -> tuple[Any, Any, Any]:
    """What a verdict says of the screen (not the evidence it stands on)."""
    return classification.get("state"), classification.get("reason"), classification.get("detail")


def main() -> None:
    parser = argparse.ArgumentParser(prog="roost-supervisor")
    parser.add_argument(
        "--spec", required=True, help="path of the launch spec (read, then removed)"
    )
    run(Path(parser.parse_args().spec))


TITLE_NAME_MAX = 32  # of a record's name in the title: room for the node id after it


def title(spec: dict[str, Any]) -> tuple[str, ...]:
    """What ``ps`` shows of a supervisor: its kind, its record, the record's name at launch and
    its node, e.g. ``roost-supervisor r0123456789 shepherd node n-abc`` (a node id or name the
    spec lacks, a launch by an earlier node, is left out)."""
    words = ["roost-supervisor", str(spec["record_id"])]
    name = spec.get("name")
    if isinstance(name, str) and name:
        words.append(name if len(name) <= TITLE_NAME_MAX else name[: TITLE_NAME_MAX - 1] + "…")
    node_id = spec.get("node_id")
    if isinstance(node_id, str) and node_id:
        words += ["node", node_id]
    return tuple(words)


def run(spec_path: Path) -> None:
    """The supervisor of the launch ``spec_path`` names: read the spec and remove it (before
    anything else: a launch whose spec the node took back never starts), then serve until
    stopped. The zygote's children start here too. Its command line (the zygote's, for a forked
    one) is replaced by its ``title``: what ``ps`` shows names the session."""
    spec = msgpack.unpackb(spec_path.read_bytes(), raw=False)
    spec_path.unlink()
    retitle(title(spec), "roost-sup")
    log_file = Path(spec["session_dir"]) / "supervisor.log"
    setup_logging(log_file, f"session/{spec['record_id']}", SUPERVISOR_LOG)
    if sys.platform != "win32":
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    run_until_stopped(lambda stop: serve(spec, stop))


if __name__ == "__main__":
    main()
