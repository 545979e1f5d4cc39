"""Which bytes of scrolling text can still be on the screen: the rule that lets the terminal skip
most of a flood (``cat`` of a big file, a build log) without changing what the screen shows.

A *run* is text that only draws, moves the cursor along its row or down, styles (SGR) and erases
in the row (EL): printable ASCII and UTF-8 (no C1 control), TAB, BS, BEL, CR, LF, ``CSI ... m``
and ``CSI [012] K``. Inside a run nothing changes but the cursor, the rows it passes and the
current style; nothing moves the cursor up, and only the region's rows scroll.

From a point of the run where the cursor is inside the scrolling region of ``height`` rows (below
its top row), ``height - 1`` line feeds bring it to the region's bottom row, whatever row it was
on. After a CR LF it stands at column 0 of that row. From there, ``height`` more line feeds scroll
every row of the region away, so the rows the screen then shows are drawn by those last lines
alone. Everything between the two points (the cut) can be skipped: the screen afterwards is the
same once the style is what the skipped text left (its SGRs, ``styles``) and the cursor stands at
the start of the bottom row. ``cut`` finds the latest such point; the terminal feeds the rest.
"""

from __future__ import annotations

import re

RUN = re.compile(
    rb"(?:[\x07-\x0a\x0d\x20-\x7e\x80-\xc1\xc3-\xff]++|\xc2[\xa0-\xbf]|\x1b\[[0-9;]*+m|\x1b\[[012]?K)++"
)
SGR = re.compile(rb"\x1b\[[0-9;]*m")
MIN_SKIP = 2048  # fewer bytes than this are fed: skipping them saves less than it costs


def runs(data: bytes, start: int = 0) -> list[tuple[int, int]]:
    """The spans of the runs in ``data`` from ``start`` long enough to skip part of."""
    spans = []
    for match in RUN.finditer(data, start):
        begin, end = match.span()
        if end - begin >= MIN_SKIP:
            spans.append((begin, end))
    return spans


def cut(data: bytes, start: int, end: int, height: int) -> int | None:
    """Where to resume feeding when ``data[start:end]`` (all of one run, the cursor inside a
    region of ``height`` rows at ``start``) is skipped up to there; None when nothing can be.

    The point follows a CR LF, has at least ``height - 1`` line feeds before it (from
    ``start``) and ``height`` after it (up to ``end``): the latest such point."""
    if height < 2:
        return None
    at = end
    for _ in range(height):
        at = data.rfind(b"\n", start, at)
        if at < 0:
            return None
    crlf = data.rfind(b"\r\n", start, at)
    if crlf < 0:
        return None
    point = crlf + 2
    if point - start < MIN_SKIP or data.count(b"\n", start, point) < height - 1:
        return None
    return point


def styles(data: bytes, start: int, end: int) -> bytes:
    """The SGRs of ``data[start:end]`` that decide the style after it: each distinct one at its
    last place, in order. An SGR sets each attribute it names to one value (reset names all), so
    a repeated one adds nothing to its last repetition, and what an attribute ends as is set by
    the last SGR naming it, which this keeps in place."""
    last: dict[bytes, None] = {}
    for sgr in SGR.findall(data, start, end):
        last.pop(sgr, None)
        last[sgr] = None
    return b"".join(last)
