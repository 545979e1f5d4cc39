"""A full disk under the state directory, on a 6 MiB tmpfs the test mounts.

What must hold: a request that cannot be committed is refused ``storage-full`` (never accepted
unless committed; never ``timeout``), ``node status`` says so and the state store's log names
ENOSPC; the state store, the supervisors and their spools and transcripts survive it; nothing
accepted is lost; and once space is freed service is back by itself, with no node restart.
Needs root (mount); skipped with the reason elsewhere.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.e2e.conftest import CliError, Node, wait_for

FREE = 24 * 1024  # what the filler leaves free
BIG = "/tool echo " + "z" * 20_000  # an input event, its tool call and its output: ~60 KB


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.fixture
def full_node(disk: Path) -> Iterator[Node]:
    n = Node(disk)
    try:
        yield n
    finally:
        n.kill_all()


def fill(disk: Path, leave: int, name: str = "filler") -> Path:
    """A filler file taking all the space but ``leave`` bytes."""
    filler = disk / name
    with open(filler, "wb", buffering=0) as fh:
        for chunk in (1 << 20, 1 << 12):
            with contextlib.suppress(OSError):
                while True:
                    fh.write(b"\0" * chunk)
        size = fh.tell()
        fh.truncate(max(0, size - leave))
    return filler


def completed(node: Node, op: str) -> bool:
    return bool(node.run("op", op)["state"] == "completed")


def attempt(node: Node, *args: str) -> tuple[str, dict[str, Any]]:
    """A request's outcome: ("ok", doc) or (error code, error document); ``busy`` (a turn still
    running) is waited out."""

    def once() -> tuple[str, dict[str, Any]] | None:
        try:
            return "ok", node.run(*args)
        except CliError as err:
            return None if err.code == "busy" else (err.code, err.doc)

    return wait_for(once, 30, f"{args[:2]} to be answered other than busy")


def test_a_full_disk_refuses_with_storage_full_and_service_comes_back(
    full_node: Node, disk: Path
) -> None:
    node = full_node
    first = node.up()
    env = ["--env", "ROOST_ECHO_DELAY_MS=50"]
    node.run("spawn", "echo", "--name", "s", "--mode", "stream", *env)
    node.run("spawn", "echo", "--name", "p")
    assert node.run("turn", "s", "before", "--wait")["turn"]["state"] == "completed"
    status = node.run("node", "status")
    state_pid = status["actors"]["state"]["pid"]
    supervisors = [r["active"]["pid"] for r in node.run("ls")["records"]]

    filler = fill(disk, FREE)
    outcomes: list[tuple[str, str]] = []
    for i in range(40):
        code, doc = attempt(node, "turn", "s", f"{BIG} {i}", "--op", f"full-{i}")
        outcomes.append((code, f"full-{i}"))
        assert code in ("ok", "storage-full"), f"turn {i}: {code} {doc}"
        if code == "storage-full":
            assert "ENOSPC" in json.dumps(doc) or "full" in doc["error"]["message"]
            break
    else:
        pytest.fail(f"40 turns of ~60 KB fitted in {FREE} bytes: {outcomes}")
    # not a byte left, and an input larger than what the refused turn left allocated in the WAL
    rest = fill(disk, 0, "rest")
    typed = "typed on a full disk " + "y" * 120_000
    code, doc = attempt(node, "prompt", "p", typed, "--op", "full-prompt")
    assert code == "storage-full", doc

    status = node.run("node", "status")
    assert status["storage"]["health"] == "full" and status["storage"]["errno"] == "ENOSPC"
    assert status["actors"]["state"]["pid"] == state_pid  # not crashed, not restarted
    assert all(psutil.pid_exists(pid) for pid in supervisors), "a supervisor died"

    filler.unlink()
    rest.unlink()
    done = node.run("turn", "s", "after the disk was freed", "--wait", timeout=60)
    assert done["turn"]["state"] == "completed"
    node.run("prompt", "p", "typed after")
    node.wait_screen("p", "echo: typed after")
    status = node.run("node", "status")
    assert status["storage"] == {"health": "ok"}
    assert status["incarnation"] == first["incarnation"]
    assert (
        status["actors"]["state"]["pid"] == state_pid and status["actors"]["state"]["restarts"] == 0
    )

    inputs = {e["data"]["text"] for e in node.events() if e["kind"] == "session.input"}
    for code, op in outcomes:
        state = node.run("op", op)["state"]
        if code == "ok":  # accepted: committed, so it ran to its end
            wait_for(functools.partial(completed, node, op), 30, f"{op} to complete")
            assert f"{BIG} {op.split('-')[1]}" in inputs
        else:  # refused: nothing of it committed
            assert state == "unknown" and f"{BIG} {op.split('-')[1]}" not in inputs
    assert node.run("op", "full-prompt")["state"] == "unknown"
    assert typed not in inputs
    log = (node.state_dir / "logs" / "state.log").read_text()
    failed = [json.loads(line) for line in log.splitlines() if '"storage-failed"' in line]
    assert len(failed) == 1 and failed[0]["errno"] == "ENOSPC", failed
    assert '"storage-recovered"' in log
    assert os.path.exists(node.state_dir / "state.db")
