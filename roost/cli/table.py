"""Plain text tables for ``ls`` and the like: values people copy are never cut.

Each column is as wide as its widest cell. When the table is wider than the terminal, only the
columns marked ``shrink`` (names, states) give way, down to their ``floor``, their cells ending in
``…``; ids and provider session ids are printed whole even if the line then runs past the edge.
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


def terminal_width() -> int | None:
    """The terminal's width when stdout is one, else None (no limit)."""
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size((100, 24)).columns


def render(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None) -> str:
    widths = [max([len(c.title), *(cell_len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    if width is not None:
        widths = _fit(columns, widths, width)
    lines = [_line([c.title for c in columns], widths)]
    lines += [_line(row, widths) for row in rows]
    return "\n".join(lines)


def _fit(columns: Sequence[Column], widths: list[int], width: int) -> list[int]:
    """Take the excess from the shrinking columns, widest first, never below their floor."""
    excess = sum(widths) + len(GAP) * (len(widths) - 1) - width
    widths = list(widths)
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
