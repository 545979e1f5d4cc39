"""A session's raw output to attached clients (``o/<record>``), coalesced under a flood.

The pty gives the supervisor about 4 KiB a read; publishing each read cost a message through
the broker per 4 KiB. The first output after a quiet spell goes out at once (typing is echoed
without delay); what follows within ``WINDOW_S`` is gathered and goes out as one message when the
window closes, or sooner once it holds ``LIMIT`` bytes (PROTOCOL.md: up to 64 KiB a message).
A message always carries contiguous bytes from its ``offset``: output whose offset does not
continue the gathered bytes (a transcript that lost bytes to a full disk) starts a new message.
A window opens at a message and a timer runs only while bytes are gathered in it: output that
comes more than a window apart (a TUI's repaints, read at the terminal's pace) goes out at once
each time, with no timer to wake the loop for nothing after it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

WINDOW_S = 0.005
LIMIT = 64 * 1024


class Fanout:
    def __init__(
        self, publish: Callable[[int, bytes], None], window: float = WINDOW_S, limit: int = LIMIT
    ) -> None:
        self._publish, self._window, self._limit = publish, window, limit
        self._parts: list[bytes] = []
        self._start = self._end = 0  # the offsets of the gathered bytes
        self._timer: asyncio.TimerHandle | None = None
        self._sent = float("-inf")  # the loop's time of the last message

    def push(self, offset: int, data: bytes) -> None:
        if self._parts and (
            offset != self._end or self._end - self._start + len(data) > self._limit
        ):
            self.flush()
        if not self._parts:
            self._start = offset
        self._parts.append(data)
        self._end = offset + len(data)
        if self._timer is None:
            loop = asyncio.get_running_loop()
            if loop.time() - self._sent >= self._window:  # after a quiet window: at once
                self.flush()
            else:  # within the window of the last message: gathered until it closes
                self._timer = loop.call_at(self._sent + self._window, self._tick)

    def flush(self) -> None:
        if self._parts:
            data = b"".join(self._parts)
            self._parts.clear()
            self._publish(self._start, data)
            with contextlib.suppress(RuntimeError):  # no loop: close() at the end
                self._sent = asyncio.get_running_loop().time()

    def close(self) -> None:
        """Publish what is gathered and stop the window's timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.flush()

    def _tick(self) -> None:
        self._timer = None
        self.flush()  # the window's gathered bytes; what comes next opens another
