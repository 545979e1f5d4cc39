"""Figure 3, the cost of a session, and figure 7, how it grows.

Live echo sessions are spawned in steps (``Mode.levels``: 1, 16, 64, 200 with ``--full``), six
clients in parallel; a private tmux server gets as many sessions (each a screen of text, then
``cat``) beside them. At each step, over one window: the idle CPU of the node (daemon, state store,
adapter host) and its supervisors, against the tmux server's; the median RSS/USS/PSS of a
supervisor against a bare pyzmq asyncio actor process (bench/bare_actor.py) and tmux's memory per
session; with ``--full`` also figure 1's ``node.claim`` and figure 2's prompt at that many
sessions. Then idle nodes holding ``Mode.dormant`` dormant records (made in bulk, bench/store.py)
against an empty node, in the same window. Growth is the log-log slope between the two largest
steps: 1 is linear, above 1 grows faster than linear.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import fig_broker
import fig_growth
import psutil
import store
from fig_broker import Hop
from harness import (
    BenchNode,
    Helper,
    Mode,
    Row,
    Tmux,
    idle_cpu,
    memory,
    quietest_idle,
    running_node,
    settled,
    spawn_many,
    tmux_server,
)

FIG = "3 session"
SETTLE_S = 2.0  # after a step: the supervisors' start-up work (screens, classification) ends
LIVE_TARGET_S = 15.0  # 200 sessions live within 15 s
TMUX_MEMORY_SESSIONS = 50
SCREENFUL = "head -c 10000 /dev/zero | tr '\\0' x; exec cat"  # a 200x50 screen of text, then idle


class Steps:
    """Live sessions and tmux sessions grown together, step by step."""

    def __init__(self, node: BenchNode, tmux: Tmux) -> None:
        self.node, self.tmux = node, tmux
        self.records: list[str] = []
        self.spawn_s = self.tmux_s = 0.0

    def grow(self, level: int) -> None:
        bodies = [self.node.spawn_body(f"s{i}") for i in range(len(self.records), level)]
        start = time.perf_counter()
        self.records += [r["id"] for r in spawn_many(self.node, bodies)]
        self.spawn_s += time.perf_counter() - start
        start = time.perf_counter()
        for i in range(self.tmux.count, level):
            self.tmux.new(f"s{i}", SCREENFUL)
        self.tmux_s += time.perf_counter() - start


def uss(proc: psutil.Process) -> float:
    return float(proc.memory_full_info().uss) / 2**20


def tmux_memory(root: Path, n: int = TMUX_MEMORY_SESSIONS) -> float:
    """MiB of USS a tmux server takes per session: its growth from 1 to ``n + 1`` sessions."""
    with tmux_server(root) as tmux:
        tmux.new("m", SCREENFUL)
        server = tmux.server()
        before = uss(server)
        for i in range(n):
            tmux.new(f"m{i}", SCREENFUL)
        return (uss(server) - before) / n


def bare_actor(root: Path, env: dict[str, str]) -> dict[str, float]:
    actor = Helper("bare_actor.py", f"ipc://{root}/nowhere", env=env)
    try:
        time.sleep(0.5)  # let it reach its loop
        return memory([actor.proc.pid])
    finally:
        actor.stop()


def step(steps: Steps, level: int, mode: Mode, hop: Hop | None) -> dict[str, float]:
    """One step's figures: idle CPU (roost, tmux), memory, and with growth the request paths."""
    steps.grow(level)
    time.sleep(SETTLE_S)
    node, server = steps.node, steps.tmux.server()
    sups = [psutil.Process(pid) for pid in node.supervisors()]
    procs = node.node_processes() + sups  # asked before the window (see dormant())
    settled(procs, below=2.0)
    roost_idle, tmux_idle = quietest_idle([procs, [server]], mode.idle_s, mode.idle_rounds)
    got = {"idle": roost_idle, "tmux_idle": tmux_idle, **memory([s.pid for s in sups])}
    if hop is not None:
        got.update(fig_growth.paths(node, hop, steps.records[0], mode))
    return got


