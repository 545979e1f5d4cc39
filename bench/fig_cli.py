"""Figure 6, the CLI's start: ``roost ls`` against a running node with a few records, wall time
(median of ``Mode.cli_runs``), against ``python -c pass`` of the same interpreter, in this run;
beside it the same through the click CLI (``ROOST_NO_QUICK=1``: what a command the fast path
does not take costs) and the libraries each path cannot do without. Then what a script runs in
a loop, each on the fast path: ``prompt``, ``send``, ``key``, ``show`` (with and without
``--screen``), ``op`` and ``events --after N``, against ``python -c pass``; and the pair that
prompts a session and reads its screen (``prompt`` then ``show --screen``) against tmux's pair
(``send-keys`` then ``capture-pane -p``, on a private tmux server, a session running ``cat``)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import BenchNode, Mode, Row, running_node, spawn_many, tmux_server, wait_for

FIG = "6 cli"
QUICK_FLOOR = "import _socket, _struct"  # what roost ls's fast path needs before its own code
FLOOR = "import click, zmq, msgpack, json, pathlib"  # what the click CLI needs before its own


def wall(argv: list[str], env: dict[str, str], runs: int) -> float:
    """Median wall seconds of ``argv`` (it must succeed)."""
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, stdin=subprocess.DEVNULL)
        out.append(time.perf_counter() - start)
        if proc.returncode:
            raise RuntimeError(f"{argv[-3:]}: exit {proc.returncode}: {proc.stderr[-2000:]!r}")
    return statistics.median(out)


def wall_pair(first: list[str], second: list[str], env: dict[str, str], runs: int) -> float:
    """Median wall seconds of ``first`` then ``second``, run one after the other."""
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        for argv in (first, second):
            subprocess.run(argv, env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL)
        out.append(time.perf_counter() - start)
    return statistics.median(out)


def loop_commands(roost: list[str], rid: str) -> dict[str, list[str]]:
    """A script's loop, each command as it would type it (all on the fast path); ``N`` of
    ``events --after N`` is the log's last seq but 5 when it runs."""
    return {
        "prompt": [*roost, "prompt", rid, "hello"],
        "send": [*roost, "send", rid, "x"],
        "key": [*roost, "key", rid, "backspace"],
        "show": [*roost, "show", rid],
        "show --screen": [*roost, "show", rid, "--screen"],
        "op": [*roost, "op", "bench-op"],
        "events --after N": [*roost, "events", "--after", "N"],
    }


def last_seq(node: BenchNode) -> int:
    after = 0
    while events := node.cli("events", "--after", str(after), "--limit", "1000")["events"]:
        after = int(events[-1]["seq"])
    return after


def loop_rows(root: Path, mode: Mode, roost: list[str], node: BenchNode, bare: float) -> list[Row]:
    rid = node.cli("spawn", "echo", "--name", "loop", "--cwd", str(node.workdir))["record"]["id"]
    with node.client() as c:
        wait_for(
            lambda: (
                "echo-ready>"
                in (c.call("session.show", {"id": rid, "screen": True})["screen"] or "")
            ),
            30,
            "the echo agent's prompt",
        )
    node.cli("prompt", rid, "first", "--op", "bench-op")
    rows = []
    for name, argv in loop_commands(roost, rid).items():
        argv = [str(max(0, last_seq(node) - 5)) if arg == "N" else arg for arg in argv]
        ms = wall(argv, node.env, mode.cli_runs) * 1e3
        rows.append(
            Row(
                FIG,
                f"roost {name}, wall ms",
                ms,
                bare * 1e3,
                "<= 60 ms",
                ms <= 60,
                "vs python -c pass",
            )
        )
    prompt, screen = [*roost, "prompt", rid, "hello"], [*roost, "show", rid, "--screen"]
    pair = wall_pair(prompt, screen, node.env, mode.cli_runs)
    with tmux_server(root) as tmux:
        tmux.new("s", "cat")
        base = ["tmux", "-L", tmux.socket, "-f", "/dev/null"]
        keys, capture = (
            [*base, "send-keys", "-t", "s", "hello", "Enter"],
            [*base, "capture-pane", "-p", "-t", "s"],
        )
        wall_pair(keys, capture, tmux.env, 1)  # the server warm
        tmux_pair = wall_pair(keys, capture, tmux.env, mode.cli_runs)
    return [
        *rows,
        Row(
            FIG,
            "roost prompt + show --screen (a script's pair), wall ms",
            pair * 1e3,
            tmux_pair * 1e3,
            note="vs tmux send-keys + capture-pane (a private server)",
        ),
        Row(
            FIG,
            "the same pair, wall ms",
            pair * 1e3,
            2 * bare * 1e3,
            "<= 120 ms",
            pair * 1e3 <= 120,
            "vs two python -c pass",
        ),
    ]


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
        loop = loop_rows(root, mode, roost, node, bare)
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
            "roost ls through the click CLI (ROOST_NO_QUICK=1, as a command the fast path does "
            "not take), wall ms",
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
        *loop,
    ]
