"""A session's terminal as roost keeps it: the screen and the append-only transcript.

Raw output is appended to ``transcript.bin`` under the session's directory (rotated at a bound,
one older file kept); its byte offset runs across generations and rotations, so a client that saw
offset N knows exactly what it missed. The screen is what a human would see now, rows joined by
newlines. Escape sequences pyte does not know are taken out before it sees them (``escapes``),
and pyte runs behind ``emulator.Emulator``. The title is the window title the program set last
(OSC 0 or 2), which some CLIs use for a progress spinner.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pyte
import structlog

from roost.actors.supervisor.emulator import Emulator
from roost.actors.supervisor.escapes import EscapeFilter

log = structlog.get_logger("roost.terminal")


class Terminal:
    def __init__(self, rows: int, cols: int) -> None:
        self._emulator = Emulator(rows, cols)
        self._escapes = EscapeFilter()

    def feed(self, data: bytes) -> None:
        self._emulator.feed(self._escapes.feed(data))

    @property
    def screen(self) -> pyte.Screen:
        return self._emulator.screen

    def resize(self, rows: int, cols: int) -> None:
        self._emulator.resize(rows, cols)

    def text(self) -> str:
        return self._emulator.text()

    def title(self) -> str:
        """The window title the program set last (OSC 0 or 2), "" before any."""
        return self._emulator.title()

    def cursor(self) -> dict[str, int]:
        return self._emulator.cursor()


TRANSCRIPT_LIMIT = 8 * 1024 * 1024  # per file; one rotated file is kept beside the current


class Transcript:
    """Append-only raw output with a running byte offset, bounded by rotation.

    ``transcript.bin`` holds the bytes from offset ``base``; ``transcript.old.bin`` the ones
    before, from ``old_base``. Offsets never restart, so a reader knows what it missed; bytes
    older than the rotated file are gone, and a read from there says so (``dropped``).
    """

    def __init__(self, directory: Path, limit: int = TRANSCRIPT_LIMIT) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.dir, self.limit = directory, limit
        self.base, self.old_base = read_bases(directory)
        self._fh = open(directory / "transcript.bin", "ab", buffering=0)  # noqa: SIM115 - for life
        self.offset = self.base + self._fh.tell()
        self.lost = 0  # bytes a full (or failing) disk refused; the offsets count only the rest

    def append(self, data: bytes) -> int:
        """Write ``data``; returns the offset of its first byte. A disk that refuses it (ENOSPC,
        an I/O error) loses those bytes from the transcript (logged once per spell), never the
        supervisor: the screen still shows them, and the offsets stay those of the file."""
        start, left = self.offset, len(data)
        try:
            while left:
                done = self._fh.write(data[len(data) - left :])
                if not done:
                    raise OSError(errno.ENOSPC, "short write")
                self.offset, left = self.offset + done, left - done
            if self.lost:
                log.info("transcript-write-recovered", lost=self.lost)
                self.lost = 0
            if self.offset - self.base > self.limit:
                self._rotate()
        except OSError as exc:
            if not self.lost:
                log.error("transcript-write-failed", errno=errno.errorcode.get(exc.errno or 0))
            self.lost += left
        return start

    def _rotate(self) -> None:
        self._fh.close()
        os.replace(self.dir / "transcript.bin", self.dir / "transcript.old.bin")
        self.old_base, self.base = self.base, self.offset
        self._fh = open(self.dir / "transcript.bin", "ab", buffering=0)  # noqa: SIM115
        tmp = self.dir / "transcript.json.tmp"
        tmp.write_text(json.dumps({"base": self.base, "old_base": self.old_base}))
        os.replace(tmp, self.dir / "transcript.json")

    def read(self, offset: int, limit: int) -> dict[str, object]:
        return read_transcript(self.dir, offset, limit)

    def close(self) -> None:
        self._fh.close()


def read_bases(directory: Path) -> tuple[int, int]:
    try:
        raw = json.loads((directory / "transcript.json").read_text())
        return int(raw["base"]), int(raw["old_base"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0, 0


def read_transcript(directory: Path, offset: int, limit: int) -> dict[str, object]:
    """Bytes from ``offset`` (at most ``limit``), across the rotated and the current file."""
    base, old_base = read_bases(directory)
    current = directory / "transcript.bin"
    end = base + (current.stat().st_size if current.exists() else 0)
    dropped = offset < old_base
    offset = min(max(offset, old_base), end)
    if offset < base:
        path, skip = directory / "transcript.old.bin", offset - old_base
        limit = min(limit, base - offset)
    else:
        path, skip = current, offset - base
    try:
        with open(path, "rb") as fh:
            fh.seek(skip)
            data = fh.read(limit)
    except FileNotFoundError:
        data = b""
    return {"offset": offset, "data": data, "end": end, "dropped": dropped}


def session_dir(state_dir: Path, record_id: str) -> Path:
    path = state_dir / "sessions" / record_id
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
