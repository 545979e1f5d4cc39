"""The node's SQLite database: opening, refusals, records, workspaces (roost.actors.state.db)."""

from __future__ import annotations

import re
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roost.actors.state import db
from roost.actors.state.records import DORMANT, LIVE, Record
from roost.wire.errors import RoostError


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def conn(path: Path) -> Iterator[sqlite3.Connection]:
    connection, _ = db.open_db(path, "n-test")
    yield connection
    connection.close()


def make(record_id: str, name: str | None, created: float = 1.0, **kw: Any) -> Record:
    return Record(
        id=record_id,
        name=name,
        provider="echo",
        mode="pty",
        cwd="/work",
        created=created,
        updated=created,
        **kw,
    )


def edit(path: Path, *statements: str) -> None:
    """Change an existing database behind roost's back, as another program would."""
    raw = sqlite3.connect(path)
    try:
        for statement in statements:
            raw.execute(statement)
        raw.commit()
    finally:
        raw.close()


def refusal(path: Path, node_id: str | None, tmp_path: Path) -> RoostError:
    with pytest.raises(RoostError) as info:
        db.open_db(path, node_id)
    err = info.value
    assert str(tmp_path) not in str(err)
    assert str(tmp_path) not in repr(err.detail)
    return err


# -- opening -------------------------------------------------------------------------------------


def test_fresh_open_creates_schema_and_keeps_the_given_node_id(path: Path) -> None:
    conn, node_id = db.open_db(path, "n-given")
    try:
        assert node_id == "n-given"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"meta", "workspaces", "records", "events"} <= tables
        assert db.get_meta(conn, "path_semantics") == db.PATH_SEMANTICS
        assert db.get_meta(conn, "no-such-key") == ""
    finally:
        conn.close()


def test_fresh_open_generates_a_node_id(path: Path) -> None:
    conn, node_id = db.open_db(path, None)
    conn.close()
    assert re.fullmatch(r"n-[0-9a-f]{10}", node_id)
    again, same = db.open_db(path, None)
    again.close()
    assert same == node_id


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
def test_fresh_database_is_private(path: Path) -> None:
    conn, _ = db.open_db(path, None)
    conn.close()
    assert path.stat().st_mode & 0o777 == 0o600


def test_reopen_with_the_same_node_id(path: Path) -> None:
    conn, _ = db.open_db(path, "n-one")
    db.insert_record(conn, make("r1", "alpha"))
    conn.close()
    again, node_id = db.open_db(path, "n-one")
    try:
        assert node_id == "n-one"
        assert db.get_record(again, "r1").name == "alpha"
    finally:
        again.close()


def test_reopen_with_another_node_id_is_a_conflict(path: Path, tmp_path: Path) -> None:
    conn, _ = db.open_db(path, "n-one")
    conn.close()
    err = refusal(path, "n-two", tmp_path)
    assert err.code == "durable-state-conflict"
    assert err.detail == {"stored": "n-one", "requested": "n-two"}


def test_newer_schema_is_refused_and_left_untouched(path: Path, tmp_path: Path) -> None:
    conn, _ = db.open_db(path, "n-one")
    conn.close()
    edit(path, f"PRAGMA user_version={db.SCHEMA_VERSION + 1}")
    before = path.read_bytes()
    err = refusal(path, "n-one", tmp_path)
    assert err.code == "durable-state-schema-unsupported"
    assert err.detail == {"schema": db.SCHEMA_VERSION + 1, "supported": db.SCHEMA_VERSION}
    assert path.read_bytes() == before


def test_another_os_path_semantics_is_refused(path: Path, tmp_path: Path) -> None:
    conn, _ = db.open_db(path, "n-one")
    conn.close()
    other = "posix" if db.PATH_SEMANTICS == "windows" else "windows"
    edit(path, f"UPDATE meta SET value='{other}' WHERE key='path_semantics'")
    before = path.read_bytes()
    err = refusal(path, "n-one", tmp_path)
    assert err.code == "durable-state-path-semantics-unsupported"
    assert other in err.message
    assert path.read_bytes() == before


def test_a_file_that_is_not_a_database_is_refused(path: Path, tmp_path: Path) -> None:
    path.write_bytes(b"not a database at all" * 100)
    err = refusal(path, None, tmp_path)
    # indistinguishable from a database whose header page was overwritten
    assert err.code == "durable-state-damaged"
    assert "roost node repair" in err.message
    assert path.read_bytes() == b"not a database at all" * 100


@pytest.mark.parametrize("folder", ["a#b", "c?d", "100%41"])
def test_reopen_under_a_path_with_uri_characters(tmp_path: Path, folder: str) -> None:
    path = tmp_path / folder / "state.db"
    path.parent.mkdir()
    conn, _ = db.open_db(path, "n-one")
    conn.close()
    again, node_id = db.open_db(path, "n-one")
    again.close()
    assert node_id == "n-one"


# -- records -------------------------------------------------------------------------------------


def test_insert_and_get_round_trip(conn: sqlite3.Connection) -> None:
    rec = make(
        "r1",
        "alpha",
        env={"KEY": "v"},
        active={"address": "session/r1"},
        last_exit={"code": 0},
        provider_session="p1",
    )
    db.insert_record(conn, rec)
    assert db.get_record(conn, "r1") == rec


