"""A damaged ``state.db``: refused at once, untouched, repairable.

A real node writes a database (records, stream turns, their events), stops; the test damages
the file the ways disks and bit flips do (a garbage header page, a garbage middle page, a
garbage last page, a truncated file, an index whose keys disagree with its table). Each must
make ``node up`` answer ``durable-state-damaged`` within seconds, writing nothing; ``node
repair`` then salvages what is readable into a new file, keeps the damaged one byte for byte,
and reports what it kept; ``node up`` then serves exactly the salvaged rows, none invented.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from roost.wire.errors import RoostError
from tests.e2e.conftest import Node
from tests.e2e.test_state_file import _refused_up

PAGE = 4096


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's big-endian varint at ``at``: its value and its length."""
    value = 0
    for i in range(9):
        byte = data[at + i]
        if i == 8:
            return (value << 8) | byte, 9
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, i + 1
    raise AssertionError("unreachable")


def _index_keys(data: bytes, page: int) -> list[tuple[int, bytes]]:
    """(offset, bytes) of the first (text) key of each cell of an index leaf page."""
    base = (page - 1) * PAGE
    assert data[base] == 0x0A, "not an index leaf page"
    cells = int.from_bytes(data[base + 3 : base + 5], "big")
    keys = []
    for i in range(cells):
        cell = base + int.from_bytes(data[base + 8 + 2 * i : base + 10 + 2 * i], "big")
        _, n = _varint(data, cell)
        header, h = _varint(data, cell + n)
        serial, _ = _varint(data, cell + n + h)
        assert serial >= 13 and serial % 2 == 1, "the first key is not text"
        start = cell + n + header
        keys.append((start, data[start : start + (serial - 13) // 2]))
    return keys


def broken_index(db: Path, data: bytearray) -> None:
    """Bit flips that turn one key of the unique ``events_eid`` into its neighbour's: a
    non-unique entry in the index, and the row whose key it was missing from it."""
    with contextlib.closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as conn:
        pages = [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name='events_eid'")]
    for page in pages:
        if data[(page - 1) * PAGE] != 0x0A:
            continue
        keys = _index_keys(bytes(data), page)
        for (_, prev), (at, key) in itertools.pairwise(keys):
            if len(prev) == len(key):
                data[at : at + len(key)] = prev
                return
    raise AssertionError("no two keys of equal length on an events_eid leaf page")


def garbage(page: Callable[[int], int]) -> Callable[[Path, bytearray], None]:
    def damage(db: Path, data: bytearray) -> None:
        n = page(len(data) // PAGE)
        data[(n - 1) * PAGE : n * PAGE] = random.Random(n).randbytes(PAGE)

    return damage


def truncated(db: Path, data: bytearray) -> None:
    del data[len(data) * 2 // 3 + 123 :]


DAMAGE: dict[str, Callable[[Path, bytearray], None]] = {
    "garbage-header-page": garbage(lambda pages: 1),
    "garbage-middle-page": garbage(lambda pages: pages // 2),
    "garbage-last-page": garbage(lambda pages: pages),
    "truncated-file": truncated,
    "broken-index": broken_index,
}
WHOLE = {"garbage-header-page", "broken-index"}  # every row stays readable


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A database written by a real node (records, turns, their events), and what it served."""
    root = tmp_path_factory.mktemp("written")
    node = Node(root)
    try:
        node.up("--node-id", "damaged")
        for i in range(2):  # ~10 KB of events a turn: the event log spans many pages
            node.run("spawn", "echo", "--name", f"s{i}", "--mode", "stream")
            for j in range(3):
                node.run("turn", f"s{i}", f"/tool echo turn {j} " + "x" * 3000, "--wait")
        for i in range(2):
            node.run("spawn", "echo", "--name", f"p{i}")
        node.run("node", "stop", "--stop-sessions")
        data = (node.state_dir / "state.db").read_bytes()
        node.up()  # to read what it holds: everything, and this start's node.started
        records = {r["id"]: r for r in node.run("ls")["records"]}
        events = {e["seq"]: e for e in all_events(node)}
        assert events.pop(max(events))["kind"] == "node.started"
        node.run("node", "stop")
        yield {"db": data, "records": records, "events": events}
    finally:
        node.kill_all()


def all_events(node: Node) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        page = node.events(out[-1]["seq"] if out else 0)
        if not page:
            return out
        out += page


def _lost_in(seq: int, unreadable: list[list[int | None]]) -> bool:
    return any((lo is None or lo <= seq) and (hi is None or seq <= hi) for lo, hi in unreadable)


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_a_damaged_database_is_refused_at_once_then_repaired(
    node: Node, written: dict[str, Any], kind: str
) -> None:
    node.state_dir.mkdir(mode=0o700)
    db = node.state_dir / "state.db"
    db.write_bytes(written["db"])
    data = bytearray(written["db"])
    DAMAGE[kind](db, data)
    db.write_bytes(bytes(data))
    damaged = db.read_bytes()

    started = time.monotonic()
    stderr = _refused_up(node, "durable-state-damaged")
    took = time.monotonic() - started
    # at once: not after the start-up deadline a store that never answers would be given
    assert took < 15.0, f"the refusal took {took:.1f} s"
    assert "roost node repair" in stderr

    report = node.run("node", "repair")
    assert report["repaired"] and report["problems"]
    assert (node.state_dir / report["damaged_file"]).read_bytes() == damaged
    # a truncated file's header names pages it no longer has: SQLite reads none of it
    assert report["header_rebuilt"] == (kind in {"garbage-header-page", "truncated-file"})
    tables = report["tables"]

    assert node.up()["node_id"] == "damaged"
    records = {r["id"]: r for r in node.run("ls")["records"]}
    events = {e["seq"]: e for e in all_events(node)}
    assert len(records) == tables["records"]["kept"]
    for rid, rec in records.items():
        assert rec == written["records"][rid], "a record came back changed"
    restarted = [s for s, e in events.items() if s not in written["events"]]
    assert [events[s]["kind"] for s in restarted] == ["node.started"]
    assert min(restarted) > max(written["events"]), "an event seq was handed out again"
    salvaged = {s: e for s, e in events.items() if s in written["events"]}
    assert len(salvaged) == tables["events"]["kept"]
    for seq, event in salvaged.items():
        assert event == written["events"][seq], "an event came back changed"
    for seq in set(written["events"]) - set(salvaged):
        assert _lost_in(seq, tables["events"]["unreadable"]), f"seq {seq} lost unreported"
    if kind in WHOLE:
        assert set(records) == set(written["records"])
        assert set(salvaged) == set(written["events"])
    else:
        assert salvaged or records, "nothing was salvaged"


def test_repair_of_a_sound_database_changes_nothing(node: Node) -> None:
    node.up()
    node.run("node", "stop")
    before = (node.state_dir / "state.db").read_bytes()
    assert node.run("node", "repair") == {"repaired": False, "damaged": False, "problems": []}
    assert (node.state_dir / "state.db").read_bytes() == before


def test_repair_is_refused_while_the_node_serves(node: Node) -> None:
    node.up()
    assert node.error("node", "repair")["code"] == "node-running"


def test_a_damaged_event_row_is_refused_clearly_and_the_rest_still_serves(node: Node) -> None:
    """``events.since`` splices stored bytes into its reply: a row whose stored event
    is no longer one msgpack value, or holds another seq than its row's, must make the page an
    error naming the damage, never a reply a client would read wrongly; once the row is mended
    the same page reads again."""
    node.up()
    node.run("spawn", "echo", "--name", "s1", "--mode", "stream")
    node.run("turn", "s1", "hello", "--wait")
    events = all_events(node)
    assert len(events) >= 3
    victim = events[1]["seq"]
    conn = sqlite3.connect(node.state_dir / "state.db", timeout=10)
    try:
        (good,) = conn.execute("SELECT packed FROM events WHERE seq = ?", (victim,)).fetchone()
        (other,) = conn.execute("SELECT packed FROM events WHERE seq = ?", (victim + 1,)).fetchone()
        with node.client() as client:
            for damaged in (good[:-1], other):  # cut short; another event's bytes
                with conn:
                    conn.execute("UPDATE events SET packed = ? WHERE seq = ?", (damaged, victim))
                with pytest.raises(RoostError) as err:
                    client.call("events.since", {"after": 0})
                assert err.value.code == "durable-state-damaged"
                assert str(node.state_dir) not in str(err.value)
                after = client.call("events.since", {"after": victim})  # past it: still served
                assert [e["seq"] for e in after["events"]] == [e["seq"] for e in events[2:]]
            assert client.call("session.list", {})["records"]  # the node itself is fine
            with conn:
                conn.execute("UPDATE events SET packed = ? WHERE seq = ?", (good, victim))
            mended = client.call("events.since", {"after": 0})
        assert mended["events"][: len(events)] == events
    finally:
        conn.close()
