"""Benchmark: request round trips through a real node, against a bare ZeroMQ echo baseline.

Prints figures, never fails on them. The baseline is a ROUTER that echoes two-frame messages on an
ipc socket in this same run, so the ratio says what roost's routing, decoding and actor hops cost
on this machine, whatever the machine.

    .venv/bin/python bench/bench_roundtrip.py [--n 2000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import zmq

from roost.client.client import Client
from roost.wire import protocol as p


def baseline(n: int, workdir: Path) -> float:
    ctx: zmq.Context[Any] = zmq.Context()
    endpoint = f"ipc://{workdir}/echo"
    server = ctx.socket(zmq.ROUTER)
    server.bind(endpoint)

    def serve() -> None:
        for _ in range(n):
            server.send_multipart(server.recv_multipart())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = ctx.socket(zmq.DEALER)
    client.connect(endpoint)
    header = p.Header(kind=p.REQUEST, rid="1", method="session.list").encode()
    start = time.perf_counter()
    for _ in range(n):
        client.send_multipart([header, p.pack({})])
        p.unpack(client.recv_multipart()[1])
    elapsed = time.perf_counter() - start
    thread.join()
    client.close(0)
    server.close(0)
    ctx.term()
    return elapsed / n


def through_node(n: int, method: str, body: dict[str, Any], state_dir: Path) -> float:
    with Client.for_state_dir(state_dir) as client:
        client.call(method, body)
        start = time.perf_counter()
        for _ in range(n):
            client.call(method, body)
        return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    n = parser.parse_args().n
    with tempfile.TemporaryDirectory(prefix="roost-bench-") as tmp:
        state = Path(tmp) / "state"
        env = {**os.environ, "ROOST_STATE_DIR": str(state)}
        roost = [sys.executable, "-m", "roost"]
        subprocess.run([*roost, "node", "up"], env=env, check=True, capture_output=True)
        try:
            subprocess.run(
                [*roost, "spawn", "echo", "--name", "bench"],
                env=env,
                check=True,
                capture_output=True,
            )
            base = baseline(n, Path(tmp))
            rows = [
                ("bare zmq echo (baseline)", base),
                ("node.status (broker + node)", through_node(n, "node.status", {}, state)),
                ("session.list (+ state store)", through_node(n, "session.list", {}, state)),
                (
                    "session.prompt (+ supervisor, commit)",
                    through_node(n // 4, "session.prompt", {"id": "bench", "text": "x"}, state),
                ),
            ]
        finally:
            subprocess.run(
                [*roost, "node", "stop", "--stop-sessions"], env=env, capture_output=True
            )
    print(f"{'request':<40} {'mean µs':>10} {'vs baseline':>12}")
    for name, secs in rows:
        print(f"{name:<40} {secs * 1e6:>10.1f} {secs / base:>11.1f}x")


if __name__ == "__main__":
    main()
