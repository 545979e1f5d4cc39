"""pyte as a session's screen runs it: every byte it is given drawn as a terminal would.

``Emulator`` is pyte's ``Screen`` behind its ``ByteStream``, with what roost needs beyond pyte:

* a control whose arguments a screen method refuses does nothing (``Tolerant``), and what pyte's
  own parser raises ends only that feed, never the caller (which lost the rest of a read);
* the screen does not depend on how the output was cut into reads: a character pyte's ``draw``
  cannot place (a C0 control it does not know, a zero-width character that combines with
  nothing, such as U+FE0F after an emoji or U+200D in an emoji sequence) is skipped alone, where
  pyte dropped every character after it up to the next control; the bytes after a character set
  switch (``ESC % @``) are decoded as it says, within one feed too;
* printable ASCII is drawn a row's share at a time (pyte built a named tuple per character, most
  of what a flood cost) and the text is read without a call per cell; a wide character's stub
  left alone (its first half overwritten) shows blank, where pyte's ``display`` raised;
* a resize as xterm does it;
* what the lazy terminal (``terminal``) asks before it skips text that scrolls away
  (``resting``) and where it then stands (``skim``).

It is fed what ``escapes.EscapeFilter`` left of the output.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

import pyte
import structlog
from pyte.charsets import LAT1_MAP
from pyte.modes import DECAWM, IRM
from wcwidth import wcwidth

from roost.actors.supervisor import redraw

log = structlog.get_logger("roost.terminal")

# what a screen method raises for arguments it does not take (erase_in_line(3) reads a local it
# never set: UnboundLocalError)
REFUSALS = (TypeError, ValueError, IndexError, KeyError, UnboundLocalError, AssertionError)


PLAIN_MODES = {DECAWM, IRM}  # of these, wrap on and insert off is the mode _draw_plain draws in
CELL_STYLES = 256  # styles whose cells are kept
SWITCH = re.compile(rb"\x1b%.", re.DOTALL)  # a character set switch (ESC % and its code)


class Tolerant:
    """The screen as pyte's parser calls it: a control whose arguments the screen method refuses
    (a private form it lacks, such as ``CSI ? 996 n``; too many parameters) does nothing, and
    text is drawn without the characters pyte's ``draw`` would stop at."""

    def __init__(self, screen: pyte.Screen) -> None:
        self._screen = screen
        self._cells: dict[Any, Cells] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._screen, name)
        if not callable(attr):
            return attr
        return _tolerant(attr)

    def draw(self, data: str) -> None:
        screen = self._screen
        charset = screen.g1_charset if screen.charset else screen.g0_charset
        if charset is not LAT1_MAP:
            screen.draw(data)  # another character set maps first: drawn as pyte draws
        elif data.isascii() and data.isprintable():
            self._draw_plain(data)
        else:
            for piece in placeable(data):
                screen.draw(piece)

    def _draw_plain(self, data: str) -> None:
        """What pyte's ``draw`` does with printable ASCII (one cell each), a row's share at a
        time rather than a named tuple built per character: it was most of a flood's cost."""
        screen = self._screen
        cursor, columns = screen.cursor, screen.columns
        if screen.mode & PLAIN_MODES != {DECAWM} or cursor.x > columns:
            screen.draw(data)  # no wrap, or insert mode: pyte's own way
            return
        cells = self._cells.get(cursor.attrs)
        if cells is None:
            if len(self._cells) >= CELL_STYLES:
                self._cells.clear()
            cells = self._cells[cursor.attrs] = Cells(cursor.attrs)
        at, end = 0, len(data)
        while at < end:
            if cursor.x == columns:
                screen.dirty.add(cursor.y)
                screen.carriage_return()
                screen.linefeed()
            x = cursor.x
            take = min(end - at, columns - x)
            screen.buffer[cursor.y].update(
                zip(range(x, x + take), map(cells.__getitem__, data[at : at + take]), strict=True)
            )
            cursor.x, at = x + take, at + take
        screen.dirty.add(cursor.y)


class Cells(dict[str, Any]):
    """The cell of each character in one style, made once."""

    def __init__(self, attrs: Any) -> None:
        super().__init__()
        self._attrs = attrs

    def __missing__(self, char: str) -> Any:
        cell = self[char] = self._attrs._replace(data=char)
        return cell


