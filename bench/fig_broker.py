"""Figure 1, the broker: ``ping`` (answered by the broker itself) and ``node.claim`` renew (the
cheapest request the node actor answers from its memory) against a bare Python forwarding hop
(bench/barehop.py) carrying the same two frames, all in this run.

Throughput: one client keeps ``WINDOW`` requests in flight for a window of seconds. p50: one
request at a time. CPU per request: the daemon's CPU seconds (broker + node actor, one process)
over the throughput window divided by the requests answered, against the bare hop's process
(broker thread + worker thread).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
from harness import BenchNode, Helper, Mode, Row, quantile, running_node, runtime

from roost.client.client import Client
from roost.wire import protocol as p

WINDOW = 64  # requests in flight during a throughput window
FIG = "1 broker"
Hop = tuple[Client, psutil.Process]  # the bare hop: a client connected to it, and its process


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


@contextlib.contextmanager
def bare_hop(root: Path, env: dict[str, str]) -> Iterator[Hop]:
    """The bare hop running: a client connected to it, and its process."""
    endpoint = f"ipc://{root}/barehop"
    hop = Helper("barehop.py", endpoint, env=env)
    try:
        with Client(endpoint, "") as client:
            yield client, hop.process
    finally:
        hop.stop()


def measure_bare(hop: Hop, mode: Mode) -> dict[str, float]:
    """The figures of the bare hop, carrying the frames of a ``node.claim`` renew."""
    header = p.Header(kind=p.REQUEST, rid="bench:claim", method="node.claim", target="node")
    frames = [header.encode(), p.pack({"renew": "g" + "0" * 16, "lease_ms": 3_600_000})]
    return figures(hop[0], frames, [hop[1]], mode, p.REQUEST)


def best(runs: list[dict[str, float]]) -> dict[str, float]:
    """The best of each figure over rounds: on a shared machine the least disturbed one."""
    return {
        "rate": max(r["rate"] for r in runs),
        "p50": min(r["p50"] for r in runs),
        "cpu": min(r["cpu"] for r in runs),
    }


def rows(node: dict[str, dict[str, float]], bare: dict[str, float]) -> list[Row]:
    ping, claim = node["ping"], node["claim"]
    r_ping, r_claim = ping["rate"] / bare["rate"], claim["rate"] / bare["rate"]
    p50 = claim["p50"] / bare["p50"]
    return [
        Row(FIG, "ping throughput, req/s", ping["rate"], bare["rate"], ">= 0.9x", r_ping >= 0.9),
        Row(FIG, "ping p50, us", ping["p50"], bare["p50"]),
        Row(FIG, "ping daemon CPU/request, us", ping["cpu"], bare["cpu"]),
        Row(
            FIG,
            "node.claim renew throughput, req/s",
            claim["rate"],
            bare["rate"],
            ">= 0.6x",
            r_claim >= 0.6,
        ),
        Row(FIG, "node.claim renew p50, us", claim["p50"], bare["p50"], "<= 1.3x", p50 <= 1.3),
        Row(FIG, "node.claim daemon CPU/request, us", claim["cpu"], bare["cpu"]),
    ]


def run(root: Path, mode: Mode, env: dict[str, str]) -> list[Row]:
    """``Mode.rounds`` rounds, the bare hop and the node by turns; the best of each side."""
    bare_runs: list[dict[str, float]] = []
    node_runs: list[dict[str, dict[str, float]]] = []
    with running_node(root, "broker") as node, bare_hop(root, env) as hop:
        for _ in range(mode.rounds):
            bare_runs.append(measure_bare(hop, mode))
            node_runs.append(measure_node(node, mode))
    ours = {kind: best([r[kind] for r in node_runs]) for kind in ("ping", "claim")}
    note = f"best of {mode.rounds} rounds" if mode.rounds > 1 else ""
    out = rows(ours, best(bare_runs))
    out[0].note = note
    return out
