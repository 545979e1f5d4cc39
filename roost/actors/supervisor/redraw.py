"""A TUI's redraws drawn without pyte's parser, each sequence as pyte draws it, each cell once.

A TUI (codex, claude, kimi) repaints its screen many times a second: cursor moves, styles and
short runs of text, each row rewritten whenever the text under it scrolls. pyte reads every
character of that through its parser (a generator step each) and builds a cell per character;
the screen a reader sees is only the last of those repaints. ``Redraw.feed`` reads the same
text with one regular expression and handles, as pyte's parser would call the screen for them:

* cursor moves (CUP, HVP, CUU/CUD/CUF/CUB, CNL/CPL, CHA/HPA, VPA, HPR/VPR), CR, BS, TAB, BEL, and
  LF where it does not scroll: pyte's own methods, which touch no cell;
* SGR, modes (``CSI [?] ... h/l``, but DECCOLM and DECSCNM, which rewrite cells) and OSC 0/1/2
  titles: pyte's own methods;
* text of single-width characters that fits on the cursor's row (autowrap on or off), and EL (erase in line): kept
  aside, the last character and style written to each cell, and put into pyte's buffer once at
  the end of the feed (or before anything else touches the buffer).

Anything else (an LF that scrolls, other escapes and controls, wide or combining characters, text
that wraps, insert mode, another character set) puts the cells kept aside into the buffer first
and goes to pyte's parser. After every feed pyte's screen is exactly what pyte alone would have
drawn from the same bytes; ``tests/unit/test_redraw.py`` checks that on the recorded output of
the three CLIs cut at random points.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import pyte
from pyte.charsets import LAT1_MAP
from pyte.modes import DECCOLM, DECOM, DECSCNM, IRM
from wcwidth import wcwidth


def _narrow() -> str:
    """A character class of the characters pyte draws as one plain cell: printable ASCII and
    the single-width, non-combining characters up to U+2BFF (box drawing, arrows, symbols)."""
    ranges: list[tuple[int, int]] = []
    for code in range(0xA0, 0x2C00):
        char = chr(code)
        if wcwidth(char) != 1 or unicodedata.combining(char) or not char.isprintable():
            continue
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    return "\\x20-\\x7e" + "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )


NARROW = _narrow()
TOKEN = re.compile(
    "\x1b\\[([0-9]{0,5})(?:;([0-9]{0,5}))?[Hf]([" + NARROW + "]*)"  # 1-3: CUP and its text
    "|([" + NARROW + "]+)"  # 4: text
    "|\x1b\\[([0-9;]{0,64})m"  # 5: SGR
    "|\x1b\\[(\\??)([0-9;]{0,64})([@-~])"  # 6-8: another CSI
    "|\x1b\\]([012]);([^\x07\x1b\x9c]*)(?:\x07|\x1b\\\\)"  # 9-10: a title
    "|([\r\n\x0b\x0c\x08\x09\x07])"  # 11: a control
)
MOVES = frozenset("ABCDEFGdea'")  # CSI finals that only move the cursor
MODES = frozenset("hl")
CELL_MODES = {DECCOLM, DECSCNM}  # modes whose change rewrites cells
STYLES = 255  # style ids kept aside (one byte each)
MAX = 9999  # pyte's cap on a CSI parameter


class Redraw:
    """The fast reader of one pyte stream (``attach``: None when pyte's internals are not the
    ones this was written against; then pyte parses everything)."""

    def __init__(self, stream: pyte.ByteStream) -> None:
        self.stream = stream
        self.screen: pyte.Screen = stream.listener._screen  # under emulator.Tolerant
        listener = stream.listener
        self.csi = {final: getattr(listener, name) for final, name in pyte.Stream.csi.items()}
        self.debug = listener.debug
        self.draw = listener.draw
        self.set_icon_name, self.set_title = listener.set_icon_name, listener.set_title
        self.basic = {char: getattr(listener, name) for char, name in pyte.Stream.basic.items()}
        self.ids: dict[Any, int] = {}  # a style (pyte's cursor attrs) -> its id, from 1
        self.cells: list[dict[str, Any]] = [{}]  # id -> the cell of each character in it
        self.chars: dict[int, list[str]] = {}  # row -> the character kept aside per column
        self.kept: dict[int, bytearray] = {}  # row -> the style id per column (0: none)

    @classmethod
    def attach(cls, stream: pyte.ByteStream) -> Redraw | None:
        needed = (
            isinstance(getattr(pyte.Stream, "csi", None), dict)
            and isinstance(getattr(pyte.Stream, "basic", None), dict)
            and hasattr(stream, "_taking_plain_text")
            and hasattr(stream, "utf8_decoder")
            and hasattr(stream.listener, "_screen")
        )
        return cls(stream) if needed else None

    def feed(self, text: str) -> None:
        try:
            self._feed(text)
        finally:
            self.flush()

    def _feed(self, text: str) -> None:
        stream, screen = self.stream, self.screen
        csi, basic = self.csi, self.basic
        match, parse = TOKEN.match, pyte.Stream.feed
        rows, kept = self.chars, self.kept
        at, end = 0, len(text)
        cursor, plain, decom, last, columns = self._state()
        style, fill = 0, b""  # the cursor's style id (0: not looked up since it may have changed)
        while at < end:
            token = match(text, at) if stream._taking_plain_text else None
            if token is None:  # pyte's parser, a character at a time, until it is at rest
                self.flush()
                parse(stream, text[at])
                at += 1
                while at < end and not stream._taking_plain_text:
                    parse(stream, text[at])
                    at += 1
                cursor, plain, decom, last, columns = self._state()
                style = 0
                continue
            at = token.end()
            kind = token.lastindex
            if kind == 3:  # CUP, with the text after it
                line, column, run = token.groups()[:3]
                if decom:
                    csi["H"](_param(line), _param(column))
                else:
                    y = int(line) - 1 if line else 0
                    cursor.y = y if 0 <= y <= last else (0 if y < 0 else last)
                    x = int(column) - 1 if column else 0
                    cursor.x = x if 0 <= x < columns else (0 if x < 0 else columns - 1)
                if not run:
                    continue
            elif kind == 4:
                run = token.group(4)
            if kind == 3 or kind == 4:
                x, size = cursor.x, len(run)
                if not plain or x + size > columns:
                    self.flush()
                    self.draw(run)
                    cursor, plain, decom, last, columns = self._state()
                    style = 0
                    continue
                if not style:
                    style = self._style(cursor.attrs)
                    fill = bytes((style,)) * columns
                y = cursor.y
                chars = rows.get(y)
                if chars is None:
                    chars = self._row(y)
                chars[x : x + size] = run
                kept[y][x : x + size] = fill[:size]
                cursor.x = x + size
            elif kind == 5:  # SGR
                csi["m"](*_params(token.group(5)))
                style = 0
            elif kind == 8:
                private, params, final = token.group(6, 7, 8)
                args = _params(params)
                if final in MOVES and not private:
                    csi[final](*args)
                elif final in MODES:
                    if private and CELL_MODES & {arg << 5 for arg in args}:
                        self.flush()
                    if private:
                        csi[final](*args, private=True)
                    else:
                        csi[final](*args)
                    cursor, plain, decom, last, columns = self._state()
                    style = 0
                elif final == "K" and not private and plain and len(args) == 1 and args[0] < 3:
                    if cursor.x < screen.columns:
                        self._erase(args[0])
                    else:  # pending wrap: pyte's erase reaches past the last column
                        self.flush()
                        csi[final](*args)
                    style = 0
                else:
                    self.flush()
                    method = csi.get(final, self.debug)
                    if private:
                        method(*args, private=True)
                    else:
                        method(*args)
                    cursor, plain, decom, last, columns = self._state()
                    style = 0
            elif kind == 10:  # OSC 0, 1 or 2
                code, title = token.group(9, 10)
                if code in "01":
                    self.set_icon_name(title)
                if code in "02":
                    self.set_title(title)
            else:  # a control
                char = token.group(11)
                if char in "\n\x0b\x0c" and self._scrolls():
                    self.flush()
                basic[char]()

    def _state(self) -> tuple[Any, bool, bool, int, int]:
        """What the loop reads of the screen until the next call it does not make itself: the
        cursor (restoring one replaces it), ``_plain``, origin mode, the last row, the columns."""
        screen = self.screen
        decom = DECOM in screen.mode and screen.margins is not None
        return screen.cursor, self._plain(), decom, screen.lines - 1, screen.columns

    def _plain(self) -> bool:
        """Whether text that fits on the cursor's row is drawn as one cell per character from
        the cursor on (pyte's draw with insert mode off and no character set mapping; autowrap
        matters only to text that does not fit, which pyte draws)."""
        screen = self.screen
        return (
            IRM not in screen.mode
            and (screen.g1_charset if screen.charset else screen.g0_charset) is LAT1_MAP
        )

    def _scrolls(self) -> bool:
        """Whether a line feed now scrolls the region (or the screen)."""
        screen = self.screen
        bottom = screen.margins.bottom if screen.margins else screen.lines - 1
        return bool(screen.cursor.y == bottom)

    def _style(self, attrs: Any) -> int:
        style = self.ids.get(attrs)
        if style is None:
            if len(self.ids) >= STYLES:
                self.flush()
                self.ids.clear()
                del self.cells[1:]
            style = self.ids[attrs] = len(self.cells)
            self.cells.append({})
        return style

    def _row(self, y: int) -> list[str]:
        columns = self.screen.columns
        chars = self.chars[y] = [""] * columns
        self.kept[y] = bytearray(columns)
        return chars

    def _erase(self, how: int) -> None:
        """EL as pyte's ``erase_in_line``: the cells from the cursor to the end of the row (0),
        from its start to the cursor (1) or all of it (2) become the cursor's style, blank."""
        screen = self.screen
        cursor = screen.cursor
        x, columns = cursor.x, screen.columns
        start, stop = ((x, columns), (0, x + 1), (0, columns))[how]
        stop = min(stop, columns)
        if start >= stop:
            return
        style = self._style(cursor.attrs._replace(data=" "))
        chars = self.chars.get(cursor.y)
        if chars is None:
            chars = self._row(cursor.y)
        chars[start:stop] = " " * (stop - start)
        self.kept[cursor.y][start:stop] = bytes((style,)) * (stop - start)

    def flush(self) -> None:
        """Put the cells kept aside into pyte's buffer."""
        if not self.kept:
            return
        screen = self.screen
        buffer, dirty, styles = screen.buffer, screen.dirty, self.cells
        attrs = {style: attr for attr, style in self.ids.items()}
        for y, kept in self.kept.items():
            chars, line = self.chars[y], buffer[y]
            for x, style in enumerate(kept):
                if style:
                    cells, char = styles[style], chars[x]
                    cell = cells.get(char)
                    if cell is None:
                        cell = cells[char] = attrs[style]._replace(data=char)
                    line[x] = cell
            dirty.add(y)
        self.kept.clear()
        self.chars.clear()


def _param(text: str | None) -> int:
    return min(int(text), MAX) if text else 0


def _params(text: str) -> list[int]:
    """A CSI's parameters as pyte's parser reads them (an empty one is 0, each at most 9999)."""
    return [min(int(p), MAX) if p else 0 for p in text.split(";")]
