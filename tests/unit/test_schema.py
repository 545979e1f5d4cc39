"""Schema creation, migrations of checked-in earlier databases, and refusals that write nothing."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from roost.actors.state import db, schema
from roost.wire.errors import RoostError

FIXTURES = Path(__file__).parent.parent / "fixtures"
EARLIER = sorted(FIXTURES.glob("state-v*.db"))


def _copy(fixture: Path, tmp_path: Path) -> Path:
    target = tmp_path / "state" / "state.db"
    target.parent.mkdir()
    shutil.copy(fixture, target)
    return target


def test_every_earlier_schema_has_a_fixture() -> None:
    versions = {int(p.stem.split("-v")[1]) for p in EARLIER}
    assert versions == set(range(1, schema.SCHEMA_VERSION))


@pytest.mark.parametrize("fixture", EARLIER, ids=lambda p: p.stem)
def test_earlier_database_is_backed_up_then_migrated(fixture: Path, tmp_path: Path) -> None:
    path = _copy(fixture, tmp_path)
    original = path.read_bytes()
    version = int(fixture.stem.split("-v")[1])
    conn, node_id = db.open_db(path, None)
    try:
        assert node_id == "fixture-node"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        records = db.list_records(conn)
        assert sorted(r.name or "" for r in records) == ["one", "two"]
        assert all(r.state == "dormant" and r.provider_session for r in records)
        assert {r.restore_policy for r in records} == {"never"}  # v4: "dormant" means never
        assert {r.on_limit for r in records} == {"wait"} and not any(r.reset_at for r in records)
        events = db.events_since(conn, 0, 1000)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert db.append_event(conn, {"kind": "node.started", "eid": "x"})["seq"] == len(events) + 1
    finally:
        conn.close()
    backup = path.with_name(f"state.db.v{version}.bak")
    assert backup.read_bytes() == original or _same_content(backup, fixture)


def _same_content(a: Path, b: Path) -> bool:
    def dump(p: Path) -> list[str]:
        c = sqlite3.connect(p)
        try:
            return list(c.iterdump())
        finally:
            c.close()

    return dump(a) == dump(b)


def test_fresh_database_is_at_the_current_schema(tmp_path: Path) -> None:
    conn, node_id = db.open_db(tmp_path / "state.db", "n-new")
    try:
        assert node_id == "n-new"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    finally:
        conn.close()
    assert not list(tmp_path.glob("*.bak"))


def _refused(path: Path, node_id: str | None) -> RoostError:
    before = {p.name: p.read_bytes() for p in path.parent.iterdir()}
    with pytest.raises(RoostError) as info:
        db.open_db(path, node_id)
    after = {p.name: p.read_bytes() for p in path.parent.iterdir()}
    assert after == before  # neither the database nor a backup was written
    assert str(path.parent) not in info.value.message
    return info.value


def test_refusals_write_nothing_and_name_no_path(tmp_path: Path) -> None:
    path = _copy(EARLIER[0], tmp_path)
    assert _refused(path, "another-node").code == "durable-state-conflict"
    edit = sqlite3.connect(path)
    edit.execute("INSERT INTO workspaces VALUES ('w1', NULL, 'C:\\Users\\me\\proj', 0)")
    edit.commit()
    edit.close()
    assert _refused(path, None).code == "durable-state-path-semantics-unsupported"


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/home/me", "posix"),
        ("C:\\x", "windows"),
        ("d:/x", "windows"),
        ("\\\\srv\\x", "windows"),
        ("relative", None),
    ],
)
def test_path_semantics(path: str, kind: str | None) -> None:
    assert schema.path_semantics(path) == kind


def test_schema_6_adds_usage_to_a_schema_5_database(tmp_path: Path) -> None:
    from roost.actors.state import ledger
    from roost.wire import usage as u

    path = _copy(FIXTURES / "state-v5.db", tmp_path)
    conn, _ = db.open_db(path, None)
    try:
        record = db.list_records(conn)[0].to_wire()
        assert ledger.totals(conn) == {}
        ledger.insert(conn, record, u.make(3, 4, cost=0.5), source="stream", turn="t1")
        assert ledger.advance(conn, record["id"], "kimi-wire:s", u.make(5)) == u.make(5)
        assert ledger.totals(conn) == {record["id"]: u.make(3, 4, cost=0.5)}
    finally:
        conn.close()
    assert path.with_name("state.db.v5.bak").exists()