def level_rows(level: int, got: dict[str, float], bare: dict[str, float]) -> list[Row]:
    """Idle CPU and a supervisor's memory at ``level`` live sessions."""
    at = f"{level} live"
    note = "" if level >= 200 else "target is for 200"
    rows = [
        Row(
            FIG,
            f"idle CPU, {at}, % of a core",
            got["idle"],
            got["tmux_idle"],
            "<= 2 %",
            got["idle"] <= 2,
            note,
        ),
        Row(
            FIG,
            f"supervisor USS, {at}, MiB",
            got["uss"],
            bare["uss"],
            "<= 10 MiB",
            got["uss"] <= 10,
            "vs bare actor",
        ),
        Row(FIG, f"supervisor RSS, {at}, MiB", got["rss"], bare["rss"]),
        Row(FIG, f"supervisor PSS, {at}, MiB", got["pss"], bare["pss"]),
    ]
    return rows


def zygote_rows(node: BenchNode) -> list[Row]:
    """What the node's fork server costs once (its supervisors share its pages)."""
    zygote = node.status()["actors"].get("zygote") or {}
    if not zygote.get("pid"):
        return [Row(FIG, "zygote USS, MiB", str(zygote.get("health", "absent")), note="none")]
    got = memory([zygote["pid"]])
    note = "once per node, shared by its supervisors"
    return [
        Row(FIG, "zygote USS, MiB", got["uss"], None, note=note),
        Row(FIG, "zygote RSS, MiB", got["rss"], None, note=note),
    ]


def live(root: Path, mode: Mode, env: dict[str, str]) -> list[Row]:
    bare = bare_actor(root, env)
    rows = [
        Row(FIG, "tmux USS per session, MiB", tmux_memory(root), None, note="its server's growth")
    ]
    growth: list[Row] = []
    by_level: dict[int, dict[str, float]] = {}
    with contextlib.ExitStack() as stack:
        tmux = stack.enter_context(tmux_server(root))
        node = stack.enter_context(running_node(root, "live"))
        hop = stack.enter_context(fig_broker.bare_hop(root, env)) if mode.growth else None
        steps = Steps(node, tmux)
        for level in mode.levels:
            by_level[level] = got = step(steps, level, mode, hop)
            rows += level_rows(level, got, bare)
            growth += fig_growth.rows_at(level, got) if hop is not None else []
        rows += zygote_rows(node)
        n = len(steps.records)
        allowed = LIVE_TARGET_S * n / 200
        rows.append(
            Row(
                FIG,
                f"time until {n} sessions live, s",
                steps.spawn_s,
                steps.tmux_s,
                "<= 15 s at 200",
                steps.spawn_s <= allowed,
                "vs tmux new-session" + ("" if n == 200 else f"; pro rata {allowed:.2g} s"),
            )
        )
        stop_start = time.perf_counter()
        node.stop()
        rows.append(
            Row(
                FIG,
                f"node stop --stop-sessions, {n} live, s",
                time.perf_counter() - stop_start,
                None,
            )
        )
    return rows + growth + fig_growth.slopes(by_level)


def dormant(root: Path, mode: Mode, env: dict[str, str]) -> list[Row]:
    rows: list[Row] = []
    by_count: dict[int, dict[str, float]] = {}
    with running_node(root, "empty") as empty:
        base = empty.node_processes()
        for count in mode.dormant:
            node = BenchNode(root, f"dormant{count}")
            made = store.build(node.state_dir, node.workdir, count)
            try:
                node.up()
                time.sleep(SETTLE_S)
                # Asked once, before the window: `node status` itself costs the node and the state
                # store work that grows with the records (hundreds of ms at 10k), which must not
                # land in the window; nor the start-up's loading of the records.
                procs = node.node_processes()
                settled(procs)
                held, none = idle_cpu([procs, base], mode.idle_s)
            finally:
                node.stop()
            by_count[count] = {"dormant_idle": held}
            rows += [
                Row(
                    FIG,
                    f"idle CPU, {count} dormant records, % of a core",
                    held,
                    none,
                    "<= 0.5 %",
                    held <= 0.5,
                    "vs empty node",
                ),
                Row(
                    FIG,
                    f"{count} dormant records made, s",
                    made,
                    None,
                    note="bulk insert, node down",
                ),
            ]
    return rows + fig_growth.slopes(by_count, "dormant")


def run(root: Path, mode: Mode, env: dict[str, str]) -> list[Row]:
    return live(root, mode, env) + dormant(root, mode, env)
