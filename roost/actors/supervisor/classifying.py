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
A round whose request (screen, title, process evidence, identity: all but the time of the probe)
is the one the last verdict answered, less than ``REUSE_S`` ago, keeps that verdict without a
call (output that changed nothing a human sees: a cursor blink, a redraw); older, it is asked
again, for an adapter that also reads the provider's files (codex's rollout).

A call that fails (the adapter host slow, restarting or away) is tried again, backing off: a
screen waiting for a human never changes again, so without the retry its verdict would never come.

A verdict is reported to the node when it changes, and the first verdict of a round that began
after a prompt was typed is reported even when it is the one before (``prompted``): an agent that
answers before its screen is ever seen busy (the echo agent) still shows its turn's end (the
node's ``turn-end`` notification).
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from roost.actors.runtime.process import logged_crash
from roost.actors.supervisor.host import Session
from roost.adapters.limits import screen_digest
from roost.wire.errors import RoostError

log = structlog.get_logger("roost.classifying")

SETTLE_S = 0.15  # let a burst of output land before reading the screen
FLOWING_S = 1.0  # while output keeps flowing, a round at most this often
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
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0  # rounds begun
        self._prompted: int | None = None  # rounds begun when a prompt was last typed

    def prompted(self) -> None:
        """A prompt was typed: the verdict of the next round to begin is reported, changed or
        not."""
        self._prompted = self.rounds
        self.changed()

    def changed(self) -> None:
        """The screen changed: classify it (now, or after the round in progress)."""
        self.unclassified = True
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now - self._changed_at >= SETTLE_S:
            self._resumed_at = now
        self._changed_at = now
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._rounds())
            self._task.add_done_callback(logged_crash)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _rounds(self) -> None:
        loop = asyncio.get_running_loop()
        retry = RETRY_S[0]
        due = max(loop.time() + SETTLE_S, self._round_at + FLOWING_S)
        while self.unclassified:
            await self._quiet_or(due)
            started = self._round_at = loop.time()
            self.rounds += 1
            number = self.rounds
            due = started + FLOWING_S
            self.unclassified = False  # from here on, new output means another round
            request = self._request()
            if started - self._answered_at < REUSE_S and same_request(self._answered, request):
                self.skipped += 1
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
            self._answered, self._answered_at = request, started
            if self._prompted is not None and number > self._prompted:
                self._prompted = None
                if result == self.sup.classification:  # else classified reports the change
                    self.sup.report(
                        "node.session.classified",
                        {"classification": result, "screen": screen_digest(request["screen"])},
                    )
            self.sup.classified(result, request["screen"])
            if self.sup.identity is None:
                await self.sup.checks.discover()

    async def _quiet_or(self, due: float) -> None:
        """Wait until ``due``, or less: until the output has been quiet for ``SETTLE_S``, or
        ``SETTLE_S`` after it began again, after a quiet spell, since the last round began."""
        loop = asyncio.get_running_loop()
        while (wake := min(due, self._changed_at + SETTLE_S, self._resumed())) > loop.time():
            await asyncio.sleep(wake - loop.time())

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
