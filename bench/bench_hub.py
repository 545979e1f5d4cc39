"""Benchmark: a request through a lab's hub against the same request to the node directly.

Prints figures, never fails on them. In one temporary directory it makes a hub and a node with
their CURVE keys, links them over loopback TCP, and times ``session.list`` and ``session.prompt``
locally (ipc, one broker) and through the hub (CURVE TCP, the hub's broker, the node's link, the
node's broker). The baseline is the bare ZeroMQ echo of bench_roundtrip.py, measured in this run.

    .venv/bin/python bench/bench_hub.py [--n 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_roundtrip import baseline

from roost.client.client import Client, Curve


def roost(env: dict[str, str], *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "roost", "--json", *args],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    doc: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return doc


def timed(client: Client, n: int, method: str, body: dict[str, Any]) -> float:
    client.call(method, body)
    start = time.perf_counter()
    for _ in range(n):
        client.call(method, body)
    return (time.perf_counter() - start) / n


def lab(tmp: Path) -> tuple[dict[str, str], dict[str, str], str, str, dict[str, str]]:
    """A hub and a node linked over loopback; returns both envs, endpoint, hub key, client pair."""
    hub_env = {**os.environ, "ROOST_STATE_DIR": str(tmp / "hub")}
    node_env = {**os.environ, "ROOST_STATE_DIR": str(tmp / "node")}
    hub_key = roost(hub_env, "keys", "new")["public"]
    node_key = roost(node_env, "keys", "new")["public"]
    roost(hub_env, "keys", "allow", "--role", "node", "--name", "bench", "--", node_key)
    roost(hub_env, "keys", "new", "--client", str(tmp / "me.json"))
    me: dict[str, str] = json.loads((tmp / "me.json").read_text())
    roost(hub_env, "keys", "allow", "--role", "operator", "--name", "me", "--", me["public"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        endpoint = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    roost(hub_env, "hub", "up", "--listen", endpoint)
    roost(node_env, "node", "up", "--node-id", "bench", "--hub", endpoint, "--hub-key", hub_key)
    return hub_env, node_env, endpoint, hub_key, me


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    n = parser.parse_args().n
    with tempfile.TemporaryDirectory(prefix="roost-bench-hub-") as name:
        tmp = Path(name)
        hub_env, node_env, endpoint, hub_key, me = lab(tmp)
        try:
            roost(node_env, "spawn", "echo", "--name", "bench")
            base = baseline(n, tmp)
            prompt = {"id": "bench", "text": "x"}
            with Client.for_state_dir(tmp / "node") as local:
                direct = timed(local, n, "session.list", {})
                direct_prompt = timed(local, n // 4, "session.prompt", prompt)
            curve = Curve(hub_key, me["public"], me["secret"])
            with Client(endpoint, "", curve=curve) as remote:
                remote.initialize()
                remote.via("bench/node")
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline:  # the link registers within a second or two
                    try:
                        remote.call("session.list", timeout=1.0)
                        break
                    except Exception:  # unreachable until the link is up
                        time.sleep(0.1)
                hubbed = timed(remote, n, "session.list", {})
                hubbed_prompt = timed(remote, n // 4, "session.prompt", prompt)
        finally:
            subprocess.run(
                [sys.executable, "-m", "roost", "node", "stop", "--stop-sessions"],
                env=node_env,
                capture_output=True,
            )
            subprocess.run(
                [sys.executable, "-m", "roost", "hub", "stop"], env=hub_env, capture_output=True
            )
    rows = [
        ("bare zmq echo (baseline)", base),
        ("session.list, local ipc", direct),
        ("session.list through the hub", hubbed),
        ("session.prompt, local ipc", direct_prompt),
        ("session.prompt through the hub", hubbed_prompt),
    ]
    print(f"{'request':<40} {'mean µs':>10} {'vs baseline':>12}")
    for label, secs in rows:
        print(f"{label:<40} {secs * 1e6:>10.1f} {secs / base:>11.1f}x")
    print(
        f"the hub adds {(hubbed - direct) * 1e6:.0f} µs to session.list "
        f"({hubbed / direct:.1f}x the local round trip)"
    )


if __name__ == "__main__":
    main()
