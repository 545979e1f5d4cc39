"""The node id a daemon serves: read from its database, held on this machine, changed on request.

``claim`` runs in the daemon once it holds the state directory's lock, before it writes to its
database or starts anything (the broker, the state store, the sweep of the records). It reads
the stored node id read-only, takes the runtime directory and that node id (``idlock``: one
node per node id on a machine), and only then opens the database (creating, migrating and
checking it as on every start). So a copy of a node's state brought up while that node serves
is refused ``node-id-conflict`` with its database untouched: were it let in, its records would
name the other node's supervisors, alive, as its own, and its ``stop`` would kill them.

``--new-node-id ID`` (``roost node up --new-node-id ID``) brings such a copy up as a node of its
own. In one transaction the stored node id becomes ID and every active record becomes dormant
(``session.lost``, reason ``node-id-changed``, and its ``record.state``; ``last_exit: {lost:
node-id-changed}``): the supervisors those records name belong to the node the copy was taken
from, so this node neither adopts nor signals them. The records stay resumable by their provider
session ids; a turn they were running is ended by the first sweep (``orphaned``). An ID equal to
the stored one changes nothing.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from roost.actors.runtime.idlock import hold_node_id, hold_runtime_dir
from roost.actors.runtime.lock import StateLock
from roost.actors.state import db, integrity
from roost.actors.state import records as r
from roost.client.locate import runtime_dir
from roost.wire import messages as msg

log = structlog.get_logger("roost.identity")

DB = "state.db"
NODE_ID_CHANGED = "node-id-changed"  # session.lost's reason, last_exit.lost


@dataclass
class Claim:
    """The node id a daemon serves and the locks it holds for its life."""

    node_id: str
    locks: list[StateLock] = field(default_factory=list)
    dormant: list[str] = field(default_factory=list)  # records a new node id made dormant

    def release(self) -> None:
        for lock in reversed(self.locks):
            lock.release()
        self.locks.clear()


def stored_node_id(path: Path) -> str | None:
    """The node id the database at ``path`` holds, read-only; None when there is no database or
    it cannot be read (``db.open_db`` then says why)."""
    if not path.exists():
        return None
    try:
        uri = path.resolve().as_uri() + "?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as ro:
            row = ro.execute("SELECT value FROM meta WHERE key='node_id'").fetchone()
    except (sqlite3.Error, OSError):
        return None
    return str(row[0]) if row and row[0] else None


def claim(state_dir: Path, requested: str | None, new_id: str | None = None) -> Claim:
    """Hold the runtime directory and the node id, then open the database (see the module
    docstring). ``requested`` is ``--node-id`` (a first start's id; another stored one is
    ``durable-state-conflict``), ``new_id`` is ``--new-node-id``; never both."""
    path = state_dir / DB
    stored = stored_node_id(path)
    held = Claim(new_id or requested or stored or "n-" + uuid.uuid4().hex[:10])
    try:
        held.locks.append(hold_runtime_dir(runtime_dir(state_dir)))
        held.locks.append(hold_node_id(held.node_id))
        fresh = not path.exists()
        conn, opened = db.open_db(path, held.node_id if fresh else requested)
        with contextlib.closing(conn):
            if new_id is not None and opened != new_id:
                try:
                    held.dormant = rename(conn, new_id)
                except sqlite3.Error as err:  # a full or failing disk: nothing was changed
                    raise integrity.storage_error(err) or integrity.damaged(str(err)) from None
                log.warning("node-id-changed", previous=opened, dormant=held.dormant)
            elif opened != held.node_id:  # the id could not be read before the file was opened
                held.locks.append(hold_node_id(opened))
                held.node_id = opened
    except BaseException:
        held.release()
        raise
    return held


def rename(conn: sqlite3.Connection, node_id: str) -> list[str]:
    """Store ``node_id`` and make every active record dormant, in one transaction; returns the
    ids of the records it made dormant."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('node_id', ?)", (node_id,))
        dormant = []
        for record in db.list_records(conn):
            if record.state not in r.ACTIVE_STATES:
                continue
            lost = {"reason": NODE_ID_CHANGED, "interrupted_turns": []}
            db.append_event(conn, msg.event("session.lost", record.id, record.generation, lost))
            moved = {"from": record.state, "to": r.DORMANT}
            db.append_event(conn, msg.event("record.state", record.id, record.generation, moved))
            changes = {
                "state": r.DORMANT,
                "active": None,
                "activity": None,
                "attention": None,
                "last_exit": {"lost": NODE_ID_CHANGED},
                "updated": time.time(),
            }
            db.update_record(conn, record.id, changes)
            dormant.append(record.id)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return dormant
