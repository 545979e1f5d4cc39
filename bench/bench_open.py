"""Benchmark: opening a large state database, integrity check included.

Prints figures, never fails on them. Builds, in a temporary directory, a node database with
``--records`` records and ``--events`` events (about 300 bytes each, with event ids like a
supervisor's), then times: ``PRAGMA quick_check`` (what every open runs), ``PRAGMA
integrity_check`` (for comparison), ``schema.open_db`` as the daemon and the state store run it,
and ``roost node up`` of a stopped node (the daemon's check, the state store's open, the actors'
start), three times.

    .venv/bin/python bench/bench_open.py [--records 1000] [--events 200000]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from roost.actors.state import db
from roost.actors.state.records import Record
from roost.wire.messages import Event


def build(path: Path, records: int, events: int) -> None:
    conn, _ = db.open_db(path, "bench-node")
    conn.execute("BEGIN")
    for i in range(records):
        rec = Record.from_row(
            {
                "id": f"r{i:011d}",
                "name": f"rec-{i}",
                "cwd": "/tmp",
                "provider": "echo",
                "mode": "pty",
            }
        )
        rec.created = rec.updated = time.time()
        db.insert_record(conn, rec)
    data = {"text": "x" * 240, "turn": "t0"}
    for i in range(events):
        event: Event = {"kind": "session.output", "record": f"r{i % records:011d}", "data": data}
        db.append_event(conn, {**event, "eid": uuid.uuid4().hex})
    conn.execute("COMMIT")
    conn.close()


def timed(what: str, fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    took = time.perf_counter() - start
    print(f"{what:<34} {took * 1000:9.1f} ms")
    return took


def pragma(path: Path, name: str) -> None:
    with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as conn:
        assert conn.execute(f"PRAGMA {name}").fetchone()[0] == "ok"


def node(state: Path, verb: str) -> None:
    env = {**os.environ, "ROOST_STATE_DIR": str(state)}
    roost = [sys.executable, "-m", "roost", "--json", "node", verb]
    subprocess.run(roost, env=env, check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--events", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        state.mkdir(mode=0o700)
        path = state / "state.db"
        build(path, args.records, args.events)
        size = path.stat().st_size / 2**20
        print(f"{args.records} records, {args.events} events, {size:.1f} MiB")
        pragma(path, "quick_check")  # the page cache of the OS warmed, as on a restart
        timed("PRAGMA quick_check", lambda: pragma(path, "quick_check"))
        timed("PRAGMA integrity_check", lambda: pragma(path, "integrity_check"))
        timed("schema.open_db (check + open)", lambda: db.open_db(path, None)[0].close())
        for _ in range(3):  # a restart: `node up` until it serves, then `node stop`
            timed("roost node up (a restart)", lambda: node(state, "up"))
            node(state, "stop")


if __name__ == "__main__":
    main()
