"""One node per node id on a machine (roost.actors.runtime.idlock), and a daemon's claim of its
identity before it writes its database (roost.actors.node.identity)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from roost.actors.node import identity
from roost.actors.runtime import idlock
from roost.actors.state import db, eventlog
from roost.actors.state.records import DORMANT, LIVE, Record
from roost.client import locate
from roost.wire.errors import RoostError

HOLDER = """
import sys
from roost.actors.runtime.idlock import hold_node_id
held = hold_node_id(sys.argv[1])
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin (or kills us)
"""


@pytest.fixture
def base(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """This test's runtime base: XDG_RUNTIME_DIR in tmp_path, no ROOST_RUNTIME_DIR."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    monkeypatch.delenv("ROOST_RUNTIME_DIR", raising=False)
    (tmp_path / "xdg").mkdir(mode=0o700)
    return tmp_path / "xdg" / f"roost-{os.getuid()}"


@pytest.fixture
def holder(base: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """Processes started by ``hold_elsewhere``; each is killed and reaped at the end."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()  # a holder's own child (unshare's) sees EOF too


def hold_elsewhere(
    procs: list[subprocess.Popen[str]], node_id: str, prefix: tuple[str, ...] = ()
) -> subprocess.Popen[str]:
    """A process (of its own) that holds ``node_id`` until it is killed; returns once it does."""
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-c", HOLDER, node_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    procs.append(proc)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held", "the holder did not take the node id"
    return proc


def conflict(node_id: str) -> RoostError:
    with pytest.raises(RoostError) as info:
        idlock.hold_node_id(node_id)
    return info.value


def test_a_node_id_held_by_a_live_process_is_refused_naming_the_id_only(
    base: Path, holder: list[subprocess.Popen[str]]
) -> None:
    hold_elsewhere(holder, "lab-1")
    err = conflict("lab-1")
    assert err.code == "node-id-conflict" and err.detail == {"node_id": "lab-1"}
    assert "'lab-1'" in err.message and "--new-node-id" in err.message
    assert str(base.parent) not in err.message + repr(err.detail)
    other = idlock.hold_node_id("lab-2")  # another id is free
    other.release()
    path = base / idlock.IDS_DIR / "lab-1.lock"
    assert idlock.node_id_lock("lab-1") == path
    assert stat.S_IMODE((base / idlock.IDS_DIR).stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_lock_goes_with_its_holder_even_by_sigkill(
    base: Path, holder: list[subprocess.Popen[str]]
) -> None:
    proc = hold_elsewhere(holder, "lab-1")
    assert conflict("lab-1").code == "node-id-conflict"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    held = idlock.hold_node_id("lab-1")  # at once: no stale lock to wait out or clean up
    try:
        assert (base / idlock.IDS_DIR / "lab-1.lock").exists()  # the file stays, held by us
        assert conflict("lab-1").code == "node-id-conflict"  # a second holder in this process
    finally:
        held.release()
    idlock.hold_node_id("lab-1").release()


def test_a_holder_in_another_pid_namespace_is_seen(
    base: Path, holder: list[subprocess.Popen[str]]
) -> None:
    unshare = shutil.which("unshare")
    # --kill-child: the holder (pid 1 of its namespace) dies with unshare, which the test kills
    prefix = (str(unshare), "--pid", "--fork", "--kill-child") if unshare else ()
    if not prefix or subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("no new PID namespace here (unshare --pid needs root or user namespaces)")
    hold_elsewhere(holder, "lab-1", prefix=prefix)
    assert conflict("lab-1").code == "node-id-conflict"


def test_a_node_id_that_is_no_file_name_is_refused_before_any_file(base: Path) -> None:
    for bad in ("../x", "a/b", "hub", "", ".hidden"):
        with pytest.raises(RoostError) as info:
            idlock.hold_node_id(bad)
        assert info.value.code == "bad-request", bad
    assert not (base / idlock.IDS_DIR).exists() or not any((base / idlock.IDS_DIR).iterdir())


def test_roost_runtime_dir_moves_the_sockets_not_the_node_id_locks(
    base: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ROOST_RUNTIME_DIR", str(tmp_path / "rt"))
    assert locate.runtime_dir(tmp_path / "state") == tmp_path / "rt"
    assert idlock.node_id_lock("lab-1").parent == base / idlock.IDS_DIR


def test_two_state_directories_never_share_a_runtime_directory(
    base: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    apart = [locate.runtime_dir(first), locate.runtime_dir(second)]
    assert apart[0] != apart[1] and {p.parent for p in apart} == {base}
    held = [idlock.hold_runtime_dir(p) for p in apart]  # each its own
    for lock in held:
        lock.release()
    # one ROOST_RUNTIME_DIR for both: the second daemon is refused, not given the first's sockets
    monkeypatch.setenv("ROOST_RUNTIME_DIR", str(tmp_path / "shared"))
    taken = idlock.hold_runtime_dir(locate.runtime_dir(first))
    try:
        with pytest.raises(RoostError) as info:
            idlock.hold_runtime_dir(locate.runtime_dir(second))
        assert info.value.code == "node-running"
        assert str(tmp_path) not in info.value.message
    finally:
        taken.release()
    idlock.hold_runtime_dir(locate.runtime_dir(second)).release()


# -- identity.claim: the daemon's first step after the state directory's lock ------------------


def node_state(state_dir: Path, node_id: str) -> Path:
    """A state.db of ``node_id`` with a live record (its supervisor: this test process) and a
    dormant one, as a backup of a serving node holds them."""
    state_dir.mkdir(mode=0o700)
    path = state_dir / "state.db"
    conn, _ = db.open_db(path, node_id)
    try:
        live = Record(
            id="rlive", name="e", provider="echo", mode="pty", cwd="/work", state=LIVE,
            generation=3, provider_session="p-1", activity="ready",
            active={"record": "rlive", "generation": 3, "pid": os.getpid(), "instance": "i1"},
        )  # fmt: skip
        db.insert_record(conn, live)
        db.insert_record(
            conn, Record(id="rold", name="old", provider="echo", mode="pty", cwd="/work")
        )
        db.update_record(conn, "rold", {"state": DORMANT})
    finally:
        conn.close()
    return path


def rows(path: Path) -> dict[str, tuple[str, bytes | None]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        found = conn.execute("SELECT id, state, active FROM records").fetchall()
    return {rid: (state, active) for rid, state, active in found}


def test_a_claim_of_a_held_node_id_leaves_the_database_untouched(
    base: Path, holder: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    path = node_state(tmp_path / "copy", "lab-1")
    before = path.read_bytes()
    hold_elsewhere(holder, "lab-1")
    with pytest.raises(RoostError) as info:
        identity.claim(tmp_path / "copy", None)
    assert info.value.code == "node-id-conflict"
    assert path.read_bytes() == before
    # and the runtime directory it took first is free again for the next try
    idlock.hold_runtime_dir(locate.runtime_dir(tmp_path / "copy")).release()


def test_a_claim_holds_the_stored_id_for_the_daemons_life(base: Path, tmp_path: Path) -> None:
    node_state(tmp_path / "state", "lab-1")
    held = identity.claim(tmp_path / "state", None)
    try:
        assert held.node_id == "lab-1" and held.dormant == []
        assert conflict("lab-1").code == "node-id-conflict"
        assert rows(tmp_path / "state" / "state.db")["rlive"][0] == LIVE  # the sweep's, later
    finally:
        held.release()
    idlock.hold_node_id("lab-1").release()
    (tmp_path / "fresh").mkdir(mode=0o700)
    fresh = identity.claim(tmp_path / "fresh", "lab-9")  # a first start: the id it is given
    try:
        assert fresh.node_id == "lab-9" and conflict("lab-9").code == "node-id-conflict"
        with contextlib.closing(sqlite3.connect(tmp_path / "fresh" / "state.db")) as conn:
            assert db.get_meta(conn, "node_id") == "lab-9"
    finally:
        fresh.release()


def test_a_new_node_id_makes_the_copys_active_records_dormant_without_a_signal(
    base: Path, holder: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    path = node_state(tmp_path / "copy", "lab-1")
    hold_elsewhere(holder, "lab-1")  # the node the copy was taken from serves on
    held = identity.claim(tmp_path / "copy", None, "lab-2")  # its supervisor: this very process
    try:
        assert held.node_id == "lab-2" and held.dormant == ["rlive"]
        assert conflict("lab-2").code == "node-id-conflict"
    finally:
        held.release()
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        assert db.get_meta(conn, "node_id") == "lab-2"
        record = db.get_record(conn, "rlive")
        assert (record.state, record.active, record.activity) == (DORMANT, None, None)
        assert record.last_exit == {"lost": identity.NODE_ID_CHANGED}
        assert (record.generation, record.provider_session) == (3, "p-1")  # resumable by id
        assert db.get_record(conn, "rold").last_exit is None  # a dormant record is left alone
        events = eventlog.events_since(conn, 0, 100)
    finally:
        conn.close()
    tail = [(e["kind"], e["record"], e["data"]) for e in events[-2:]]
    assert tail == [
        ("session.lost", "rlive", {"reason": "node-id-changed", "interrupted_turns": []}),
        ("record.state", "rlive", {"from": LIVE, "to": DORMANT}),
    ]
    # the same id again is no change: nothing more is written
    size = len(events)
    identity.claim(tmp_path / "copy", None, "lab-2").release()
    with contextlib.closing(sqlite3.connect(path)) as again:
        assert eventlog.last_seq(again) == events[size - 1]["seq"]
