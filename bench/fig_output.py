"""Figure 4, terminal output: one program (bench/writer.py) writes ``Mode.output_mb`` MB to its
terminal as fast as it can, under tmux (a private server, a 200x50 session) and under roost (an
echo session of 200x50 whose agent runs the writer, see writer.py); its own wall time under
each, the supervisor's (and the daemon's) CPU seconds per MB against the tmux server's, whether
the transcript holds every byte the terminal carried and whether the screen shows the last line.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import writer
from harness import BenchNode, Mode, Row, Tmux, cpu_seconds, running_node, tmux_server, wait_for

FIG = "4 output"
PROMPT = "echo-ready>"  # the echo agent waits for input: from here on its terminal is quiet
WRITER = Path(__file__).with_name("writer.py")
HOOK = f"""import importlib.util
spec = importlib.util.spec_from_file_location("roost_bench_writer", {str(WRITER)!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.hook()
"""


def result(path: Path, timeout: float) -> dict[str, float] | None:
    try:
        wait_for(path.exists, timeout, "the writer's result", every=0.02)
    except RuntimeError:
        return None
    got: dict[str, float] = json.loads(path.read_text())
    return got


def under_tmux(root: Path, tmux: Tmux, total: int) -> dict[str, float]:
    tmux.new("keep", "cat")  # the server outlives the writer's session
    server = tmux.server()
    out = root / "tmux.json"
    before = cpu_seconds([server])
    tmux.new("w", f"{sys.executable} {WRITER} --bytes {total} --result {out}")
    got = result(out, 600)
    if got is None:
        raise RuntimeError("the writer did not finish under tmux in 600 s")
    wait_for(lambda: not tmux.alive("w"), 60, "the writer's tmux session to close")
    return {**got, "cpu": cpu_seconds([server]) - before}


def transcript_end(client: Any, record: str) -> int:
    return int(client.call("session.transcript", {"id": record, "limit": 1})["end"])


def screen_of(client: Any, record: str) -> str:
    return str(client.call("session.show", {"id": record, "screen": True}).get("screen") or "")


def reader(fifo: Path) -> int | None:
    """The FIFO opened for writing once the writer waits on it (that starts the writer)."""
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader yet
        return None


def under_roost(root: Path, node: BenchNode, total: int, cap: float) -> dict[str, Any]:
    """The writer in an echo session's agent; given up after ``cap`` seconds (its time is then
    projected from the bytes the supervisor had taken by then)."""
    hook, fifo, out = root / "hook.py", root / "go", root / "roost.json"
    hook.write_text(HOOK)
    os.mkfifo(fifo)
    env = {
        "ROOST_ECHO_PRELOAD": str(hook),
        "ROOST_BENCH_FIFO": str(fifo),
        "ROOST_BENCH_BYTES": str(total),
        "ROOST_BENCH_RESULT": str(out),
    }
    with node.client(timeout=60) as client:
        body = node.spawn_body("w", env=env, rows=50, cols=200)
        rec = client.call("session.spawn", body)["record"]["id"]
        sup, daemon = (
            psutil.Process(client.call("session.show", {"id": rec})["record"]["active"]["pid"]),
            node.daemon(),
        )
        wait_for(lambda: PROMPT in screen_of(client, rec), 30, "the echo agent's prompt")
        start_end = transcript_end(client, rec)
        before = cpu_seconds([sup]), cpu_seconds([daemon])
        os.close(wait_for(lambda: reader(fifo), 30, "the writer to wait on its FIFO"))
        begun = time.perf_counter()
        got = result(out, cap)
        want = start_end + writer.carried(total)
        if got is not None:  # then the supervisor has at most a pty buffer's worth to read
            with contextlib.suppress(RuntimeError):
                wait_for(lambda: transcript_end(client, rec) >= want, 60, "the output", every=0.1)
        taken = time.perf_counter() - begun
        kept = transcript_end(client, rec) - start_end
        cpu = cpu_seconds([sup]) - before[0], cpu_seconds([daemon]) - before[1]
        screen = screen_of(client, rec)
    return {
        "elapsed": got["elapsed"] if got else taken * (want - start_end) / max(kept, 1),
        "finished": got is not None,
        "cpu": cpu[0],
        "daemon_cpu": cpu[1],
        "kept": kept,
        "carried": want - start_end,
        "screen": writer.DONE.decode().strip() in screen,
    }


def run(root: Path, mode: Mode, env: dict[str, str]) -> list[Row]:
    total = int(mode.output_mb * 1e6)
    with tmux_server(root) as tmux:
        bare = under_tmux(root, tmux, total)
    with running_node(root, "output") as node:
        got = under_roost(root, node, total, mode.output_cap_s)
    done = got["finished"]
    mb, seen_mb = total / 1e6, got["kept"] / 1e6
    ratio = got["elapsed"] / bare["elapsed"]
    per_mb = got["cpu"] / max(seen_mb, 1e-6)
    cut = "" if done else f"projected: stopped after {mode.output_cap_s:.0f} s at {seen_mb:.1f} MB"
    kept = got["kept"] == got["carried"]
    return [
        Row(
            FIG,
            f"writer wall time, {mb:g} MB, s",
            got["elapsed"],
            bare["elapsed"],
            "<= 1.5x tmux",
            ratio <= 1.5,
            cut,
        ),
        Row(
            FIG,
            "supervisor CPU per MB, s",
            per_mb,
            bare["cpu"] / mb,
            "<= 0.3 s",
            per_mb <= 0.3,
            "vs tmux server",
        ),
        Row(
            FIG,
            "daemon CPU per MB, s",
            got["daemon_cpu"] / max(seen_mb, 1e-6),
            None,
            note="broker, o/<record>",
        ),
        Row(
            FIG,
            "transcript bytes kept",
            got["kept"],
            got["carried"],
            "== carried",
            kept if done else None,
            "vs bytes the pty carried" if done else "writer given up",
        ),
        Row(
            FIG,
            "screen shows the last line",
            "yes" if got["screen"] else "no",
            None,
            "yes",
            got["screen"] if done else None,
        ),
    ]
