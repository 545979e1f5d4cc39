"""``roost node backup DEST``: a consistent copy of the state database while the node serves,
and a restore of it (docs/OPERATIONS.md, Backups)."""

from __future__ import annotations

import json
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

from tests.e2e.conftest import Node, alive, wait_for


def _prompting(node: Node, ref: str, stop: threading.Event, failures: list[str]) -> None:
    n = 0
    while not stop.is_set():
        doc = node.run("prompt", ref, f"line {n}", check=False)
        if "error" in doc:
            failures.append(str(doc["error"]))
        n += 1


def _events(path: Path, upto: int) -> list[tuple[int, str]]:
    uri = path.resolve().as_uri() + "?mode=ro"
    with sqlite3.connect(uri, uri=True) as conn:
        rows = conn.execute("SELECT seq, kind FROM events WHERE seq <= ? ORDER BY seq", (upto,))
        return [(int(seq), str(kind)) for seq, kind in rows]


def test_a_backup_taken_while_prompting_is_whole_and_restores(
    node: Node, project: Path, tmp_path: Path
) -> None:
    node.up("--node-id", "lab-1")
    node.run("spawn", "echo", "--name", "e", "--cwd", str(project))
    node.wait_screen("e", "echo-ready>")
    stop, failures = threading.Event(), list[str]()
    client = threading.Thread(target=_prompting, args=(node, "e", stop, failures))
    client.start()
    try:
        wait_for(lambda: len(node.events()) > 8, 15, "prompts in the event log")
        before = node.run("events", "--after", "0")["last_seq"]
        dest = tmp_path / "backup.db"
        reply = node.run("node", "backup", str(dest))
        assert "last_seq" in node.run("events", "--after", "0")  # it serves meanwhile and after
    finally:
        stop.set()
        client.join()
    assert not failures
    assert reply["path"] == str(dest) and reply["bytes"] == dest.stat().st_size
    assert reply["last_seq"] >= before and reply["seconds"] >= 0
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    with sqlite3.connect(dest) as copied:
        assert copied.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    kept = _events(dest, reply["last_seq"])
    assert [seq for seq, _ in kept] == list(range(1, reply["last_seq"] + 1))
    assert kept == _events(node.state_dir / "state.db", reply["last_seq"])

    again = node.error("node", "backup", str(dest))
    assert again["code"] == "backup-exists" and again["detail"] == {"path": str(dest)}
    assert node.run("node", "backup", str(dest), "--force")["last_seq"] >= reply["last_seq"]

    node.kill_all()  # the machine is lost: the backup is all there is
    restored = Node(tmp_path / "restored")
    restored.state_dir.mkdir(mode=0o700, parents=True)
    (restored.state_dir / "state.db").write_bytes(dest.read_bytes())
    try:
        assert restored.up()["node_id"] == "lab-1"
        record = restored.wait_state("e", "dormant", timeout=20)  # its supervisor is gone
        assert record["provider_session"]
        seqs = [
            e["seq"] for e in restored.run("events", "--after", "0", "--limit", "5000")["events"]
        ]
        assert seqs[: reply["last_seq"]] == list(range(1, reply["last_seq"] + 1))
    finally:
        restored.kill_all()


def _copy_of(dest: Path, root: Path) -> Node:
    """A second state directory holding the backup as its ``state.db`` (0600), no node yet."""
    copy = Node(root)
    copy.state_dir.mkdir(mode=0o700, parents=True)
    (copy.state_dir / "state.db").write_bytes(dest.read_bytes())
    (copy.state_dir / "state.db").chmod(0o600)
    return copy


def _live_with_a_backup(node: Node, project: Path, dest: Path) -> int:
    """Node lab-1 with the echo session ``e`` live, backed up to ``dest``; e's supervisor pid."""
    node.up("--node-id", "lab-1")
    node.run("spawn", "echo", "--name", "e", "--cwd", str(project))
    node.wait_screen("e", "echo-ready>")
    node.run("node", "backup", str(dest))
    supervisor = int(node.record("e")["active"]["pid"])
    assert alive(supervisor)
    return supervisor


def _still_serving(node: Node, supervisor: int, text: str) -> None:
    """The first node's session is untouched: live, the same supervisor, and it answers."""
    record = node.record("e")
    assert record["state"] == "live" and record["active"]["pid"] == supervisor
    assert alive(supervisor)
    node.run("prompt", "e", text)
    node.wait_screen("e", f"echo: {text}")


