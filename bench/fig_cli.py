"""Figure 6, the CLI's start: ``roost ls`` against a running node with a few records, wall time
(median of ``Mode.cli_runs``), against ``python -c pass`` of the same interpreter, in this run;
beside it the same through the click CLI (``ROOST_NO_QUICK=1``: what every other command's
start costs) and the libraries each path cannot do without."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import Mode, Row, running_node, spawn_many

FIG = "6 cli"
QUICK_FLOOR = "import _socket, _struct"  # what roost ls's fast path needs before its own code
FLOOR = "import click, zmq, msgpack, json, pathlib"  # what the click CLI needs before its own


def wall(argv: list[str], env: dict[str, str], runs: int) -> float:
    """Median wall seconds of ``argv`` (it must succeed)."""
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL)
        out.append(time.perf_counter() - start)
    return statistics.median(out)


def run(root: Path, mode: Mode, env: dict[str, str]) -> list[Row]:
    script = Path(sys.executable).with_name("roost")
    roost = [str(script)] if script.exists() else [sys.executable, "-m", "roost"]
    with running_node(root, "cli") as node:
        spawn_many(node, [node.spawn_body(f"c{i}") for i in range(3)], threads=3)
        wall([*roost, "ls"], node.env, 1)  # warm the page cache
        ls = wall([*roost, "ls"], node.env, mode.cli_runs)
        clicked = wall([*roost, "ls"], {**node.env, "ROOST_NO_QUICK": "1"}, mode.cli_runs)
        bare = wall([sys.executable, "-c", "pass"], env, mode.cli_runs)
        quick_floor = wall([sys.executable, "-c", QUICK_FLOOR], env, mode.cli_runs)
        floor = wall([sys.executable, "-c", FLOOR], env, mode.cli_runs)
    return [
        Row(
            FIG,
            "roost ls, wall ms",
            ls * 1e3,
            bare * 1e3,
            "<= 60 ms",
            ls * 1e3 <= 60,
            "vs python -c pass",
        ),
        Row(
            FIG,
            "the libraries of its fast path alone (_socket, _struct), wall ms",
            quick_floor * 1e3,
            bare * 1e3,
            note="vs python -c pass: what roost ls cannot go below",
        ),
        Row(
            FIG,
            "roost ls through the click CLI (ROOST_NO_QUICK=1, as every other command), wall ms",
            clicked * 1e3,
            bare * 1e3,
            note="vs python -c pass",
        ),
        Row(
            FIG,
            "the click CLI's libraries alone (click, zmq, msgpack, json, pathlib), wall ms",
            floor * 1e3,
            bare * 1e3,
            note="vs python -c pass: what a command through click cannot go below",
        ),
    ]
