"""Plain text tables for ``ls`` and the like: values people copy are never cut.

Each column is as wide as its widest cell. When the table is wider than the terminal, it gives
way in rank order, what a person needs least first: the columns with a ``drop`` rank are left
out whole, lowest rank first, and from its ``give`` rank a ``shrink`` column may be cut down to
its ``soft`` width, its cells ending in ``…`` (``ls``: the generation, the mode, long names down
to 24 cells, then the provider session id). Only when all of that is not enough are the shrink
columns cut down to their ``floor`` (names, then states and their reason). Ids and provider
session ids are never cut: left out, or printed whole even if the line then runs past the edge.
Headers are one line each, so a long value never wraps a header. Off a terminal (a pipe, a file)
nothing is shrunk at all.

Light to import (``roost ls``'s fast path prints with it): no dataclasses, no shutil, and rich's
cell widths only for text that is not plain printable ASCII, whose width is its length.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: its import costs roost ls's fast path ~4 ms (mypy reads it)
if TYPE_CHECKING:
    from collections.abc import Sequence  # (collections itself costs that path ~4 ms more)

GAP = "  "


class Column:
    """A column's title and how it gives way to a narrow terminal."""

    __slots__ = ("drop", "floor", "give", "shrink", "soft", "title")

    def __init__(
        self,
        title: str,
        shrink: bool = False,
        floor: int = 8,
        drop: int = 0,
        soft: int = 0,
        give: int = 0,
    ) -> None:
        self.title = title
        self.shrink = shrink
        self.floor = floor  # the narrowest a shrinking column gets, as a last resort
        self.drop = drop  # 1, 2, ...: left out in this order (with ``give``); 0: never
        self.soft = soft  # a shrinking column cut to this width from rank ``give`` on; 0: never
        self.give = give


def terminal_width() -> int | None:
    """The terminal's width when stdout is one, else None (no limit): ``COLUMNS`` if set, else
    the terminal's, else 100 (what ``shutil.get_terminal_size((100, 24))`` says, without
    shutil's import)."""
    if not sys.stdout.isatty():
        return None
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ else -1
        return os.get_terminal_size(fd).columns or 100
    except (AttributeError, ValueError, OSError):
        return 100


def _single_cells(text: str) -> bool:
    """Every character one cell wide: printable ASCII (rich's widths agree; they are looked up
    only for anything else)."""
    return text.isascii() and text.isprintable()


def cell_len(text: str) -> int:
    if _single_cells(text):
        return len(text)
    from rich.cells import cell_len as rich_cell_len

    return rich_cell_len(text)


def set_cell_size(text: str, total: int) -> str:
    """``text`` cropped or padded with spaces to ``total`` cells, as rich's ``set_cell_size``."""
    if _single_cells(text):
        return text + " " * (total - len(text)) if len(text) < total else text[:total]
    from rich.cells import set_cell_size as rich_set_cell_size

    return rich_set_cell_size(text, total)


def render(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None) -> str:
    widths = [max([len(c.title), *(cell_len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    keep = list(range(len(columns)))
    fitted = widths
    if width is not None:
        ranks = {c.drop for c in columns if c.drop} | {c.give for c in columns if c.soft}
        for rank in [0, *sorted(ranks - {0})]:
            keep = [i for i in keep if not rank or columns[i].drop != rank]
            lows = [_soft(columns[i], widths[i], rank) for i in keep]
            fitted = _shrink([widths[i] for i in keep], lows, width)
            if _total(fitted) <= width:
                break
        else:  # the last resort: the shrink columns down to their floor
            lows = [_low(columns[i], widths[i], columns[i].floor) for i in keep]
            fitted = _shrink([widths[i] for i in keep], lows, width)
    lines = [_line([columns[i].title for i in keep], fitted)]
    lines += [_line([row[i] for i in keep], fitted) for row in rows]
    return "\n".join(lines)


def _total(widths: Sequence[int]) -> int:
    return sum(widths) + len(GAP) * (len(widths) - 1)


def _soft(column: Column, width: int, rank: int) -> int:
    """How narrow ``column`` may get at ``rank``: its soft width once its rank has come."""
    return _low(column, width, column.soft) if column.soft and rank >= column.give else width


def _low(column: Column, width: int, low: int) -> int:
    return min(width, max(low, len(column.title))) if column.shrink else width


def _shrink(widths: list[int], lows: Sequence[int], width: int) -> list[int]:
    """Take the excess from the columns above their low, widest first."""
    widths = list(widths)
    excess = _total(widths) - width
    while excess > 0:
        candidates = [i for i, w in enumerate(widths) if w > lows[i]]
        if not candidates:
            break
        widest = max(candidates, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return widths


def _cell(text: str, width: int) -> str:
    """``text`` in exactly ``width`` terminal cells (wide characters count two)."""
    if cell_len(text) <= width:
        return set_cell_size(text, width)
    return set_cell_size(text, width - 1) + "…"


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return GAP.join(_cell(text, w) for text, w in zip(cells, widths, strict=True)).rstrip()
