"""Figure 1, the broker: ``ping`` (answered by the broker itself) and ``node.claim`` renew (the
cheapest request the node actor answers from its memory) against a bare Python forwarding hop
(bench/barehop.py) carrying the same two frames, all in this run.

Throughput: one client keeps ``WINDOW`` requests in flight for a window of seconds. p50: one
request at a time. CPU per request: the daemon's CPU seconds (broker + node actor, one process)
over the throughput window divided by the requests answered, against the bare hop's process
(broker thread + worker thread).
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil
from harness import BenchNode, Helper, Mode, Row, quantile, running_node, runtime

from roost.broker import protocol as p
from roost.broker.client import Client

WINDOW = 64  # requests in flight during a throughput window
FIG = "1 broker"


def pump(client: Client, frames: list[bytes], seconds: float) -> tuple[int, float, list[bytes]]:
    """Keep WINDOW copies of ``frames`` in flight for ``seconds``; (answered, elapsed, last)."""
    for _ in range(WINDOW):
        client.send_raw(frames)
    outstanding, answered, last = WINDOW, 0, [b""]
    start = time.perf_counter()
    end = start + seconds
    while outstanding:
        got = client.recv_raw(10.0)
        if got is None:
            raise RuntimeError("no reply within 10 s")
        answered, last = answered + 1, got
        if time.perf_counter() < end:
            client.send_raw(frames)
        else:
            outstanding -= 1
    return answered, time.perf_counter() - start, last


def serial(client: Client, frames: list[bytes], n: int) -> list[float]:
    """Round-trip seconds of ``n`` requests sent one at a time."""
    out = []
    for _ in range(n):
        start = time.perf_counter()
        client.send_raw(frames)
        if client.recv_raw(10.0) is None:
            raise RuntimeError("no reply within 10 s")
        out.append(time.perf_counter() - start)
    return out


def figures(
    client: Client, frames: list[bytes], cpu_of: list[psutil.Process], mode: Mode, kind: str
) -> dict[str, float]:
    """Throughput (req/s), p50 (us) and CPU per request (us) of ``frames`` through ``client``."""
    serial(client, frames, 50)  # warm up
    before = sum(runtime(proc) for proc in cpu_of)
    answered, elapsed, last = pump(client, frames, mode.seconds)
    cpu = sum(runtime(proc) for proc in cpu_of) - before
    if len(last) != 2 or p.Header.decode(last[0]).kind != kind:
        raise RuntimeError(f"expected {kind} replies, got {last[:1]!r}")
    lat = serial(client, frames, mode.samples)
    return {
        "rate": answered / elapsed,
        "p50": quantile(lat, 0.5) * 1e6,
        "cpu": cpu / answered * 1e6,
    }


def claim_frames(client: Client) -> list[bytes]:
    grant = client.call("node.claim", {"lease_ms": 3_600_000})["claim"]["grant"]
    header = p.Header(kind=p.REQUEST, rid="bench:claim", method="node.claim", target="node")
    return [header.encode(), p.pack({"renew": grant, "lease_ms": 3_600_000})]


def ping_frames() -> list[bytes]:
    return [p.Header(kind=p.PING, rid="bench:ping").encode(), p.pack({})]


def measure_node(node: BenchNode, mode: Mode) -> dict[str, dict[str, float]]:
    """``ping`` and ``node.claim`` renew figures of a running node (released afterwards)."""
    daemon = [node.daemon()]
    with node.client() as client:
        frames = claim_frames(client)
        try:
            ping = figures(client, ping_frames(), daemon, mode, p.PONG)
            claim = figures(client, frames, daemon, mode, p.RESPONSE)
        finally:
            grant = p.unpack(frames[1])["renew"]
            client.call("node.release", {"grant": grant})
    return {"ping": ping, "claim": claim}


def measure_bare(root: Path, mode: Mode, env: dict[str, str]) -> dict[str, float]:
    endpoint = f"ipc://{root}/barehop"
    hop = Helper("barehop.py", endpoint, env=env)
    try:
        with Client(endpoint, "") as client:
            header = p.Header(kind=p.REQUEST, rid="bench:claim", method="node.claim", target="node")
            frames = [header.encode(), p.pack({"renew": "g" + "0" * 16, "lease_ms": 3_600_000})]
            return figures(client, frames, [hop.process], mode, p.REQUEST)
    finally:
        hop.stop()


def rows(node: dict[str, dict[str, float]], bare: dict[str, float], at: str = "") -> list[Row]:
    ping, claim = node["ping"], node["claim"]
    r_ping, r_claim = ping["rate"] / bare["rate"], claim["rate"] / bare["rate"]
    p50 = claim["p50"] / bare["p50"]
    return [
        Row(
            FIG, f"ping throughput{at}, req/s", ping["rate"], bare["rate"], ">= 0.9x", r_ping >= 0.9
        ),
        Row(FIG, f"ping p50{at}, us", ping["p50"], bare["p50"]),
        Row(FIG, f"ping daemon CPU/request{at}, us", ping["cpu"], bare["cpu"]),
        Row(
            FIG,
            f"node.claim renew throughput{at}, req/s",
            claim["rate"],
            bare["rate"],
            ">= 0.6x",
            r_claim >= 0.6,
        ),
        Row(FIG, f"node.claim renew p50{at}, us", claim["p50"], bare["p50"], "<= 1.3x", p50 <= 1.3),
        Row(FIG, f"node.claim daemon CPU/request{at}, us", claim["cpu"], bare["cpu"]),
    ]


def run(root: Path, mode: Mode, env: dict[str, str]) -> list[Row]:
    bare = measure_bare(root, mode, env)
    with running_node(root, "broker") as node:
        return rows(measure_node(node, mode), bare)
