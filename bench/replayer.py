"""Figure 8's program: replay a recorded CLI's PTY output (``tests/replay.py``) to the terminal
(fd 1) at its recorded pace.

Run as itself under tmux (``python bench/replayer.py --provider codex --result PATH``), and under
roost inside an echo session's agent: a file the agent runs first (``ROOST_ECHO_PRELOAD``) calls
``hook()``, which, when ``ROOST_BENCH_FIFO`` is set, waits in a thread until the figure opens that
FIFO and then replays, so the session is live and quiet before the output begins (as
``writer.py`` does). The terminal is put in raw mode first, as the CLI had it (no output
translation: the recorded bytes were translated already; no echo of what the terminal answers to
the CLI's queries). The replay begins with ``START`` (reset style, home, clear), so both
terminals start from the same blank screen whatever was on it. Each chunk is written at its
recorded time from the start (a late one does not delay the rest); the result (seconds, bytes)
goes to the result file as JSON.
"""

from __future__ import annotations

import argparse
import os
import sys
import termios
import threading
import time
import tty
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.replay, run as a script

from writer import report, write_all

from tests.replay import load

START = b"\x1b[0m\x1b[H\x1b[2J"


def replay(provider: str, fd: int = 1) -> dict[str, float]:
    recorded = load(provider)
    if os.isatty(fd):  # the recorded bytes were translated by the CLI's terminal already
        tty.setraw(fd, termios.TCSANOW)
    write_all(fd, START)
    start = due = time.perf_counter()
    for delay, data in recorded.chunks:
        due += delay
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        write_all(fd, data)
    return {"elapsed": time.perf_counter() - start, "bytes": recorded.size + len(START)}


def hook() -> None:
    """In an agent process: replay once the figure opens the FIFO (no-op without the env)."""
    fifo, provider, result = (
        os.environ.get(k) for k in ("ROOST_BENCH_FIFO", "ROOST_BENCH_REPLAY", "ROOST_BENCH_RESULT")
    )
    if not (fifo and provider and result):
        return

    def go() -> None:
        with open(fifo, "rb") as fh:  # blocks until the figure opens it for writing
            fh.read()
        report(result, replay(provider))

    threading.Thread(target=go, daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--provider", required=True)
    parser.add_argument("--result", required=True)
    parser.add_argument("--fifo")
    args = parser.parse_args()
    if args.fifo:
        with open(args.fifo, "rb") as fh:
            fh.read()
    report(args.result, replay(args.provider))
    time.sleep(3600)  # the pane stays for capture-pane; the figure kills the server


if __name__ == "__main__":
    main()
