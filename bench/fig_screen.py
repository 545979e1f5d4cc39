"""Figure 8, a real agent's screen: each provider's recorded PTY output (``tests/replay.py``: a
long streamed answer of claude, codex and kimi, full of redraws) replayed at its recorded pace
into a 120x40 terminal, under tmux (a private server; the replayer is the pane's command) and
under roost (an echo session of 120x40 whose agent replays it, as figure 4's writer runs). The
supervisor's CPU against the tmux server's over the replay, and the final screen against tmux's
(``capture-pane -p``).

A real supervisor through a real node is measured, not the terminal in-process: what a session's
output costs is the supervisor's whole output path (the PTY reads, the transcript, the publish,
the classifier's looks and the screen), and the classifier's pace (a look about once a second
while output flows) decides how much of it the screen emulates. Nobody is attached on either
side (the tmux session is detached): the roost session is unwatched, so its output is read at
the unwatched pace and not published.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import psutil
from fig_output import reader, result, screen_of
from harness import BenchNode, Mode, Row, Tmux, running_node, runtime, tmux_server, wait_for

from tests.replay import PROVIDERS, load, path_of

FIG = "8 screen"
PROMPT = "echo-ready>"
ROWS, COLS = 40, 120
REPLAYER = Path(__file__).with_name("replayer.py")
HOOK = f"""import importlib.util, sys
sys.path.insert(0, {str(REPLAYER.parent)!r})
spec = importlib.util.spec_from_file_location("roost_bench_replayer", {str(REPLAYER)!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.hook()
"""


def same_screen(a: str, b: str) -> bool:
    """Row by row, trailing blanks and blank rows at the end aside."""

    def rows(text: str) -> list[str]:
        lines = [line.rstrip() for line in text.split("\n")]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    return rows(a) == rows(b)


def under_tmux(root: Path, tmux: Tmux, provider: str) -> dict[str, Any]:
    fifo, out = root / f"tmux-{provider}.go", root / f"tmux-{provider}.json"
    os.mkfifo(fifo)
    name = f"r-{provider}"
    command = f"{sys.executable} {REPLAYER} --provider {provider} --result {out} --fifo {fifo}"
    tmux.new(name, command, COLS, ROWS)
    server = tmux.server()
    fd = wait_for(lambda: reader(fifo), 30, "the replayer to wait on its FIFO")
    before = runtime(server)
    os.close(fd)
    got = result(out, 600)
    if got is None:
        raise RuntimeError(f"the {provider} replay did not finish under tmux in 600 s")
    cpu = runtime(server) - before
    return {**got, "cpu": cpu, "screen": tmux.run("capture-pane", "-p", "-t", name)}


def under_roost(root: Path, node: BenchNode, provider: str) -> dict[str, Any]:
    hook, fifo, out = root / "hook.py", root / f"roost-{provider}.go", root / f"{provider}.json"
    hook.write_text(HOOK)
    os.mkfifo(fifo)
    env = {
        "ROOST_ECHO_PRELOAD": str(hook),
        "ROOST_BENCH_FIFO": str(fifo),
        "ROOST_BENCH_REPLAY": provider,
        "ROOST_BENCH_RESULT": str(out),
    }
    with node.client(timeout=60) as client:
        body = node.spawn_body(provider, env=env, rows=ROWS, cols=COLS)
        rec = client.call("session.spawn", body)["record"]["id"]
        sup = psutil.Process(client.call("session.show", {"id": rec})["record"]["active"]["pid"])
        wait_for(lambda: PROMPT in screen_of(client, rec), 30, "the echo agent's prompt")
        time.sleep(0.5)  # a measuring pause: the prompt's classification settles first
        before = runtime(sup)
        os.close(wait_for(lambda: reader(fifo), 30, "the replayer to wait on its FIFO"))
        got = result(out, 600)
        if got is None:
            raise RuntimeError(f"the {provider} replay did not finish under roost in 600 s")
        want = got["bytes"]
        wait_for(lambda: taken(client, rec) >= want, 60, "the supervisor to read it all")
        cpu = runtime(sup) - before
        screen = screen_of(client, rec)
    return {**got, "cpu": cpu, "screen": screen}


def taken(client: Any, record: str) -> int:
    return int(client.call("session.transcript", {"id": record, "limit": 1})["end"])


def run(root: Path, mode: Mode, env: dict[str, str]) -> list[Row]:
    providers = [p for p in PROVIDERS if path_of(p).exists()]
    if mode.name == "quick":
        providers = providers[:1] if "codex" not in providers else ["codex"]
    bare: dict[str, dict[str, Any]] = {}
    with tmux_server(root) as tmux:
        tmux.new("keep", "cat", COLS, ROWS)  # the server outlives each replay's session
        for provider in providers:
            bare[provider] = under_tmux(root, tmux, provider)
    rows: list[Row] = []
    with running_node(root, "screen") as node:
        for provider in providers:
            got = under_roost(root, node, provider)
            recorded = load(provider)
            ratio = got["cpu"] / max(bare[provider]["cpu"], 1e-6)
            what = f"{provider} {recorded.meta.get('version', '')}".strip()
            mb = recorded.size / 1e6
            rows += [
                Row(
                    FIG,
                    f"{what}: {mb:.2f} MB in {recorded.seconds:.0f} s, CPU s",
                    got["cpu"],
                    bare[provider]["cpu"],
                    "<= 1.0x tmux",
                    ratio <= 1.0,
                    "supervisor vs tmux server",
                ),
                Row(
                    FIG,
                    f"{provider}: final screen equals tmux's",
                    "yes" if same_screen(got["screen"], bare[provider]["screen"]) else "no",
                    None,
                    "yes",
                    same_screen(got["screen"], bare[provider]["screen"]),
                ),
            ]
    return rows
