"""Saying what a slow command waits for: after a second without an answer, a note on stderr.

On a terminal the note is one line that counts the seconds (``waiting for the session to stop
(3 s)``) and is erased when the wait ends, so what the command prints after it stands alone. When
stderr is not a terminal (a script, a log) the note is one plain line, ``roost: waiting for
...``, printed once. It is never on stdout, so ``--json`` output stays one clean document.
Whoever waits calls ``tick`` while it waits (the client library's ``on_wait``, or its own loop)
and ``done`` at the end; no thread, no timer.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

DELAY_S = 1.0


class Progress:
    """One wait, described by ``what`` ("the node to start")."""

    def __init__(
        self,
        what: str,
        stream: TextIO | None = None,
        delay: float = DELAY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what, self.delay, self._clock = what, delay, clock
        self.stream = stream if stream is not None else sys.stderr
        self.started = clock()
        self.tty = _isatty(self.stream)
        self._shown = -1  # the whole seconds last shown; -1: nothing shown yet

    def tick(self) -> None:
        elapsed = self._clock() - self.started
        if elapsed < self.delay:
            return
        if not self.tty:
            if self._shown < 0:
                self.stream.write(f"roost: waiting for {self.what}\n")
                self.stream.flush()
                self._shown = 0
            return
        if int(elapsed) != self._shown:
            self._shown = int(elapsed)
            self.stream.write(f"\r\x1b[Kwaiting for {self.what} ({self._shown} s)")
            self.stream.flush()

    def done(self) -> None:
        if self.tty and self._shown >= 0:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        self._shown = -1


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def waiting(what: str) -> Iterator[Progress]:
    """``with waiting("the node to stop") as progress: ... progress.tick() ...``"""
    progress = Progress(what)
    try:
        yield progress
    finally:
        progress.done()
