"""A pty session's screen classification: the supervisor asks ``adapter.classify`` until the screen
as it stands has a verdict.

Output marks the screen unclassified and starts a round unless one is running; a round reads the
screen only when it calls, so output that arrives during a call makes another round follow it.
Rounds are paced: a round comes ``SETTLE_S`` after the output that called for it began, but no
sooner than ``FLOWING_S`` after the round before began, unless the output has been quiet for
``SETTLE_S`` by then, or output began again after a quiet spell of ``SETTLE_S`` since that round
began. So output that keeps flowing is classified about once a ``FLOWING_S`` (where every
``SETTLE_S`` plus a call cost a stream of output five calls a second); output that starts after
a quiet screen (an answer streaming after its prompt) has its first verdict ``SETTLE_S`` after it
began, however recent the verdict on the quiet screen was; and the screen output ends on has its
verdict within ``SETTLE_S`` of the last byte. Each bound is plus the call in flight then and its
own (each under ``CALL_TIMEOUT_S``).
While the verdict is busy, the screen is a working agent's: a spinner and a streamed answer
redraw it a few times a second, with pauses longer than ``SETTLE_S`` between some redraws (a
round each, most of what a streamed answer cost the supervisor). So while busy a quiet spell is
``BUSY_SETTLE_S``, and each round of output still flowing that finds the same busy verdict
doubles the pace, up to ``FLOWING_MAX_S``; any other verdict, a quiet screen, a prompt or a
signal brings it back to ``FLOWING_S``. The screen the output ends on still has its verdict
within ``BUSY_SETTLE_S`` of the last byte (a signal's round, at once).
A round whose request (screen, title, process evidence, identity: all but the time of the probe)
is the one the last verdict answered, less than ``REUSE_S`` ago, keeps that verdict without a
call (output that changed nothing a human sees: a cursor blink, a redraw); older, it is asked
again, for an adapter that also reads the provider's files (codex's rollout).

A call that fails (the adapter host slow, restarting or away) is tried again, backing off: a
screen waiting for a human never changes again, so without the retry its verdict would never come.

Each verdict goes to ``verdicts.Verdicts``, which weighs it against the signals taken since and
keeps the turns' starts and ends; the supervisor reports a verdict when it changes, and once for
each turn it ends. A signal (``signalled``) asks for a round at once: no settle wait, and the
adapter is asked even about a screen it answered (the provider's files may have moved on).
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from roost.actors.runtime.process import logged_crash
from roost.actors.supervisor.host import Session
from roost.actors.supervisor.verdicts import Verdicts
from roost.wire import signals as ws
from roost.wire.errors import RoostError

log = structlog.get_logger("roost.classifying")

SETTLE_S = 0.15  # let a burst of output land before reading the screen
BUSY_SETTLE_S = 0.3  # the same while the verdict is busy (a spinner's pauses are no end)
FLOWING_S = 1.0  # while output keeps flowing, a round at most this often
FLOWING_MAX_S = 4.0  # and while it stays busy, at least this often
REUSE_S = 5.0  # how long a verdict answers an unchanged request
CALL_TIMEOUT_S = 3.0
RETRY_S = (0.25, 4.0)  # the first retry's wait, doubled after each failure up to the second


def same_request(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    """Whether two classify requests ask the same (the evidence's ``taken`` aside)."""
    if a is None or a.keys() != b.keys():
        return False
    for key, value in b.items():
        other = a[key]
        if key == "evidence" and isinstance(value, dict) and isinstance(other, dict):
            value, other = {**value, "taken": None}, {**other, "taken": None}
        if value != other:
            return False
    return True


class ScreenClassifier:
    def __init__(self, sup: Session) -> None:
        self.sup = sup
        self.unclassified = False
        self.failures = 0  # consecutive failed calls
        self.skipped = 0  # rounds whose request the last verdict had answered
        self._changed_at = float("-inf")  # the loop's time of the last output
        self._resumed_at = float("-inf")  # and of the first output after a quiet spell
        self._round_at = float("-inf")  # and of the last round's start
        self._answered: dict[str, Any] | None = None  # the request of the last verdict
        self._answered_at = 0.0
        self._verdict: dict[str, Any] | None = None  # and that verdict
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0  # rounds begun
        self._output = False  # the screen changed since the last round began
        self._urgent = False  # a signal asked for a round: no settle wait, no reuse
        self._waiting: asyncio.Future[None] | None = None  # _quiet_or's wait, a signal ends it
        self._timers: set[asyncio.TimerHandle] = set()
        self._flowing = FLOWING_S  # the pace of rounds while output flows
        self.verdicts = Verdicts(sup, self.signalled)

    def prompted(self) -> None:
        """A prompt was typed: a turn begins (``verdicts``)."""
        self.verdicts.prompted(self.rounds)
        self._flowing = FLOWING_S
        self.changed()

    def _settle(self) -> float:
        """How long the output must pause to count as quiet: longer while the screen is busy."""
        busy = self._verdict is not None and self._verdict.get("state") == "busy"
        return BUSY_SETTLE_S if busy else SETTLE_S

    def signal(self, sig: ws.Signal) -> None:
        """A signal taken from the channel (the handler of its kinds the screen can bear out)."""
        self.verdicts.signal(sig, self.rounds)

    def changed(self) -> None:
        """The screen changed: classify it (now, or after the round in progress)."""
        self._output = True
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now - self._changed_at >= self._settle() and not self._pacing():
            self._resumed_at = now  # (the time between two paced reads is no quiet spell)
        self._changed_at = now
        self._start()

    def unpaced(self) -> None:
        """The agent's paced reads ended (``PtyAgent.on_unpaced``): the output paused, or
        floods; the quiet wait takes the settle time from here."""
        _done(self._waiting)

    def signalled(self, delay: float = 0.0) -> None:
        """A round without the settle wait: now, or ``delay`` seconds from now."""
        if delay > 0:
            loop = asyncio.get_running_loop()
            handle = loop.call_later(delay, self._fire)
            self._timers.add(handle)
            return
        self._urgent = True
        self._flowing = FLOWING_S
        _done(self._waiting)
        self._start()

    def _fire(self) -> None:
        now = asyncio.get_running_loop().time()
        self._timers = {t for t in self._timers if t.when() > now}
        self.signalled()

    def _start(self) -> None:
        self.unclassified = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._rounds())
            self._task.add_done_callback(logged_crash)

    def close(self) -> None:
        for handle in self._timers:
            handle.cancel()
        if self._task is not None:
            self._task.cancel()

    async def _rounds(self) -> None:
        loop = asyncio.get_running_loop()
        retry = RETRY_S[0]
        due = max(loop.time() + SETTLE_S, self._round_at + self._flowing)
        while self.unclassified:
            await self._quiet_or(due)
            # what the agent wrote since the terminal was last read is this round's to see: taken
            # before the flags below (read while the screen is read, it would count as new
            # output after this round, and call for another)
            self.sup.term.before_read()
            started = self._round_at = loop.time()
            self.rounds += 1
            number, urgent, output = self.rounds, self._urgent, self._output
            self._urgent = self._output = False
            flowing = started - self._changed_at < self._settle()  # output goes on as it begins
            before = self._verdict
            self.unclassified = False  # from here on, new output means another round
            request, typing = self._request(), self.sup.typing  # the screen and the keys at once
            reuse = started - self._answered_at < REUSE_S and not urgent
            if reuse and self._verdict is not None and same_request(self._answered, request):
                self.skipped += 1
                self._judge(self._verdict, number, output, started, request["screen"], typing)
                due = started + self._pace(before, self._verdict, flowing and not urgent)
                continue
            try:
                result = await self._call(request)
            except RoostError as err:
                self.unclassified, self.failures = True, self.failures + 1
                if self.failures & (self.failures - 1) == 0:  # 1, 2, 4, 8...: a long outage
                    log.warning(  # (the node away for hours) does not fill the log
                        "classify-failed", code=err.code, failures=self.failures, retry_s=retry
                    )
                await asyncio.sleep(retry)
                retry, due = min(retry * 2, RETRY_S[1]), loop.time()
                continue
            retry, self.failures = RETRY_S[0], 0
            self._answered, self._answered_at, self._verdict = request, started, result
            self._judge(result, number, output, started, request["screen"], typing)
            due = started + self._pace(before, result, flowing and not urgent)
            if self.sup.identity is None:
                await self.sup.checks.discover()

    def _pace(self, before: dict[str, Any] | None, after: dict[str, Any], flowing: bool) -> float:
        """The wait before the next round while output flows: doubled after a round that
        found the same busy screen with output still flowing, else ``FLOWING_S``."""
        same = before is not None and _state(before) == _state(after) == "busy"
        self._flowing = min(self._flowing * 2, FLOWING_MAX_S) if same and flowing else FLOWING_S
        return self._flowing

    def _judge(
        self,
        result: dict[str, Any],
        number: int,
        output: bool,
        started: float,
        screen: str,
        typing: bool,
    ) -> None:
        quiet_s = started - self._changed_at
        self.verdicts.take(result, number, output, quiet_s, started, screen=screen, typing=typing)

    async def _quiet_or(self, due: float) -> None:
        """Wait until ``due``, or less: until the output has been quiet for ``SETTLE_S``, or
        ``SETTLE_S`` after it began again, after a quiet spell, since the last round began; a
        signal ends the wait at once. While the agent's reads are paced, the output has not
        paused until a paced read finds nothing (``unpaced``): no timer wakes the supervisor
        between two reads to find that output came meanwhile (as one did at every read)."""
        loop = asyncio.get_running_loop()
        while (
            not self._urgent and (wake := min(due, self._quiet_at(), self._resumed())) > loop.time()
        ):
            # a future and a timer: a wait that times out (most do: the output goes on) costs
            # no task of its own and no cancellation
            self._waiting = waiting = loop.create_future()
            timer = loop.call_at(wake, _done, waiting)
            try:
                await waiting
            finally:
                timer.cancel()
                self._waiting = None

    def _quiet_at(self) -> float:
        """When the output will have been quiet for the settle time, as far as is known now."""
        return float("inf") if self._pacing() else self._changed_at + self._settle()

    def _pacing(self) -> bool:
        agent = self.sup.agent
        return agent is not None and agent.pacing

    def _resumed(self) -> float:
        """When output that began after a quiet spell is due a round: ``SETTLE_S`` after it
        began, unless a round began since (never, then)."""
        if self._resumed_at > self._round_at:
            return self._resumed_at + SETTLE_S
        return float("inf")

    def _request(self) -> dict[str, Any]:
        sup = self.sup
        return {
            "screen": sup.term.text(),
            "exited": sup.exit is not None,
            "evidence": sup.evidence(),
            **sup.checks.view(),  # the title, identity, launch time and context
        }

    async def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        sup = self.sup
        return await sup.peer.call(
            f"adapter/{sup.provider}", "adapter.classify", request, timeout=CALL_TIMEOUT_S
        )


def _done(waiting: asyncio.Future[None] | None) -> None:
    """End the quiet wait (if one is under way and not ended)."""
    if waiting is not None and not waiting.done():
        waiting.set_result(None)


def _state(verdict: dict[str, Any]) -> Any:
    return verdict.get("state")
