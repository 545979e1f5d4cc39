"""``roost node backup DEST``: a consistent copy of the state database while the node serves,
and a restore of it (docs/OPERATIONS.md, Backups)."""

from __future__ import annotations

import sqlite3
import stat
import threading
from pathlib import Path

from tests.e2e.conftest import Node, wait_for


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
