"""A session's terminal as roost keeps it: the pyte screen and the append-only transcript.

Raw output is appended to ``transcript.bin`` under the session's directory; its byte offset runs
across generations, so a client that saw offset N knows exactly what it missed. The screen is what
a human would see now, rows joined by newlines.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyte


class Terminal:
    def __init__(self, rows: int, cols: int) -> None:
        self.screen = pyte.Screen(cols, rows)
        self._stream = pyte.ByteStream(self.screen)

    def feed(self, data: bytes) -> None:
        self._stream.feed(data)

    def resize(self, rows: int, cols: int) -> None:
        self.screen.resize(rows, cols)

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display).rstrip("\n")

    def cursor(self) -> dict[str, int]:
        return {"row": self.screen.cursor.y, "col": self.screen.cursor.x}


class Transcript:
    """Append-only raw output with a running byte offset."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fh = open(path, "ab")  # noqa: SIM115 - held for the session's life
        self.offset = self._fh.tell()

    def append(self, data: bytes) -> int:
        """Write ``data``; returns the offset of its first byte."""
        start = self.offset
        self._fh.write(data)
        self._fh.flush()
        self.offset += len(data)
        return start

    def read(self, offset: int, limit: int) -> bytes:
        with open(self.path, "rb") as fh:
            fh.seek(max(0, offset))
            return fh.read(limit)

    def close(self) -> None:
        self._fh.close()


def session_dir(state_dir: Path, record_id: str) -> Path:
    path = state_dir / "sessions" / record_id
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
