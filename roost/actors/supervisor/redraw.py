"""A TUI's redraws drawn without pyte's parser, each sequence as pyte draws it, each cell once.

A TUI (codex, claude, kimi) repaints its screen many times a second: cursor moves, styles and
short runs of text, each row rewritten whenever the text under it scrolls. pyte reads every
character of that through its parser (a generator step each) and builds a cell per character;
the screen a reader sees is only the last of those repaints. ``Redraw.feed`` reads the same
text with one regular expression and handles, as pyte's parser would call the screen for them:

* cursor moves: CUP, CUU/CUD/CUF/CUB and CHA (most of a repaint, each followed by text), CR and
  LF where it does not scroll moved here as pyte moves the cursor (a run of CRs and LFs that
  scrolls nothing at once), the text after a CSI read in
  the same step; HVP, CNL/CPL, HPA, VPA, HPR/VPR, BS, TAB and BEL: pyte's own methods, which
  touch no cell;
* SGR, modes (``CSI [?] ... h/l``, but DECCOLM and DECSCNM, which rewrite cells) and OSCs (the
  title; hyperlinks and shell marks, which pyte reads and drops): pyte's own methods;
* text of single-width characters that fits on the cursor's row (autowrap on or off), and EL
  (erase in line): kept aside, the last character and style written to each cell, and put into
  pyte's buffer once at the end of the feed (or before anything else touches the buffer).

Anything else (an LF that scrolls, other escapes and controls, wide or combining characters, text
that wraps, insert mode, another character set) puts the cells kept aside into the buffer first
and goes to pyte's parser. After every feed pyte's screen is exactly what pyte alone would have
drawn from the same bytes; ``tests/unit/test_redraw.py`` checks that on the recorded output of
the three CLIs cut at random points.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from typing import Any

import pyte
from pyte.charsets import LAT1_MAP
from pyte.modes import DECCOLM, DECOM, DECSCNM, IRM, LNM
from wcwidth import wcwidth


def _narrow() -> str:
    """A character class of the characters pyte draws as one plain cell: printable ASCII and
    the single-width, non-combining characters up to U+2BFF (box drawing, arrows, symbols)."""
    ranges: list[tuple[int, int]] = []
    for code in range(0xA0, 0x2C00):
        char = chr(code)
        if wcwidth(char) != 1 or unicodedata.combining(char):
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
ONE_CELL = re.compile("[" + NARROW + "]*")  # text each of whose characters fills one cell
TOKEN = re.compile(
    "\x1b\\[(\\??)([0-9;]{0,64})([@-~])([" + NARROW + "]*)"  # 1-4: a CSI and the text after it
    "|([" + NARROW + "]+)"  # 5: text
    "|\x1b\\]([\x20-\x4f\x51\x53-\x7e])([^\x07\x1b\x9c]*)(?:\x07|\x1b\\\\)"  # 6-7: an OSC
    "|([\r\n]{2,})"  # 8: CRs and LFs (a TUI's way down its rows)
    "|([\r\n\x0b\x0c\x08\x09\x07])"  # 9: a control
)
# a run of two CUPs or more, each with its text (a TUI's repaint of the rows it changed)
PLACED_RUN = re.compile("(?:\x1b\\[[0-9]{1,4};[0-9]{1,4}H[" + NARROW + "]*){2,}")
# a run of two CHAs or more, each with its text (a row's changed words, the spaces between them
# skipped), and one of them
COLUMNS_RUN = re.compile("(?:\x1b\\[[0-9]{1,4}G[" + NARROW + "]*){2,}")
COLUMN = re.compile("\x1b\\[([0-9]+)G([" + NARROW + "]*)")
PLACED = re.compile("\x1b\\[([0-9]+);([0-9]+)H([" + NARROW + "]*)")  # one CUP of a run of them
MOVES = frozenset("ABCDEFGdea'")  # CSI finals that only move the cursor
MODES = frozenset("hl")
CELL_MODES = {DECCOLM, DECSCNM}  # modes whose change rewrites cells
STYLES = 255  # style ids kept aside (one byte each)
MAX = 9999  # pyte's cap on a CSI parameter
SGR_KEPT = 4096  # SGR results remembered (the lot is forgotten past it)
SAME = re.compile(rb"([^\x00])\1*")  # a run of cells kept aside in one style


class Redraw:
    """The fast reader of one pyte stream (``attach``: None when pyte's internals are not the
    ones this was written against; then pyte parses everything)."""

    def __init__(self, stream: pyte.ByteStream) -> None:
        self.stream = stream
        listener: Any = stream.listener  # emulator.Tolerant, pyte's screen under it
        self.screen: pyte.Screen = listener._screen
        self.csi = {final: getattr(listener, name) for final, name in pyte.Stream.csi.items()}
        self.debug = listener.debug
        self.draw = listener.draw
        self.set_icon_name, self.set_title = listener.set_icon_name, listener.set_title
        self.basic = {char: getattr(listener, name) for char, name in pyte.Stream.basic.items()}
        self.ids: dict[Any, int] = {}  # a style (pyte's cursor attrs) -> its id, from 1
        self.cells: list[dict[str, Any]] = [{}]  # id -> the cell of each character in it
        self.chars: dict[int, list[str]] = {}  # row -> the character kept aside per column
        self.kept: dict[int, bytearray] = {}  # row -> the style id per column (0: none)
        self._sized = (0, 0)
        # (a style, an SGR's parameters, DECSCNM) -> the style it makes: pyte's
        # select_graphic_rendition is a function of those, and a TUI sets the same few styles
        # over and over
        self.sgr: dict[tuple[Any, str, bool], Any] = {}
        self._lines: dict[str, int] = {}
        self._columns: dict[str, int] = {}

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
        csi = self.csi
        match, parse = TOKEN.match, pyte.Stream.feed
        rows, kept, sgr = self.chars, self.kept, self.sgr
        at, end = 0, len(text)
        while at < end and not stream._taking_plain_text:  # inside a sequence from before
            parse(stream, text[at])
            at += 1
        cursor, plain, decom, last, columns = self._state()
        style, fill = 0, b""  # the cursor's style id (0: not looked up since it may have changed)
        while at < end:
            token = match(text, at)
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
            if kind == 4:  # a CSI, and the text after it
                private, params, final, run = token.group(1, 2, 3, 4)
                if private:
                    self._private(final, _params(params))
                    cursor, plain, decom, last, columns = self._state()
                    style = 0
                elif final in "ABCDG" and ";" not in params:  # CUU, CUD, CUF, CUB or CHA as
                    n = min(int(params), MAX) if params else 0  # pyte moves (or not) the cursor
                    if final == "G" and plain and params and run:  # a run of CHAs and texts?
                        placed = COLUMNS_RUN.match(text, token.start())
                        if placed is not None:
                            if not style:
                                style = self._style(cursor.attrs)
                                fill = bytes((style,)) * columns
                            done = self._column_run(
                                text, token.start(), placed.end(), columns, fill
                            )
                            if done > token.start():
                                at = done
                                continue
                    if final == "G" or final == "C" or final == "D":
                        if final == "G":
                            x = (n or 1) - 1
                        elif final == "C":
                            x = cursor.x + (n or 1)
                        else:  # pending wrap (just past the last column) counts as the last
                            x = (cursor.x - 1 if cursor.x == columns else cursor.x) - (n or 1)
                        cursor.x = x if 0 <= x < columns else (0 if x < 0 else columns - 1)
                    else:
                        margins = screen.margins
                        if final == "B":
                            cursor.y = min(cursor.y + (n or 1), margins.bottom if margins else last)
                        else:
                            cursor.y = max(cursor.y - (n or 1), margins.top if margins else 0)
                elif final == "m":  # SGR: the style it makes of the cursor's, once per pair
                    # (and per DECSCNM, which pyte's default style, an SGR 0, reads)
                    key = (cursor.attrs, params, DECSCNM in screen.mode)
                    made = sgr.get(key)
                    if made is None:
                        csi["m"](*_params(params))
                        made = sgr[key] = cursor.attrs
                        if len(sgr) > SGR_KEPT:
                            sgr.clear()
                    else:
                        cursor.attrs = made
                    style = 0
                elif (final == "H" or final == "f") and params.count(";") < 2:  # CUP
                    line, _, column = params.partition(";")
                    if decom:
                        csi["H"](_param(line), _param(column))
                    else:
                        if final == "H" and plain and line and column:  # a run of CUPs, each
                            placed = PLACED_RUN.match(text, token.start())  # with its text
                            if placed is not None:
                                if not style:
                                    style = self._style(cursor.attrs)
                                    fill = bytes((style,)) * columns
                                done = self._placed(
                                    text, token.start(), placed.end(), last, columns, fill
                                )
                                if done > token.start():
                                    at = done
                                    continue
                        y = _param(line) - 1
                        cursor.y = y if 0 <= y <= last else (0 if y < 0 else last)
                        x = _param(column) - 1
                        cursor.x = x if 0 <= x < columns else (0 if x < 0 else columns - 1)
                else:
                    args = _params(params)
                    if final in MOVES:
                        csi[final](*args)
                    elif final in MODES:
                        csi[final](*args)
                        cursor, plain, decom, last, columns = self._state()
                    elif final == "K" and plain and len(args) == 1 and args[0] < 3:
                        if cursor.x < screen.columns:
                            self._erase(args[0])
                        else:  # pending wrap: pyte's erase reaches past the last column
                            self.flush()
                            csi[final](*args)
                    else:
                        self.flush()
                        csi.get(final, self.debug)(*args)
                        cursor, plain, decom, last, columns = self._state()
                    style = 0
                if not run:
                    continue
            elif kind == 5:
                run = token.group(5)
            elif kind == 8:  # CRs and LFs: down the rows at once where none scrolls
                run = token.group(8)
                margins = screen.margins
                bottom = margins.bottom if margins else last
                down = run.count("\n")
                if cursor.y + down <= bottom:
                    cursor.y += down
                    if down < len(run) or LNM in screen.mode:  # a CR, or LFs that are CRs too
                        cursor.x = 0
                    continue
                for char in run:
                    self._control(char, last)
                continue
            elif kind == 9:  # a control
                self._control(token.group(9), last)
                continue
            else:  # an OSC: pyte reads its first character as the code
                code, body = token.group(6, 7)
                if code in "01":
                    self.set_icon_name(body[1:])
                if code in "02":
                    self.set_title(body[1:])
                continue
            # text, alone or after a CSI
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

    def _private(self, final: str, args: list[int]) -> None:
        """A private CSI (``CSI ? ...``): modes as pyte sets them (flushing first for those that
        rewrite cells), the rest as pyte calls them."""
        csi = self.csi
        if final in MODES:
            if CELL_MODES & {arg << 5 for arg in args}:
                self.flush()
            csi[final](*args, private=True)
            return
        self.flush()
        csi.get(final, self.debug)(*args, private=True)

    def _control(self, char: str, last: int) -> None:
        """A control: CR and a line feed as pyte moves the cursor, a line feed that scrolls
        the region through pyte's index with the rows kept aside moving up with it; the rest:
        pyte's own methods."""
        screen = self.screen
        cursor = screen.cursor
        if char == "\r":
            cursor.x = 0
        elif char in "\n\x0b\x0c":
            margins = screen.margins
            bottom = margins.bottom if margins else last
            if cursor.y == bottom:
                if self.chars:
                    self._scroll(margins.top if margins else 0, bottom)
                self.basic[char]()
            else:
                cursor.y = min(cursor.y + 1, bottom)
                if LNM in screen.mode:
                    cursor.x = 0
        else:
            self.basic[char]()

    def _placed(self, text: str, start: int, end: int, last: int, columns: int, fill: bytes) -> int:
        """A run of CUPs, each with its text (most of a TUI's repaint), kept aside in one pass;
        where a text does not fit its row, the run stops before its CUP: returns where the run
        was read to."""
        cursor, rows, kept = self.screen.cursor, self.chars, self.kept
        lines, cols = self._numbers(last + 1, columns)
        x = y = done = 0
        for line, column, run in PLACED.findall(text, start, end):
            y = lines.get(line, -1)  # _place's, inline: a repaint's hottest loop (codex's)
            if y < 0:
                y = _clamp(line, last)
            x = cols.get(column, -1)
            if x < 0:
                x = _clamp(column, columns - 1)
            size = len(run)
            if x + size > columns:
                break
            done += 1
            if not size:
                continue
            chars = rows.get(y)
            if chars is None:
                chars = self._row(y)
            chars[x : x + size] = run
            kept[y][x : x + size] = fill[:size]
            x += size
        else:
            cursor.x, cursor.y = x, y
            return end
        at = start
        for item in itertools.islice(PLACED.finditer(text, start, end), done):
            at = item.end()
            line, column, run = item.groups()
            cursor.y, cursor.x = _clamp(line, last), _clamp(column, columns - 1) + len(run)
        return at

    def _column_run(self, text: str, start: int, end: int, columns: int, fill: bytes) -> int:
        """A run of CHAs on the cursor's row, each with its text, kept aside in one pass; where
        a text does not fit the row, the run stops before its CHA: returns where the run was
        read to."""
        cursor, done = self.screen.cursor, start
        chars = self.chars.get(cursor.y)
        if chars is None:
            chars = self._row(cursor.y)
        kept = self.kept[cursor.y]
        numbers = self._numbers(self.screen.lines, columns)[1]
        for item in COLUMN.finditer(text, start, end):
            column, run = item.groups()
            x, size = _place(numbers, column, columns - 1), len(run)
            if x + size > columns:
                break
            chars[x : x + size] = run
            kept[x : x + size] = fill[:size]
            cursor.x = x + size
            done = item.end()
        return done

    def _scroll(self, top: int, bottom: int) -> None:
        """The rows kept aside as pyte's ``index`` moves the buffer's when the region from row
        ``top`` to ``bottom`` scrolls up by one: each row in it up by one, the top one gone."""
        chars, kept = self.chars, self.kept
        moved = [(y, chars[y], kept[y]) for y in chars if top <= y <= bottom]
        for y, _, _ in moved:
            del chars[y], kept[y]
        for y, row, styles in moved:
            if y > top:
                chars[y - 1], kept[y - 1] = row, styles

    def _numbers(self, lines: int, columns: int) -> tuple[dict[str, int], dict[str, int]]:
        """A CUP's row and column parameters (as written, no leading zero) and where they put
        the cursor, for the screen's size."""
        if self._sized != (lines, columns):
            self._sized = (lines, columns)
            self._lines = {str(n + 1): n for n in range(lines)}
            self._columns = {str(n + 1): n for n in range(columns)}
        return self._lines, self._columns

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
        """Put the cells kept aside into pyte's buffer: each run of one style at once."""
        if not self.kept:
            return
        screen = self.screen
        buffer, dirty, styles = screen.buffer, screen.dirty, self.cells
        attrs: dict[int, Any] | None = None
        for y, kept in self.kept.items():
            chars, line = self.chars[y], buffer[y]
            for run in SAME.finditer(kept):
                start, stop = run.span()
                style = kept[start]
                cells = styles[style]
                if not cells:
                    if attrs is None:
                        attrs = {style: attr for attr, style in self.ids.items()}
                    cells = styles[style] = Cells(attrs[style])
                placed = map(cells.__getitem__, chars[start:stop])
                line.update(zip(range(start, stop), placed, strict=True))
            dirty.add(y)
        self.kept.clear()
        self.chars.clear()


class Cells(dict[str, Any]):
    """The cell of each character in one style, made once."""

    def __init__(self, attrs: Any) -> None:
        super().__init__()
        self._attrs = attrs

    def __missing__(self, char: str) -> Any:
        cell = self[char] = self._attrs._replace(data=char)
        return cell


def _place(numbers: dict[str, int], text: str, last: int) -> int:
    """A CUP's or CHA's parameter as pyte places the cursor by it: looked up among those
    written without a leading zero, else ``_clamp``."""
    place = numbers.get(text, -1)
    return place if place >= 0 else _clamp(text, last)


def _clamp(text: str, last: int) -> int:
    """A CUP's parameter as pyte places the cursor by it (1 and 0 are the first, at most
    ``last``)."""
    value = min(int(text), MAX) - 1
    return value if 0 <= value <= last else (0 if value < 0 else last)


def _param(text: str | None) -> int:
    return min(int(text), MAX) if text else 0


def _params(text: str) -> list[int]:
    """A CSI's parameters as pyte's parser reads them (an empty one is 0, each at most 9999)."""
    return [min(int(p), MAX) if p else 0 for p in text.split(";")]
