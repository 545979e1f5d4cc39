"""``make bench``: every performance figure against its baseline, measured in one run; one table.

Prints the table (figure, measure, roost, baseline, ratio, target, met), writes it as JSON
(``--out``, default bench/last.json) and, for a run of every figure, into bench/README.md with
the date, the machine and its load. Never fails on a figure: a target missed is a row saying
``NO``. It exits 1 only when a figure could not be measured at all (the row says why).

    .venv/bin/python bench/run.py [--quick | --full] [--only broker,prompt,...] [--out PATH]
"""

from __future__ import annotations

import argparse
import compileall
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import fig_broker
import fig_cli
import fig_events
import fig_output
import fig_prompt
import fig_screen
import fig_session
import table
from harness import MODES, Mode, Row

HERE = Path(__file__).resolve().parent
Figure = Callable[[Path, Mode, dict[str, str]], list[Row]]
FIGURES: dict[str, Figure] = {
    "broker": fig_broker.run,
    "prompt": fig_prompt.run,
    "session": fig_session.run,
    "output": fig_output.run,
    "events": fig_events.run,
    "cli": fig_cli.run,
    "screen": fig_screen.run,
}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a short run (smoke)")
    size.add_argument("--full", action="store_true", help="also 200 sessions, 10k records, growth")
    parser.add_argument(
        "--only", action="append", default=[], help="figures: " + ", ".join(FIGURES)
    )
    parser.add_argument("--out", type=Path, default=HERE / "last.json", help="the JSON table")
    parser.add_argument(
        "--readme",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep the table in bench/README.md (default: when every figure ran)",
    )
    args = parser.parse_args(argv)
    args.only = [n for item in args.only for n in item.split(",") if n]
    unknown = sorted(set(args.only) - set(FIGURES))
    if unknown:
        parser.error(f"unknown figure(s) {unknown}; choose from {sorted(FIGURES)}")
    return args


def measure(names: list[str], mode: Mode) -> tuple[list[Row], bool]:
    rows: list[Row] = []
    ok = True
    env = dict(os.environ)
    for name in names:
        started = time.perf_counter()
        print(f"# {name} ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="rb-") as tmp:  # short: ipc paths are bounded
            try:
                rows.extend(FIGURES[name](Path(tmp), mode, env))
            except Exception as err:  # a figure that could not be measured: say so, go on
                traceback.print_exc()
                rows.append(
                    Row(name, "could not be measured", None, note=f"{type(err).__name__}: {err}")
                )
                ok = False
        print(f"# {name}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return rows, ok


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    mode = MODES["quick" if args.quick else "full" if args.full else "default"]
    names = args.only or list(FIGURES)
    meta = {"date": table.stamp(), "mode": mode.name, "figures": names, "machine": table.machine()}
    # What is measured is roost as installed, not Python compiling it: bytecode for every module
    # (an edited tree, or PYTHONDONTWRITEBYTECODE, would otherwise compile each process's
    # imports at every start, in the CLI's wall time and in every supervisor's).
    compileall.compile_dir(HERE.parent / "roost", quiet=1)
    meta["load_before"] = table.load()
    started = time.perf_counter()
    rows, ok = measure(names, mode)
    meta["took_s"] = round(time.perf_counter() - started, 1)
    meta["load_after"] = table.load()
    print(table.text(rows))
    print(
        f"{meta['date']}, {mode.name}, {meta['took_s']:.0f} s; load average "
        f"{meta['load_before']} before, {meta['load_after']} after"
    )
    table.write_json(args.out, rows, meta)
    if args.readme if args.readme is not None else not args.only:
        table.write_readme(HERE / "README.md", rows, meta)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
