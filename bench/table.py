"""The table of ``bench/run.py``: printed as text, written as JSON (bench/last.json) and kept as
Markdown in bench/README.md between two marker lines, with date, machine and load."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from harness import Row

COLUMNS = ("figure", "measure", "roost", "baseline", "ratio", "target", "met")
BEGIN, END = "<!-- last-run: begin -->", "<!-- last-run: end -->"


def number(value: float | str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if value == 0:
        return "0"
    size = abs(value)
    if size >= 100_000:
        return f"{value / 1000:,.0f}k"
    if size >= 100:
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 0.01:
        return f"{value:.3g}"
    return f"{value:.2e}"


def cells(row: Row) -> list[str]:
    met = {True: "yes", False: "NO", None: "-"}[row.met]
    ratio = "-" if row.ratio is None else f"{row.ratio:.3g}x"
    measure = f"{row.name} ({row.note})" if row.note else row.name
    return [
        row.figure,
        measure,
        number(row.roost),
        number(row.baseline),
        ratio,
        row.target or "-",
        met,
    ]


def machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
    }


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def text(rows: list[Row]) -> str:
    table = [list(COLUMNS), *(cells(r) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    right = {2, 3, 4}
    out = []
    for n, line in enumerate(table):
        out.append(
            "  ".join(
                c.rjust(w) if i in right else c.ljust(w)
                for i, (c, w) in enumerate(zip(line, widths, strict=True))
            ).rstrip()
        )
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def markdown(rows: list[Row], meta: dict[str, Any]) -> str:
    m = meta["machine"]
    head = (
        f"Run {meta['date']} ({meta['mode']}, {meta['took_s']:.0f} s) on {m['cores']} cores "
        f"({m['cpu']}), Python {m['python']}, {m['system']}; load average "
        f"{' / '.join(map(str, meta['load_before']))} before, "
        f"{' / '.join(map(str, meta['load_after']))} after (1 / 5 / 15 min)."
    )
    lines = [head, "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells(row)) + " |")
    return "\n".join(lines)


def document(rows: list[Row], meta: dict[str, Any]) -> dict[str, Any]:
    return {
        **meta,
        "columns": list(COLUMNS),
        "rows": [
            {
                "figure": r.figure,
                "measure": r.name,
                "roost": r.roost,
                "baseline": r.baseline,
                "ratio": r.ratio,
                "target": r.target,
                "met": r.met,
                "note": r.note,
            }
            for r in rows
        ],
    }


def write_json(path: Path, rows: list[Row], meta: dict[str, Any]) -> None:
    path.write_text(json.dumps(document(rows, meta), indent=1) + "\n")


def write_readme(path: Path, rows: list[Row], meta: dict[str, Any]) -> None:
    """Replace the table between the marker lines of bench/README.md with this run's."""
    doc = path.read_text()
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    path.write_text(doc[:start] + "\n" + markdown(rows, meta) + "\n" + doc[end:])


def stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M %Z")
