"""A node's state database made in bulk, before ``node up``: dormant records and events.

Spawning and stopping 1,000 sessions through the node takes minutes on a 2-core machine, so the
records of figure 3 (and the events of figure 5) are inserted with the state store's own
queries (``roost.actors.state.db``) into a fresh database while no node runs; ``node up`` then
opens it like any state directory. Records look like those a stopped echo session leaves:
``dormant``, generation 1, a provider session id, a clean last exit.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from roost.actors.state import db
from roost.actors.state.records import DORMANT, Record
from roost.wire.messages import Event


def build(state_dir: Path, cwd: Path, records: int, events: int = 0) -> float:
    """Make ``state_dir``/state.db with ``records`` dormant records and ``events`` events of
    about 300 bytes (terminal-output shaped, each with an event id); returns the seconds taken."""
    start = time.perf_counter()
    state_dir.mkdir(mode=0o700, parents=True)
    conn, _ = db.open_db(state_dir / "state.db", None)
    conn.execute("BEGIN")
    now = time.time()
    ids = [f"r{i:010x}" for i in range(max(records, 1))]
    for i, rid in enumerate(ids[:records]):
        rec = Record(
            id=rid,
            name=f"dormant-{i}",
            provider="echo",
            mode="pty",
            cwd=str(cwd),
            state=DORMANT,
            generation=1,
            provider_session=str(uuid.uuid4()),
            last_exit={"code": 0, "signal": None, "at": now},
            created=now,
            updated=now,
        )
        db.insert_record(conn, rec)
    data = {"text": "x" * 240, "turn": "t0"}
    for i in range(events):
        event: Event = {
            "kind": "session.output",
            "record": ids[i % len(ids)],
            "generation": 1,
            "data": data,
        }
        db.append_event(conn, {**event, "eid": uuid.uuid4().hex})
    conn.execute("COMMIT")
    conn.close()
    return time.perf_counter() - start
