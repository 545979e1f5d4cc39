"""A session's raw output to attached clients (``o/<record>``), coalesced under a flood.

The pty gives the supervisor about 4 KiB a read; publishing each read cost a message through
the broker per 4 KiB. The first output after a quiet spell goes out at once (typing is echoed
without delay); what follows within ``WINDOW_S`` is gathered and goes out as one message when the
window closes, or sooner once it holds ``LIMIT`` bytes (PROTOCOL.md: up to 64 KiB a message).
A message always carries contiguous bytes from its ``offset``: output whose offset does not
continue the gathered bytes (a transcript that lost bytes to a full disk) starts a new message.
"""

from __future__ import annotations

import asyncio
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

    def push(self, offset: int, data: bytes) -> None:
        if self._parts and (
            offset != self._end or self._end - self._start + len(data) > self._limit
        ):
            self.flush()
        if not self._parts:
            self._start = offset
        self._parts.append(data)
        self._end = offset + len(data)
        if self._timer is None:  # the first output after a quiet spell: at once
            self.flush()
            self._timer = asyncio.get_running_loop().call_later(self._window, self._tick)

    def flush(self) -> None:
        if self._parts:
            data = b"".join(self._parts)
            self._parts.clear()
            self._publish(self._start, data)

    def close(self) -> None:
        """Publish what is gathered and stop the window's timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.flush()

    def _tick(self) -> None:
        self._timer = None
        if self._parts:  # still flowing: keep gathering for another window
            self.flush()
            self._timer = asyncio.get_running_loop().call_later(self._window, self._tick)
