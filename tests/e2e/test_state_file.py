"""The node's database file as users will have it: from a newer roost, another node, another OS,
or an older roost (``tests/fixtures/state-v1.db``).

What must hold (roost/actors/state/schema.py): state that is not ours is refused with a stable code,
before anything is written (neither the database nor a backup), by a message that names no host
path; an older schema is backed up beside the database, then migrated, and its records come back
dormant with their provider session ids.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.conftest import Node

FIXTURE_V1 = Path(__file__).resolve().parents[1] / "fixtures" / "state-v1.db"


def _db(node: Node) -> Path:
    return node.state_dir / "state.db"


def _prepared(node: Node, *up: str) -> Path:
    """A database written by a node that has stopped again."""
    node.up(*up)
    assert node.run("node", "stop")["stopped"]
    return _db(node)


def _edit(db: Path, *statements: str) -> None:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        for statement in statements:
            conn.execute(statement)
        conn.commit()


def _refused_up(node: Node, code: str, *extra: str) -> str:
    """``roost node up`` as a user types it; it must fail with ``code``; returns stderr."""
    db = _db(node)
    before = db.read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "roost", "node", "up", *extra],
        env=node.env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode != 0, proc.stdout
    assert code in proc.stderr
    assert str(node.state_dir) not in proc.stderr + proc.stdout
    assert db.read_bytes() == before, "a refused database was written to"
    assert not list(node.state_dir.glob("*.bak")), "a refused database was backed up"
    wal = db.with_name(db.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    assert node.error("node", "status")["code"] == "node-not-running"
    assert not node.processes()
    return proc.stderr


def test_a_database_of_a_newer_schema_is_refused_untouched(node: Node) -> None:
    db = _prepared(node)
    _edit(db, "PRAGMA user_version = 99")
    stderr = _refused_up(node, "durable-state-schema-unsupported")
    assert "99" in stderr


def test_a_database_of_another_node_id_is_refused_untouched(node: Node) -> None:
    _prepared(node, "--node-id", "a")
    _refused_up(node, "durable-state-conflict", "--node-id", "b")
    assert node.up("--node-id", "a")["node_id"] == "a"  # the rightful node still starts


def test_a_database_holding_another_os_paths_is_refused_untouched(node: Node) -> None:
    db = _prepared(node)
    _edit(
        db,
        "INSERT INTO workspaces (id, name, path, created) "
        rf"VALUES ('wforeign', 'win', 'C:\Users\x\proj', {time.time()})",
    )
    stderr = _refused_up(node, "durable-state-path-semantics-unsupported")
    assert "C:" not in stderr and "Users" not in stderr


def test_a_schema_1_database_is_backed_up_migrated_and_resumed_honestly(node: Node) -> None:
    node.state_dir.mkdir(mode=0o700)
    shutil.copyfile(FIXTURE_V1, _db(node))
    fixture = FIXTURE_V1.read_bytes()

    assert node.up()["node_id"] == "fixture-node"
    backup = node.state_dir / "state.db.v1.bak"
    assert backup.exists() and backup.stat().st_mode & 0o077 == 0
    with contextlib.closing(sqlite3.connect(f"{backup.as_uri()}?mode=ro", uri=True)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert FIXTURE_V1.read_bytes() == fixture  # the checked-in fixture stays as it is
    listed = {r["name"]: r for r in node.run("ls")["records"]}
    assert sorted(listed) == ["one", "two"]
    assert all(r["state"] == "dormant" and r["active"] is None for r in listed.values())
    assert listed["one"]["provider_session"] == "3a6ce966-e803-43ea-80ee-030fbc97f091"
    assert listed["two"]["provider_session"] == "08cca3e8-3458-4f20-b9ee-b1da5a62e46b"
    kinds = [e["kind"] for e in node.events()]
    assert kinds[:3] == ["node.started", "workspace.added", "record.created"]
    assert kinds[-1] == "node.started" and len(kinds) == 22  # the 21 of schema 1, and this start

    # The echo agent's conversation files were not part of the old state, so resuming by the
    # provider's id must fail as the agent does, never start a fresh conversation in its place.
    # "two" runs in /tmp; "one" in /tmp/fxproj, which need not exist on this machine.
    identity = listed["two"]["provider_session"]
    resumed = node.run("resume", "two")["record"]
    assert resumed["generation"] == 2 and resumed["provider_session"] == identity
    after = node.wait_state("two", "dormant")
    assert after["last_exit"] == {"code": 2, "signal": None}
    assert after["generation"] == 2 and after["provider_session"] == identity
    shown = node.run("show", "two", "--screen")
    assert f"echo: no session '{identity}' to resume" in shown["last_screen"]
    assert f"resumed {identity}" not in shown["last_screen"]
    sessions = node.state_dir / "providers" / "echo" / "sessions"
    assert not sessions.exists() or not list(sessions.iterdir())
    identities = [e for e in node.events() if e["kind"] == "session.identity"]
    assert [e["data"]["provider_session"] for e in identities] == [
        listed["one"]["provider_session"],
        identity,
    ]
