"""Stream-mode turns in a supervisor: one headless provider process per turn, same conversation.

The node begins every turn (its row, its operation and its user-input event in one transaction)
and hands it over (``session.run``); this runner runs each begun turn once, and after a
re-registration runs a turn of its generation that the node began and never handed over (its
catch-up). A turn's command comes from ``adapter.turn``, asked ahead for the next turn (at launch
and after each turn's end) as a plan for any text, so a turn starts without waiting on the
adapter host; a plan that is stale (another provider session, older than ``PLAN_FRESH_S``), not
answered yet or failed is asked again with the text, and a turn whose command cannot be had ends
``failed`` with the reason. Its process runs to its end whatever happens to the client; each
output line goes to the outbox (and the transcript) as it arrives, and the turn's end follows
them (a process that cannot start ends its turn ``failed``). One turn at a time per session.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable
from typing import Any, cast

import structlog

from roost.actors.runtime.caller import Caller
from roost.actors.runtime.lines import LINE_CAP, Lines
from roost.actors.runtime.process import logged_crash
from roost.actors.supervisor.outbox import Outbox
from roost.actors.supervisor.terminal import Terminal, Transcript
from roost.wire.errors import TRANSIENT, RoostError
from roost.wire.messages import LaunchSpec, OutboxEntry, TurnPlan

log = structlog.get_logger("roost.turns")
CHUNK = 65536
PLAN_FRESH_S = 60.0  # a prefetched plan older than this is asked again (the config may change)
REFUSED_RETRY_S = 10.0  # a plan refused for good is asked again this much later


def _quiet(task: asyncio.Task[Any]) -> None:
    """A prefetch nobody used: its failure is not news (the turn asks again and says why)."""
    if not task.cancelled():
        task.exception()


class TurnRunner:
    def __init__(
        self,
        peer: Caller,
        outbox: Outbox,
        spec: LaunchSpec,
        term: Terminal,
        transcript: Transcript,
    ) -> None:
        self.peer, self.outbox, self.spec = peer, outbox, spec
        self.term, self.transcript = term, transcript
        self.first = not spec.get("resume")
        self.running: str | None = None
        self.proc: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._closing = False  # the session is stopping: no turn starts any more
        self._settled = asyncio.Event()  # clear while a begun turn's command is being asked
        self._settled.set()
        # the next turn's plan: (provider session and first, when asked, the call)
        self._plan: tuple[tuple[Any, ...], float, asyncio.Task[TurnPlan]] | None = None
        self._ran: collections.deque[str] = collections.deque(maxlen=16)  # turns ended here
        self.on_idle: Callable[[], None] | None = None  # a turn ended and was delivered
        self.on_end: Callable[[str], None] | None = None  # a turn ended (its id)
        self.refusal: RoostError | None = None  # why the next turn cannot run (its plan said)
        self._idle_task: asyncio.Task[None] | None = None

    @property
    def idle(self) -> bool:
        """No turn running or being prepared, the outbox empty (the last turn's events and end
        delivered, its provider session id learnt): the node may begin the next turn."""
        return (
            self.running is None
            and self._settled.is_set()
            and not self._closing
            and self.outbox.size == 0
        )

    @property
    def preparing(self) -> bool:
        """A begun turn's command is being asked (its process not started yet)."""
        return not self._settled.is_set()

    async def settled(self) -> None:
        """Return once no begun turn is being prepared (a turn is never left without its end)."""
        await self._settled.wait()

    @property
    def closing(self) -> bool:
        """The session is stopping: no turn starts any more."""
        return self._closing

    async def run_begun(self, turn_id: str, text: str) -> dict[str, Any]:
        """A turn the node began (committed): run it, unless it runs already (a repeated
        hand-over) or the session is stopping (it ends ``failed``, ``stopped``)."""
        if self.running == turn_id or turn_id in self._ran:
            return {"started": True, "repeated": True}
        if self.running is not None:
            raise RoostError(
                "busy", "a turn is already running in this session", {"turn": self.running}
            )
        if self._closing:
            self._end(turn_id, None, "stopped")
            return {"started": False}
        self.running = turn_id
        self._settled.clear()  # nothing else starts while the plan is asked
        try:
            await self.outbox.drained(5.0)  # the provider session id a turn before taught us
            plan = self._plan_for(text)
            if plan is None:
                try:
                    plan = await self._ask_plan(text)
                except RoostError as err:
                    self._end(turn_id, 127, f"no command for the turn: {err.message}")
                    return {"started": False}
        finally:
            self._settled.set()
        if self._closing:
            self._end(turn_id, None, "stopped")
            return {"started": False}
        self._task = asyncio.get_running_loop().create_task(self._run(turn_id, text, plan))
        self._task.add_done_callback(logged_crash)
        return {"started": True}

    async def adopt(self, turn_id: str, generation: int) -> dict[str, Any]:
        """A turn named by a repeated operation: if the state store holds it as running, of
        this record and generation, and it never ran here (a node began it, its commit answered
        too late for anyone to hand it over), it runs now."""
        if self.running == turn_id or turn_id in self._ran:
            return {"started": True, "repeated": True}
        turn = (await self.peer.call("state", "state.turn.get", {"id": turn_id}))["turn"]
        if (
            turn is None
            or turn.get("state") != "running"
            or turn.get("record") != self.spec["record_id"]
            or turn.get("generation") != generation
        ):
            return {"started": False}
        log.info("turn-caught-up", turn=turn_id)
        return await self.run_begun(turn_id, str(turn.get("text") or ""))

    async def catch_up(self, generation: int) -> None:
        """After a re-registration: a turn of this generation the state store holds as running
        and this supervisor never ran was begun by a node that died before handing it over; it
        was accepted, so it runs now."""
        latest = (
            await self.peer.call("state", "state.turn.latest", {"record": self.spec["record_id"]})
        )["turn"]
        if (
            latest is not None
            and latest.get("state") == "running"
            and latest.get("generation") == generation
            and latest.get("id") not in (self.running, *self._ran)
        ):
            log.info("turn-caught-up", turn=latest["id"])
            await self.run_begun(str(latest["id"]), str(latest.get("text") or ""))

    def _plan_key(self) -> tuple[Any, ...]:
        return (self.spec["provider_session"], self.first)

    def prefetch(self) -> None:
        """Ask now for the plan of the next turn (any text), so that its acceptance waits on the
        state store's commit alone."""
        if self._closing:
            return
        if self._plan is not None:
            self._plan[2].cancel()
        loop = asyncio.get_running_loop()
        task = loop.create_task(self._ask_plan(None))
        task.add_done_callback(_quiet)
        task.add_done_callback(self._planned)
        self._plan = (self._plan_key(), loop.time(), task)

    def _planned(self, task: asyncio.Task[TurnPlan]) -> None:
        """A prefetch answered: a refusal that no retry changes (no headless mode, no provider
        session to resume) refuses the next turns before they are accepted (the gate says it)."""
        if task.cancelled():
            return
        err = task.exception()
        self.refusal = err if isinstance(err, RoostError) and err.code not in TRANSIENT else None
        if self.refusal is not None:  # asked again in a while: what refused may have changed
            asyncio.get_running_loop().call_later(REFUSED_RETRY_S, self._ask_again, task)
        if self.on_idle is not None:
            self.on_idle()

    def relearnt(self) -> None:
        """The provider session id became known: what the next turn runs is asked again (a
        refusal for want of it holds no more)."""
        self.refusal = None
        if self.running is None:
            self.prefetch()

    def _ask_again(self, refused: asyncio.Task[TurnPlan]) -> None:
        if self._plan is not None and self._plan[2] is refused and self.running is None:
            self.prefetch()

    def _plan_for(self, text: str) -> TurnPlan | None:
        """The prefetched plan with ``text`` in it, if it was answered for this turn (same
        provider session, same first-or-not) under ``PLAN_FRESH_S`` ago and holds for any text;
        None otherwise: the command is then asked for with the text (a plan still on its way is
        not waited for, so a slow adapter host costs no more than that one call)."""
        held, self._plan = self._plan, None
        if held is None:
            return None
        key, asked, task = held
        stale = asyncio.get_running_loop().time() - asked > PLAN_FRESH_S
        if key != self._plan_key() or stale or not task.done():
            task.cancel()
            return None
        if task.cancelled() or task.exception() is not None:
            return None
        plan = task.result()
        at = plan.get("text_arg")
        if not isinstance(at, int) or not 0 <= at < len(plan.get("argv") or ()):
            return None
        argv = list(plan["argv"])
        argv[at] = text
        return {**plan, "argv": argv}

    async def _ask_plan(self, text: str | None) -> TurnPlan:
        """``adapter.turn``: the command of a turn of ``text``, or (None) a plan for any text."""
        spec = self.spec
        body = {
            "provider_session": spec["provider_session"],
            "first": self.first,
            "mode": "stream",
            "cwd": spec["cwd"],
            "env": spec["env"],  # the record's env: where the provider binary and home are
            "data_dir": spec["data_dir"],
        }
        if self.first and spec.get("fork"):  # a fork's first turn copies its source first
            body["fork"] = spec.get("fork")
        if text is not None:
            body["text"] = text
        plan = await self.peer.call(f"adapter/{spec['provider']}", "adapter.turn", body)
        return cast(TurnPlan, plan)

    async def _run(self, turn_id: str, text: str, plan: TurnPlan) -> None:
        """The accepted turn's process, to its end."""
        spec = self.spec
        env = {**spec["env"], **(plan.get("env") or {})}
        try:
            proc = await asyncio.create_subprocess_exec(
                *plan["argv"],
                cwd=spec["cwd"],
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            self._end(turn_id, 127, f"cannot start the provider: {exc.strerror}")
            return
        self.proc = proc
        self._show(f"\r\n> {text}\r\n")
        if self._stopping:  # stopped while its process was starting
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        await self._pump(turn_id, proc)

    def _show(self, text: str) -> None:
        data = text.encode()
        self.transcript.append(data)
        self.term.feed(data)

    def _line(self, turn_id: str, line: bytes, stream: str, cut: bool) -> None:
        entry: OutboxEntry = {
            "t": "line",
            "turn": turn_id,
            "stream": stream,
            "line": line.decode("utf-8", "replace").rstrip("\n"),
            "record": self.spec["record_id"],
            "generation": self.spec["generation"],
        }
        if cut:  # the transcript has all of it; parsing gets the first LINE_CAP bytes
            log.warning("line-cut", turn=turn_id, stream=stream, cap=LINE_CAP)
            entry["cut"] = True
        self.outbox.put(entry)

    async def _pump(self, turn_id: str, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        silence, deadline = self.spec.get("turn_silence_s"), self.spec.get("turn_deadline_s")
        loop = asyncio.get_running_loop()
        self._last_line = loop.time()

        async def drain(reader: asyncio.StreamReader, stream: str) -> None:
            lines = Lines()
            while chunk := await reader.read(CHUNK):
                self._last_line = loop.time()
                self.transcript.append(chunk)
                for line, cut in lines.feed(chunk):
                    self._line(turn_id, line, stream, cut)
            for line, cut in lines.end():
                self._line(turn_id, line, stream, cut)

        async def watchdog() -> str:
            started = loop.time()
            while True:
                await asyncio.sleep(0.2)
                if deadline and loop.time() - started > deadline:
                    return "turn-deadline"
                if silence and loop.time() - self._last_line > silence:
                    return "silence-deadline"

        out, err = proc.stdout, proc.stderr

        async def drain_both() -> None:
            await asyncio.gather(drain(out, "stdout"), drain(err, "stderr"))

        drains: asyncio.Task[Any] = loop.create_task(drain_both())
        guard: asyncio.Task[Any] = loop.create_task(watchdog())
        done, _ = await asyncio.wait({drains, guard}, return_when=asyncio.FIRST_COMPLETED)
        reason = None
        if guard in done:  # roost's own deadline: the provider would have gone on for ever
            reason = guard.result()
            self._stopping = True
            await self._kill(proc)
        guard.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await drains
        code = await proc.wait()
        self._end(turn_id, code, reason or ("stopped" if self._stopping else None))

    @staticmethod
    async def _kill(proc: asyncio.subprocess.Process) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 3.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    def _end(self, turn_id: str, code: int | None, reason: str | None) -> None:
        self._ran.append(turn_id)
        self.outbox.put(
            {
                "t": "turn-end",
                "turn": turn_id,
                "exit": code,
                "reason": reason,
                "record": self.spec["record_id"],
                "generation": self.spec["generation"],
            }
        )
        self.first = False
        if self.on_end is not None:
            self.on_end(turn_id)
        self.running, self.proc = None, None
        self._stopping = False  # a deadline or stop ends this turn only
        self.prefetch()
        if self.on_idle is not None:
            loop = asyncio.get_running_loop()
            self._idle_task = loop.create_task(self._idle_after_delivery())
            self._idle_task.add_done_callback(logged_crash)

    async def _idle_after_delivery(self) -> None:
        """Once the ended turn's entries are delivered, the gate may open again."""
        while not await self.outbox.drained(60.0):
            pass
        if self.on_idle is not None:
            self.on_idle()

    def render(self, events: list[dict[str, Any]]) -> None:
        """Show delivered turn events on the session's screen."""
        for event in events:
            data = event.get("data") or {}
            if event["kind"] == "session.output":
                self.term.feed(f"{data.get('text')}\r\n".encode())
            elif event["kind"] == "session.tool_call":
                self.term.feed(f"[tool {data.get('name')}] {data.get('input')}\r\n".encode())
            elif event["kind"] == "session.tool_result":
                self.term.feed(f"[result] {data.get('content')}\r\n".encode())

    async def stop(self, grace: float = 3.0) -> None:
        """Stopping a session ends its running turn's process: SIGTERM, then SIGKILL after the
        grace; the turn ends ``failed`` with reason ``stopped`` (its end is always written), as
        does a turn whose acceptance is still waiting for the state store once it is accepted."""
        self._closing = True
        if self._plan is not None:
            self._plan[2].cancel()
            self._plan = None
        proc, task = self.proc, self._task
        if task is None or task.done() or (proc is not None and proc.returncode is not None):
            return
        self._stopping = True  # a process still starting is ended as soon as it has started
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        try:
            await asyncio.wait_for(asyncio.shield(task), grace)
        except TimeoutError:
            if self.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
            await task
