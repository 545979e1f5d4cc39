"""A pty session's screen classification: the supervisor asks ``adapter.classify`` until the screen
as it stands has a verdict.

Output marks the screen unclassified and starts a round unless one is running; a round reads the
screen only when it calls, so output that arrives during a call makes another round follow it. A
call that fails (the adapter host slow, restarting or away) is tried again, backing off: a screen
waiting for a human never changes again, so without the retry its verdict would never come.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from roost.actors.supervisor.host import Session
from roost.broker.errors import RoostError

log = structlog.get_logger("roost.classifying")

SETTLE_S = 0.15  # let a burst of output land before reading the screen
CALL_TIMEOUT_S = 3.0
RETRY_S = (0.25, 4.0)  # the first retry's wait, doubled after each failure up to the second


class ScreenClassifier:
    def __init__(self, sup: Session) -> None:
        self.sup = sup
        self.unclassified = False
        self.failures = 0  # consecutive failed calls
        self._task: asyncio.Task[None] | None = None

    def changed(self) -> None:
        """The screen changed: classify it (now, or after the round in progress)."""
        self.unclassified = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._rounds())

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _rounds(self) -> None:
        retry = RETRY_S[0]
        while self.unclassified:
            await asyncio.sleep(SETTLE_S)
            self.unclassified = False  # from here on, new output means another round
            try:
                result = await self._call()
            except RoostError as err:
                self.unclassified, self.failures = True, self.failures + 1
                if self.failures & (self.failures - 1) == 0:  # 1, 2, 4, 8...: a long outage
                    log.warning(  # (the node away for hours) does not fill the log
                        "classify-failed", code=err.code, failures=self.failures, retry_s=retry
                    )
                await asyncio.sleep(retry)
                retry = min(retry * 2, RETRY_S[1])
                continue
            retry, self.failures = RETRY_S[0], 0
            self.sup.classified(result)
            if self.sup.identity is None:
                await self.sup.checks.discover()

    async def _call(self) -> dict[str, Any]:
        sup = self.sup
        return await sup.peer.call(
            f"adapter/{sup.provider}",
            "adapter.classify",
            {
                "screen": sup.term.text(),
                "exited": sup.exit is not None,
                "evidence": sup.evidence(),
                **sup.checks.view(),  # the title, identity, launch time and context
            },
            timeout=CALL_TIMEOUT_S,
        )
