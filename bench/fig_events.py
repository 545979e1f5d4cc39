"""Figure 5, reading the log: ``events.since`` of ``Mode.events`` events (pages of 5,000 until
``more`` is false) against a raw SQLite read of the same rows, the same pages, from the same
file, in this run. The events (about 300 bytes each) are made in bulk before ``node up``
(bench/store.py). The node is read twice, SQLite three times; the best of each counts.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import msgpack
import store
from harness import BenchNode, Mode, Row

from roost.broker import protocol as p
from roost.broker.client import Client

FIG = "5 events"
PAGE = 5000
SQL = (
    "SELECT seq, ts, kind, record_id, generation, data, eid FROM events "
    "WHERE seq > ? ORDER BY seq LIMIT ?"
)


def through_node(client: Client) -> tuple[int, float]:
    after, count, more = 0, 0, True
    start = time.perf_counter()
    while more:
        reply = client.call("events.since", {"after": after, "limit": PAGE})
        count += len(reply["events"])
        after, more = reply["events"][-1]["seq"], reply["more"]
    return count, time.perf_counter() - start


def _page_undecoded(body: bytes) -> tuple[int, int, bool]:
    """(count, last seq, more) of an ``events.since`` reply, its events skipped in C, only the
    last one decoded: what a client that stores or relays pages pays, not a full decode."""
    unpacker = msgpack.Unpacker(max_buffer_size=0, raw=False)
    unpacker.feed(body)
    count, last, more = 0, 0, False
    for _ in range(unpacker.read_map_header()):
        key = unpacker.unpack()
        if key == "events":
            count = unpacker.read_array_header()
            for _ in range(count - 1):
                unpacker.skip()
            last = unpacker.unpack()["seq"] if count else last
        elif key == "more":
            more = unpacker.unpack()
        else:
            unpacker.skip()
    return count, last, more


def through_node_undecoded(client: Client) -> tuple[int, float]:
    after, count, more = 0, 0, True
    start = time.perf_counter()
    while more:
        rid = f"bench-{after}"
        header = p.Header(kind=p.REQUEST, rid=rid, method="events.since", target=client.target)
        client.send_raw([header.encode(), p.pack({"after": after, "limit": PAGE})])
        frames = client.recv_raw(60.0)
        assert frames is not None and p.Header.decode(frames[0]).kind == p.RESPONSE
        n, after, more = _page_undecoded(frames[1])
        count += n
    return count, time.perf_counter() - start


def raw(path: Path) -> tuple[int, float]:
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    after, count = 0, 0
    start = time.perf_counter()
    while rows := conn.execute(SQL, (after, PAGE)).fetchall():
        count += len(rows)
        after = rows[-1][0]
    took = time.perf_counter() - start
    conn.close()
    return count, took


def run(root: Path, mode: Mode, env: dict[str, str]) -> list[Row]:
    node = BenchNode(root, "events")
    made = store.build(node.state_dir, node.workdir, 10, mode.events)
    try:
        node.up()
        with node.client(timeout=60) as client:
            ours = [through_node(client) for _ in range(2)]
            undecoded = [through_node_undecoded(client) for _ in range(2)]
        theirs = [raw(node.state_dir / "state.db") for _ in range(3)]
    finally:
        node.stop()
    n, took = min(ours, key=lambda x: x[1])
    m, raw_took = min(theirs, key=lambda x: x[1])
    rate, raw_rate = n / took, m / raw_took
    u, u_took = min(undecoded, key=lambda x: x[1])
    return [
        Row(
            FIG,
            f"events.since of {n} events, events/s",
            rate,
            raw_rate,
            ">= 0.5x",
            rate / raw_rate >= 0.5,
            "vs raw SQLite rows/s",
        ),
        Row(
            FIG,
            f"events.since of {u} events, read without decoding them, events/s",
            u / u_took,
            raw_rate,
            note="skipped, not decoded: the node's side",
        ),
        Row(FIG, f"{mode.events} events made, s", made, None, note="bulk insert, node down"),
    ]