def test_a_copy_brought_up_beside_its_live_node_is_refused_node_id_conflict(
    node: Node, project: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "backup.db"
    supervisor = _live_with_a_backup(node, project, dest)
    copy = _copy_of(dest, tmp_path / "copy")
    db = copy.state_dir / "state.db"
    before = db.read_bytes()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "roost", "--json", "node", "up"],
            env=copy.env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 1, (proc.stdout, proc.stderr)
        error = json.loads(proc.stdout.strip().splitlines()[-1])["error"]
        assert error["code"] == "node-id-conflict", error
        assert "lab-1" in error["message"] and error["detail"] == {"node_id": "lab-1"}
        said = proc.stdout + proc.stderr
        assert str(copy.state_dir) not in said and str(node.state_dir) not in said
        assert db.read_bytes() == before, "the refused copy's database was written to"
        wal = db.with_name(db.name + "-wal")
        assert not wal.exists() or wal.stat().st_size == 0
        assert not list(copy.state_dir.glob("*.bak"))
        assert copy.error("node", "status")["code"] == "node-not-running"
        # the refused daemon exits (after its error line): no daemon, store or adapter is left
        wait_for(lambda: not copy.processes(), 10, "the copy's refused daemon to exit")
        _still_serving(node, supervisor, "after the refusal")
        # without --json: the same code, said on stderr, exit 1
        plain = subprocess.run(
            [sys.executable, "-m", "roost", "node", "up"],
            env=copy.env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert plain.returncode == 1 and "node-id-conflict" in plain.stderr
        assert str(copy.state_dir) not in plain.stderr + plain.stdout
    finally:
        copy.kill_all()

    # in place of the first node: once it is stopped (with its sessions), the copy comes up
    node.run("node", "stop", "--stop-sessions")
    wait_for(lambda: not alive(supervisor), 15, "the first node's supervisor to exit")
    try:
        assert copy.up()["node_id"] == "lab-1"
        assert copy.wait_state("e", "dormant", timeout=20)["active"] is None
    finally:
        copy.kill_all()


def test_a_copy_given_a_new_node_id_serves_beside_its_node_and_never_touches_it(
    node: Node, project: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "backup.db"
    supervisor = _live_with_a_backup(node, project, dest)
    rid = node.record("e")["id"]
    copy = _copy_of(dest, tmp_path / "copy")
    try:
        both = copy.error("node", "up", "--node-id", "lab-2", "--new-node-id", "lab-2")
        assert both["code"] == "bad-request"
        assert copy.up("--new-node-id", "lab-2")["node_id"] == "lab-2"
        record = copy.record("e")  # the first node's supervisor is not this node's
        assert record["state"] == "dormant" and record["active"] is None
        assert record["last_exit"] == {"lost": "node-id-changed"}
        assert record["provider_session"] == node.record("e")["provider_session"]
        assert [r["state"] for r in copy.run("ls")["records"]] == ["dormant"]
        lost = [e for e in copy.events() if e["kind"] == "session.lost" and e["record"] == rid]
        assert [e["data"]["reason"] for e in lost] == ["node-id-changed"]
        assert copy.run("stop", "e")["record"]["state"] == "dormant"  # a no-op: no signal
        _still_serving(node, supervisor, "beside the copy")
        assert node.run("node", "status")["node_id"] == "lab-1"

        # the id is stored: a plain restart serves it again, and the record stays dormant
        copy.run("node", "stop")
        assert copy.up()["node_id"] == "lab-2"
        assert copy.record("e")["state"] == "dormant"
        # a node serving its directory is not given another id under it
        assert copy.error("node", "up", "--new-node-id", "lab-3")["code"] == "node-running"
        assert copy.up("--new-node-id", "lab-2")["already_running"]  # its own id: no change
        # the new id is now the copy's: a second copy under it is refused while the copy serves
        other = _copy_of(dest, tmp_path / "other")
        try:
            refused = other.error("node", "up", "--new-node-id", "lab-2")
            assert refused["code"] == "node-id-conflict" and refused["detail"]["node_id"] == "lab-2"
            wait_for(lambda: not other.processes(), 10, "the refused daemon to exit")
        finally:
            other.kill_all()
        copy.run("node", "stop")
        _still_serving(node, supervisor, "after the copy stopped")
    finally:
        copy.kill_all()