def test_empty_env_reads_back_as_a_map(conn: sqlite3.Connection) -> None:
    db.insert_record(conn, make("r1", None))
    assert db.get_record(conn, "r1").env == {}


def test_find_by_id_and_by_name(conn: sqlite3.Connection) -> None:
    db.insert_record(conn, make("r1", "alpha"))
    db.insert_record(conn, make("r2", "beta"))
    assert db.find_record(conn, "r1").name == "alpha"
    assert db.find_record(conn, "beta").id == "r2"


def test_find_prefers_the_id_over_a_name(conn: sqlite3.Connection) -> None:
    db.insert_record(conn, make("r1", "r2"))
    db.insert_record(conn, make("r2", "beta"))
    assert db.find_record(conn, "r2").id == "r2"


def test_find_and_get_unknown_are_not_found(conn: sqlite3.Connection) -> None:
    for lookup in (db.find_record, db.get_record):
        with pytest.raises(RoostError) as info:
            lookup(conn, "nope")
        assert info.value.code == "not-found"
        assert info.value.detail == {"ref": "nope"}


def test_duplicate_name_is_name_taken(conn: sqlite3.Connection) -> None:
    db.insert_record(conn, make("r1", "alpha"))
    with pytest.raises(RoostError) as info:
        db.insert_record(conn, make("r2", "alpha"))
    assert info.value.code == "name-taken"
    assert [r.id for r in db.list_records(conn)] == ["r1"]


def test_unnamed_records_do_not_collide(conn: sqlite3.Connection) -> None:
    db.insert_record(conn, make("r1", None))
    db.insert_record(conn, make("r2", None))
    assert len(db.list_records(conn)) == 2


def test_update(conn: sqlite3.Connection) -> None:
    db.insert_record(conn, make("r1", "alpha"))
    db.update_record(
        conn, "r1", {"state": LIVE, "generation": 2, "active": {"pid": 7}, "name": "gamma"}
    )
    rec = db.get_record(conn, "r1")
    assert (rec.state, rec.generation, rec.active, rec.name) == (LIVE, 2, {"pid": 7}, "gamma")
    db.update_record(conn, "r1", {"state": DORMANT, "active": None})
    rec = db.get_record(conn, "r1")
    assert (rec.state, rec.active) == (DORMANT, None)


def test_rename_to_a_taken_name_is_refused_and_changes_nothing(conn: sqlite3.Connection) -> None:
    db.insert_record(conn, make("r1", "alpha"))
    db.insert_record(conn, make("r2", "beta"))
    with pytest.raises(RoostError) as info:
        db.update_record(conn, "r2", {"name": "alpha"})
    assert info.value.code == "name-taken"
    assert db.get_record(conn, "r2").name == "beta"


@pytest.mark.parametrize("field", ["id", "env", "cwd", "provider", "id=1; --"])
def test_update_of_a_fixed_field_is_bad_request(conn: sqlite3.Connection, field: str) -> None:
    db.insert_record(conn, make("r1", "alpha"))
    with pytest.raises(RoostError) as info:
        db.update_record(conn, "r1", {field: "x"})
    assert info.value.code == "bad-request"
    assert db.get_record(conn, "r1").cwd == "/work"


def test_list_orders_by_creation_and_delete(conn: sqlite3.Connection) -> None:
    db.insert_record(conn, make("rb", "b", created=2.0))
    db.insert_record(conn, make("ra", "a", created=3.0))
    db.insert_record(conn, make("rc", "c", created=1.0))
    assert [r.id for r in db.list_records(conn)] == ["rc", "rb", "ra"]
    db.delete_record(conn, "rb")
    assert [r.id for r in db.list_records(conn)] == ["rc", "ra"]


# -- workspaces ----------------------------------------------------------------------------------


def test_workspace_add_is_idempotent_by_path(conn: sqlite3.Connection) -> None:
    ws, created = db.add_workspace(conn, "/src/app", "app")
    again, created_again = db.add_workspace(conn, "/src/app", None)
    same, unchanged = db.add_workspace(conn, "/src/app", "app")
    assert (created, created_again, unchanged) == ("added", None, None)
    assert again == ws == same
    assert db.find_workspace(conn, "app") == again
    assert db.find_workspace(conn, "/src/app") == again
    assert db.find_workspace(conn, ws["id"]) == again
    assert db.find_workspace(conn, "nope") is None
    assert db.list_workspaces(conn) == [again]


def test_a_registered_path_added_with_another_name_is_renamed(conn: sqlite3.Connection) -> None:
    """A registered path added again with another name takes that name; it is not ignored."""
    ws, _ = db.add_workspace(conn, "/src/app", "app")
    renamed, change = db.add_workspace(conn, "/src/app", "webws")
    assert change == "renamed" and renamed == {**ws, "name": "webws"}
    assert db.find_workspace(conn, "webws") == renamed and db.find_workspace(conn, "app") is None


def test_a_workspace_name_is_unique(conn: sqlite3.Connection) -> None:
    ws, _ = db.add_workspace(conn, "/src/app", "app")
    other, _ = db.add_workspace(conn, "/src/lib", None)
    for path in ("/src/lib", "/src/new"):
        with pytest.raises(RoostError) as err:
            db.add_workspace(conn, path, "app")
        assert err.value.code == "name-taken" and err.value.detail["workspace"] == ws["id"]
    assert db.list_workspaces(conn) == [ws, other]
