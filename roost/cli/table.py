"""Plain text tables for ``ls`` and the like: values people copy are never cut.

Each column is as wide as its widest cell. When the table is wider than the terminal, the columns
marked ``shrink`` (names, states) give way first, down to their ``floor``, their cells ending in
``…``; then the columns with a ``drop`` rank are left out, lowest rank first (``ls``: the
generation, then the mode). Ids and provider session ids are printed whole, even if the line then
runs past the edge.
Headers are one line each, so a long value never wraps a header. Off a terminal (a pipe, a file)
nothing is shrunk at all.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size

GAP = "  "


@dataclass(frozen=True)
class Column:
    title: str
    shrink: bool = False
    floor: int = 8  # the narrowest a shrinking column gets
    drop: int = 0  # 1, 2, ...: left out in this order when shrinking is not enough; 0: never


def terminal_width() -> int | None:
    """The terminal's width when stdout is one, else None (no limit)."""
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size((100, 24)).columns


def render(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None) -> str:
    widths = [max([len(c.title), *(cell_len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    keep = list(range(len(columns)))
    fitted = widths
    if width is not None:
        for rank in [0, *sorted({c.drop for c in columns if c.drop})]:
            keep = [i for i in keep if not rank or columns[i].drop != rank]
            fitted = _shrink([columns[i] for i in keep], [widths[i] for i in keep], width)
            if _total(fitted) <= width:
                break
    else:
        fitted = widths
    lines = [_line([columns[i].title for i in keep], fitted)]
    lines += [_line([row[i] for i in keep], fitted) for row in rows]
    return "\n".join(lines)


def _total(widths: Sequence[int]) -> int:
    return sum(widths) + len(GAP) * (len(widths) - 1)


def _shrink(columns: Sequence[Column], widths: list[int], width: int) -> list[int]:
    """Take the excess from the shrinking columns, widest first, never below their floor."""
    widths = list(widths)
    excess = _total(widths) - width
    while excess > 0:
        candidates = [
            i for i, c in enumerate(columns) if c.shrink and widths[i] > max(c.floor, len(c.title))
        ]
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
