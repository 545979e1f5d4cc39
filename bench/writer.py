"""Figure 4's program: write BYTES of distinct text lines to the terminal (fd 1) as fast as it can.

Run as itself under tmux (``python bench/writer.py --bytes N --result PATH``), and under roost
inside an echo session's agent: a file the agent runs first (``ROOST_ECHO_PRELOAD``, set by
the figure) calls ``hook()``, which, when ``ROOST_BENCH_FIFO`` is set, waits in a thread until
the figure opens that FIFO and then writes, so the session is live (and measured from a quiet start)
before the output begins. Either way the same function writes and times itself, and the result
(seconds from the first write to the last write returned, bytes, newlines) goes to the result
file as JSON. The last line is ``WRITER-DONE``, so the screen can be checked afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

LINE = 100  # bytes per line, newline included
DONE = b"WRITER-DONE\n"


def block(lines: int = 10_000) -> bytes:
    """About 1 MB of lines, each different (a counter and a rotating alphabet)."""
    abc = b"abcdefghijklmnopqrstuvwxyz0123456789"
    out = []
    for i in range(lines):
        body = (abc[i % 36 :] + abc * 3)[: LINE - 10]
        out.append(b"%08d %s\n" % (i, body))
    return b"".join(out)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def parts(total: int) -> Iterator[bytes]:
    chunk = block()
    for at in range(0, total, len(chunk)):
        yield chunk[: total - at]
    yield DONE


def carried(total: int) -> int:
    """The bytes a terminal carries for ``write(total)``: the pty turns each \\n into \\r\\n."""
    return sum(len(part) + part.count(b"\n") for part in parts(total))


def write(total: int, fd: int = 1) -> dict[str, float]:
    start = time.perf_counter()
    written = newlines = 0
    for part in parts(total):
        write_all(fd, part)
        written += len(part)
        newlines += part.count(b"\n")
    elapsed = time.perf_counter() - start
    return {"elapsed": elapsed, "bytes": written, "newlines": newlines}


def report(path: str, result: dict[str, float]) -> None:
    tmp = Path(path + ".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(path)


def hook() -> None:
    """In an agent process: write once the figure opens the FIFO (no-op without the env)."""
    fifo, total, result = (
        os.environ.get(k) for k in ("ROOST_BENCH_FIFO", "ROOST_BENCH_BYTES", "ROOST_BENCH_RESULT")
    )
    if not (fifo and total and result):
        return

    def go() -> None:
        with open(fifo, "rb") as fh:  # blocks until the figure opens it for writing
            fh.read()
        report(result, write(int(total)))

    threading.Thread(target=go, daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bytes", type=int, required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args()
    report(args.result, write(args.bytes))


if __name__ == "__main__":
    main()
