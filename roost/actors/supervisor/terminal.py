"""A session's terminal as roost keeps it: the screen and the append-only transcript.

Raw output is appended to ``transcript.bin`` under the session's directory (rotated at a bound,
one older file kept); its byte offset runs across generations and rotations, so a client that saw
offset N knows exactly what it missed. The screen is what a human would see now, rows joined by
newlines. Escape sequences pyte does not know are taken out before it sees them (``escapes``),
and pyte runs behind ``emulator.Emulator``. The title is the window title the program set last
(OSC 0 or 2), which some CLIs use for a progress spinner.

The screen is emulated lazily, off the read path: output waits in a backlog until someone reads
the screen (the classifier, a client, the checks) or the backlog passes ``BACKLOG`` bytes, and
of a long run of scrolling text pyte is fed only what can still be on the screen when it ends
(``scrolling``). Emulating every byte cost seconds of CPU per MB (pyte builds a named
tuple per character); a flood now costs its tail. What the screen shows after the output is
exactly what emulating every byte shows. Before the screen is read, ``before_read`` lets the
supervisor take what the agent wrote since its last paced read, so a look never sees a screen
older than the agent's last write.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path

import pyte
import structlog

from roost.actors.supervisor import scrolling
from roost.actors.supervisor.emulator import Emulator
from roost.actors.supervisor.escapes import EscapeFilter

log = structlog.get_logger("roost.terminal")

BACKLOG = 64 * 1024  # output held unemulated (at most this much work for one catch-up)


class Terminal:
    def __init__(self, rows: int, cols: int) -> None:
        self._emulator = Emulator(rows, cols)
        self._escapes = EscapeFilter()
        self._raw: list[bytes] = []  # output not through the escape filter yet
        self._backlog: list[bytes] = []  # filtered output not emulated yet (a run of text)
        self._held = 0  # bytes in both
        self.skipped = 0  # bytes of output pyte was never fed (they scrolled away)
        self._text: str | None = None  # the screen's text, until the next output or resize
        # called before the screen is read: the supervisor takes what the agent wrote meanwhile
        self.before_read: Callable[[], None] = _nothing

    def feed(self, data: bytes) -> None:
        """Output, held raw until the screen is read (the escape filter too reads the backlog
        in one pass then, not each read on its own)."""
        if not data:
            return
        self._text = None
        self._raw.append(data)
        self._held += len(data)
        if self._held > BACKLOG:
            self._catch_up(final=False)

    @property
    def screen(self) -> pyte.Screen:
        """The pyte screen, with everything fed so far on it."""
        self.before_read()
        self._catch_up()
        self._text = None  # the caller may change it
        return self._emulator.screen

    def resize(self, rows: int, cols: int) -> None:
        self._catch_up()  # the output so far was written for the old size
        self._emulator.resize(rows, cols)
        self._text = None

    def text(self) -> str:
        """The screen's text, read once per change (the classifier, a client and the checks
        may each ask between two outputs)."""
        self.before_read()
        if self._text is None:
            self._catch_up()
            self._text = self._emulator.text()
        return self._text

    def title(self) -> str:
        """The window title the program set last (OSC 0 or 2), "" before any."""
        self.before_read()
        self._catch_up()
        return self._emulator.title()

    def cursor(self) -> dict[str, int]:
        self.before_read()
        self._catch_up()
        return self._emulator.cursor()

    def _catch_up(self, final: bool = True) -> None:
        """Emulate the backlog; unless ``final``, a run of text at its end that may go on in the
        next read stays in it (so a flood costs one tail, not one per catch-up)."""
        if self._raw:
            self._backlog.append(self._escapes.feed(b"".join(self._raw)))
            self._raw.clear()
        data = b"".join(self._backlog)
        self._backlog.clear()
        if not data:
            self._held = 0
            return
        done = self._skim(data, final)
        if done < len(data):
            self._backlog.append(data[done:])
        self._held = len(data) - done

    def _skim(self, data: bytes, final: bool) -> int:
        """Feed ``data``, skipping in each long run what scrolls away; returns how much of it
        was dealt with (all of it if ``final``)."""
        emulator, done = self._emulator, 0
        if data.count(b"\n") < 3:  # a cut needs three line feeds at least (a TUI's repaints)
            emulator.feed(data)
            return len(data)
        spans = scrolling.runs(data)
        for start, end in spans:
            first = data.find(b"\n", start, end) + 1  # from the second row on, see resting()
            if first == 0:
                continue
            emulator.feed(data[done:first])
            done = first
            region = emulator.resting()
            if region is None:
                continue
            top, bottom = region
            point = scrolling.cut(data, first, end, bottom - top + 1)
            if point is not None:
                emulator.skim(scrolling.styles(data, first, point), bottom)
                self.skipped += point - first
                done = point
        if not final and spans and spans[-1][1] == len(data) and len(data) - done <= BACKLOG // 2:
            stop = max(done, spans[-1][0])
            emulator.feed(data[done:stop])
            return stop
        emulator.feed(data[done:])
        return len(data)


def _nothing() -> None:
    pass


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
