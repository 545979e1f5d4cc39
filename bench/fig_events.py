"""Figure 5, reading the log: ``events.since`` of ``Mode.events`` events (pages of 5,000 until
``more`` is false) against a raw SQLite read of the same rows (every column, the stored event
bytes included), the same pages, from the same file, in this run. The events (about 300 bytes
each) are made in bulk before ``node up`` (bench/store.py). The node is read through the client
library's pipelined reader (``Client.event_pages``), and SQLite, by turns three times each; the
best of each counts.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import store
from harness import BenchNode, Mode, Row

from roost.client.client import Client, page_end
from roost.wire import protocol as p

FIG = "5 events"
PAGE = 5000
SQL = (
    "SELECT seq, ts, kind, record_id, generation, data, eid, packed FROM events "
    "WHERE seq > ? ORDER BY seq LIMIT ?"
)


def through_node(client: Client) -> tuple[int, float]:
    """The client library's reader (``Client.event_pages``, what ``roost events --follow``
    uses): pipelined, every event decoded."""
    count = 0
    start = time.perf_counter()
    for page in client.event_pages({"after": 0, "limit": PAGE}):
        count += len(page["events"])
    return count, time.perf_counter() - start


def through_node_undecoded(client: Client) -> tuple[int, float]:
    after, count, more = 0, 0, True
    start = time.perf_counter()
    while more:
        rid = f"bench-{after}"
        header = p.Header(kind=p.REQUEST, rid=rid, method="events.since", target=client.target)
        client.send_raw([header.encode(), p.pack({"after": after, "limit": PAGE})])
        frames = client.recv_raw(60.0)
        assert frames is not None and p.Header.decode(frames[0]).kind == p.RESPONSE
        n, after, said = page_end(frames[1]) or (0, after, False)
        more = bool(said)
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
        ours: list[tuple[int, float]] = []
        undecoded: list[tuple[int, float]] = []
        theirs: list[tuple[int, float]] = []
        with node.client(timeout=60) as client:
            for _ in range(3):  # by turns, so each sees the same load on the machine
                theirs.append(raw(node.state_dir / "state.db"))
                ours.append(through_node(client))
                undecoded.append(through_node_undecoded(client))
    finally:
        node.stop()
    n, took = min(ours, key=lambda x: x[1])
    m, raw_took = min(theirs, key=lambda x: x[1])
    rate, raw_rate = n / took, m / raw_took
    u, u_took = min(undecoded, key=lambda x: x[1])
    return [
        Row(
            FIG,
            f"events.since of {n} events, the client's pipelined reader, events/s",
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
