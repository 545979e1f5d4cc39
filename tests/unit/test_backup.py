"""roost/actors/state/backup.py: the destination's checks, and a copy that is a snapshot."""

from __future__ import annotations

import sqlite3
import stat
import threading
from pathlib import Path

import msgpack
import pytest

from roost.actors.state import db
from roost.actors.state.backup import check_destination, copy
from roost.wire.errors import RoostError


def _filled(path: Path, events: int) -> sqlite3.Connection:
    conn, _ = db.open_db(path, "lab-1")
    conn.execute("BEGIN")
    for n in range(events):
        db.append_event(conn, {"kind": "node.started", "data": {"n": n, "pad": "x" * 500}})
    conn.execute("COMMIT")
    return conn


def test_a_destination_is_absolute_new_and_not_the_database(tmp_path: Path) -> None:
    source = tmp_path / "state.db"
    source.touch()
    cases = {
        "backup.db": "bad-request",  # relative
        str(tmp_path / "nosuch" / "b.db"): "bad-request",
        str(source): "bad-request",
        str(tmp_path / "state.db-wal"): "bad-request",
        str(tmp_path): "backup-exists",
    }
    for raw, code in cases.items():
        with pytest.raises(RoostError) as err:
            check_destination(raw, True, source)
        assert err.value.code == code, raw
    taken = tmp_path / "taken.db"
    taken.touch()
    with pytest.raises(RoostError) as err:
        check_destination(str(taken), False, source)
    assert err.value.code == "backup-exists" and err.value.detail == {"path": str(taken)}
    assert check_destination(str(taken), True, source) == taken


def test_a_copy_is_the_database_as_it_was_when_it_began(tmp_path: Path) -> None:
    source = tmp_path / "state.db"
    conn = _filled(source, 20000)  # ~10 MB: the copy takes many steps
    before = db.seq_range(conn)[1]
    writer = sqlite3.connect(source, isolation_level=None, check_same_thread=False)
    done = threading.Event()
    written: list[int] = []

    def keep_writing() -> None:
        while not done.is_set():
            written.append(db.append_event(writer, {"kind": "node.started"})["seq"])

    thread = threading.Thread(target=keep_writing)
    thread.start()
    try:
        reply = copy(source, tmp_path / "copy.db", pages=16)
    finally:
        done.set()
        thread.join()
    assert written, "the writer was never blocked, so it wrote during the copy"
    dest = tmp_path / "copy.db"
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert reply["path"] == str(dest) and reply["bytes"] == dest.stat().st_size
    assert before <= reply["last_seq"] < written[-1]
    copied = sqlite3.connect(dest)
    assert copied.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    seqs = [r[0] for r in copied.execute("SELECT seq FROM events ORDER BY seq")]
    assert seqs == list(range(1, reply["last_seq"] + 1))
    copied.row_factory = sqlite3.Row  # the stored event bytes came whole: pages read the same
    page, _ = db.events_page(copied, 0, 5000)
    assert page == db.events_page(conn, 0, 5000)[0]
    assert [msgpack.unpackb(e) for e in page[:50]] == db.events_since(conn, 0, 50)
    assert copied.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("copy", ".copy"))) == [
        "copy.db"
    ]


def test_a_failed_copy_leaves_nothing_at_the_destination(tmp_path: Path) -> None:
    source = tmp_path / "state.db"
    source.write_bytes(b"not a database at all" * 100)
    with pytest.raises(RoostError) as err:
        copy(source, tmp_path / "copy.db")
    assert err.value.code == "storage-failed"
    assert [p.name for p in tmp_path.iterdir()] == ["state.db"]