def _tolerant(method: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except REFUSALS:
            return None

    return call


def placeable(data: str) -> list[str]:
    """``data`` cut around the characters pyte's ``draw`` would stop at (and leave them out)."""
    pieces, start = [], 0
    for at, char in enumerate(data):
        if "\x20" <= char <= "\x7e":
            continue
        width = wcwidth(char)
        if width > 0 or (width == 0 and unicodedata.combining(char)):
            continue
        if at > start:
            pieces.append(data[start:at])
        start = at + 1
    if start < len(data):
        pieces.append(data[start:])
    return pieces


class Emulator:
    def __init__(self, rows: int, cols: int, fast: bool = True) -> None:
        """``fast``: a TUI's redraws are read by ``redraw`` (pyte's screen as pyte alone draws
        it, at a fraction of the cost); False: pyte parses every byte (the tests' reference)."""
        self.screen = pyte.Screen(cols, rows)
        self._stream = pyte.ByteStream(Tolerant(self.screen))
        self._failed = False
        self._last = b""  # the last two bytes fed (a switch may begin in them)
        self._redraw = redraw.Redraw.attach(self._stream) if fast else None
        self._rows: list[str] = []  # each row's text as text() last read it
        self._rows_size = (0, 0)  # the screen's size then (lines, columns)

    def feed(self, data: bytes) -> None:
        """Draw ``data``. pyte decodes all it is fed at once before parsing it, so the bytes
        after a character set switch (``ESC % @``: ISO 8859-1, ``ESC % G``: UTF-8) go to it
        apart, decoded as the switch says however the output was cut into reads."""
        before, self._last = self._last, (self._last + data)[-2:]
        if b"%" not in data:
            self._feed(data)
            return
        at = 0
        for switch in SWITCH.finditer(before + data):
            end = switch.end() - len(before)
            self._feed(data[at:end])
            at = end
        self._feed(data[at:])

    def _feed(self, data: bytes) -> None:
        """Bytes pyte's own parser cannot read (a CSI parameter such as ``²``, which it takes
        for a digit) end that feed, logged once, and never the caller."""
        try:
            if self._redraw is not None and self._stream.use_utf8:
                self._redraw.feed(self._stream.utf8_decoder.decode(data))
            else:
                self._stream.feed(data)
        except REFUSALS as exc:
            if not self._failed:
                log.warning("terminal-parse-failed", error=type(exc).__name__)
                self._failed = True

    def resize(self, rows: int, cols: int) -> None:
        """As a real terminal (xterm) resizes: fewer rows drop those below the cursor first,
        then from the top only as many as keep the cursor on the screen; fewer columns cut each
        row at the right and bring the cursor inside. pyte alone cuts rows from the top, so a
        screen with its text at the top went blank with the cursor left on a row it no longer
        showed."""
        screen = self.screen
        if rows < screen.lines:
            top = max(0, screen.cursor.y - rows + 1)  # rows scrolled off so the cursor fits
            buffer = screen.buffer
            kept = {y - top: buffer[y] for y in range(top, top + rows) if y in buffer}
            buffer.clear()
            buffer.update(kept)
            screen.cursor.y -= top
            screen.lines = rows  # pyte's own resize has nothing left to cut
        screen.resize(rows, cols)
        screen.set_margins()  # the whole (new) screen scrolls, whatever pyte skipped
        screen.cursor.x = min(screen.cursor.x, cols - 1)
        screen.dirty.update(range(rows))

    def text(self) -> str:
        """The rows as a human sees them, trailing blanks cut (pyte's ``display``, row by row
        without a call per cell where a row holds only single-width characters, one a cell).
        A row is read again only when pyte's screen marks it changed (``dirty``: every method
        that writes the buffer does, as ``redraw`` and ``Tolerant`` do), or the size changed."""
        screen = self.screen
        columns, lines, buffer, dirty = screen.columns, screen.lines, screen.buffer, screen.dirty
        if self._rows_size != (lines, columns):
            self._rows, self._rows_size = [""] * lines, (lines, columns)
            dirty.update(range(lines))
        rows = self._rows
        for y in dirty:
            if not 0 <= y < lines:
                continue
            line = buffer.get(y)
            if not line:
                rows[y] = ""
                continue
            row = _plain(line, columns)
            if len(row) != columns or not (row.isascii() or redraw.ONE_CELL.fullmatch(row)):
                row = _render(line, columns)  # a wide or combined character in it
            rows[y] = row.rstrip()
        dirty.clear()
        return "\n".join(rows).rstrip("\n")

    def title(self) -> str:
        """The window title the program set last (OSC 0 or 2), "" before any."""
        return str(self.screen.title)

    def cursor(self) -> dict[str, int]:
        return {"row": self.screen.cursor.y, "col": self.screen.cursor.x}

    # -- what the lazy terminal skips by ---------------------------------------------------------

    def resting(self) -> tuple[int, int] | None:
        """The scrolling region (top and bottom row) when text may be skimmed from here: the
        parser between sequences, no character half decoded, UTF-8, and the cursor inside the
        region below its top row (so no combining character can reach a row outside it), in a
        region of two rows or more. None otherwise, and whenever pyte's internals are not the
        ones this was written against (then nothing is skipped)."""
        stream, screen = self._stream, self.screen
        if getattr(stream, "_taking_plain_text", None) is not True or not stream.use_utf8:
            return None
        decoder = getattr(stream, "utf8_decoder", None)
        if decoder is None or decoder.getstate()[0]:
            return None
        top, bottom = screen.margins or (0, screen.lines - 1)
        if not top < screen.cursor.y <= bottom:
            return None
        return top, bottom

    def skim(self, styles: bytes, bottom: int) -> None:
        """Stand where skipped text would have left the terminal: its styles (SGR) applied, the
        cursor at the start of the region's bottom row. The region's rows are stale until the
        text that follows has scrolled them all away, as the caller makes sure it does."""
        if styles:
            self.feed(styles)
        self.screen.cursor.x, self.screen.cursor.y = 0, bottom


def _plain(line: Any, columns: int) -> str:
    """A row's cells joined, blanks where it has none: a step per cell it holds, not per column
    (a row of a few characters on a wide screen was 200 lookups of pyte's missing cell)."""
    cells = [line.default.data] * columns
    for x, char in line.items():
        if 0 <= x < columns:
            cells[x] = char.data
    return "".join(cells)


def _render(line: Any, columns: int) -> str:
    """A row with wide or combined characters: a wide one fills its cell and the stub after it;
    a stub left without its wide character (overwritten) shows blank, where pyte's ``display``
    raised IndexError."""
    out, stub = [], False
    for x in range(columns):
        if stub:
            stub = False
            continue
        char = line[x].data
        if not char:
            out.append(" ")
            continue
        stub = wcwidth(char[0]) == 2
        out.append(char)
    return "".join(out)
