"""Splitting a provider's output stream into lines, with a cap on what one line may carry on.

A headless provider writes one JSON document per line, and a line can be large (a tool result
holding a whole file). ``asyncio.StreamReader.readline`` fails on a line over its buffer limit
and drops what it buffered, so the turn's later output would be lost or garbled. ``Lines`` takes
chunks as they come and returns whole lines; a line over ``cap`` bytes is passed on cut at
``cap`` and flagged, while the transcript (written by the caller from the raw chunks) keeps every
byte. The cap keeps each spooled line, and the events parsed from it, well inside one frame.
"""

from __future__ import annotations

LINE_CAP = 2 * 1024 * 1024  # bytes of one line passed on for parsing


class Lines:
    """Whole lines out of a byte stream fed in arbitrary chunks: ``(line, cut)`` pairs."""

    def __init__(self, cap: int = LINE_CAP) -> None:
        self.cap = cap
        self._buf = bytearray()
        self._cut = False

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        """The lines this chunk completes (each with its newline), in order."""
        *complete, rest = data.split(b"\n")
        out = []
        for piece in complete:
            self._add(piece)
            out.append(self._take(b"\n"))
        self._add(rest)
        return out

    def end(self) -> list[tuple[bytes, bool]]:
        """At the end of the stream: the last line, if it had no newline."""
        return [self._take(b"")] if self._buf or self._cut else []

    def _add(self, piece: bytes) -> None:
        room = self.cap - len(self._buf)
        if len(piece) > room:
            self._cut, piece = True, piece[: max(room, 0)]
        self._buf += piece

    def _take(self, newline: bytes) -> tuple[bytes, bool]:
        line, cut = bytes(self._buf) + newline, self._cut
        self._buf.clear()
        self._cut = False
        return line, cut
