"""An upgrade with live sessions: sessions started by the previous release keep running when the
node is replaced by this one, and this node serves their supervisors.

The previous release is a commit of this repository (``PREVIOUS``, on main, the last one whose
supervisors commit their own input: supervisor wire 2). Its ``roost`` package is
extracted with ``git archive`` and run by the same interpreter with ``PYTHONPATH`` pointing at it
(its dependencies are this one's; ``PYTHONSAFEPATH`` keeps a working directory that is this
checkout out of ``sys.path``). Its node launches supervisors of its own code, which speak
supervisor wire 2; after ``node stop`` (old CLI) and ``node up`` (this code) they re-attach, same
pids, and answer prompts and turns in their own conversations (this node forwards their input, as
they commit it themselves); a stop and a resume then starts a supervisor of this code.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest

import roost
from roost.wire import protocol as p
from tests.e2e.conftest import Node, alive, wait_for

REPO = Path(__file__).resolve().parents[2]
PREVIOUS = "c6bda6a0e86a361bf1c5233c09b1a1c806c540b5"  # main, the last release of wire 2
PREVIOUS_WIRE = {"roost": "0.1.0", "wire": 2}


def previous_release(dest: Path) -> Path:
    """The previous release's ``roost`` package under ``dest``; the test is skipped (with the
    reason) where there is no git or no such commit (a tarball without .git, a shallow clone)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: cannot extract the previous release")
    found = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "-e", f"{PREVIOUS}^{{commit}}"],
        capture_output=True,
    )
    if found.returncode != 0:
        pytest.skip(f"commit {PREVIOUS[:12]} (the previous release) is not in {REPO}")
    dest.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", PREVIOUS, "roost"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    assert (dest / "roost" / "__main__.py").is_file()
    return dest


class OldNode(Node):
    """The same node (state directory, marker) driven by the previous release's CLI."""

    def __init__(self, node: Node, code: Path) -> None:
        self.__dict__.update(node.__dict__)
        # PYTHONSAFEPATH: no process of it puts its working directory (this checkout, when the
        # tests run from it) before PYTHONPATH, which `python -m` does otherwise
        self.env = {**node.env, "PYTHONPATH": str(code), "PYTHONSAFEPATH": "1"}


def pythonpath(pid: int) -> str | None:
    found: str | None = psutil.Process(pid).environ().get("PYTHONPATH")
    return found


def supervisor_of(node: Node, rid: str) -> dict[str, Any] | None:
    supervisor: dict[str, Any] | None = (node.record(rid).get("active") or {}).get("supervisor")
    return supervisor


def test_sessions_of_the_previous_release_survive_an_upgrade(node: Node, tmp_path: Path) -> None:
    code = previous_release(tmp_path / "old")
    old = OldNode(node, code)
    try:
        old.up()
        assert pythonpath(node.pid()) == str(code)  # the daemon runs the previous release
        pty = old.run("spawn", "echo", "--name", "before")["record"]
        stream = old.run("spawn", "echo", "--name", "turns", "--mode", "stream")["record"]
        pty_pid, stream_pid = pty["active"]["pid"], stream["active"]["pid"]
        for pid in (pty_pid, stream_pid):  # their supervisors too
            assert pythonpath(pid) == str(code)
            assert "roost.actors.supervisor" in psutil.Process(pid).cmdline()
        assert pty["active"]["supervisor"] == PREVIOUS_WIRE
        old.run("prompt", "before", "said before the upgrade")
        node.wait_screen("before", "echo: said before the upgrade")
        first = old.run("turn", "turns", "first turn", "--wait")["turn"]
        assert first["state"] == "completed", first
        conversation = first["result"]["provider_session"]
        assert conversation

        old.run("node", "stop")  # the sessions run on, their supervisors waiting for a node
        assert alive(pty_pid) and alive(stream_pid)

        node.up()  # this release, no PYTHONPATH
        assert pythonpath(node.pid()) != str(code)
        wait_for(
            lambda: all(supervisor_of(node, rec["id"]) == PREVIOUS_WIRE for rec in (pty, stream)),
            what="both supervisors re-attached as wire 2",
        )
        for rec, pid in ((pty, pty_pid), (stream, stream_pid)):
            now = node.record(rec["id"])
            assert now["active"]["pid"] == pid and now["state"] == "live", now
            assert now["attention"] is None
        actors = node.run("node", "status")["actors"]
        assert actors[f"session/{pty['id']}"]["wire"] == 2, actors

        node.run("prompt", "before", "said after the upgrade")
        screen = node.wait_screen("before", "echo: said after the upgrade")
        assert "echo: said before the upgrade" in screen  # the same screen, kept across
        second = node.run("turn", "turns", "second turn", "--wait")["turn"]
        assert second["state"] == "completed", second
        assert second["result"]["result"] == "echo: second turn"
        assert second["result"]["provider_session"] == conversation
        assert node.record("turns")["provider_session"] == conversation
        kinds = {e["kind"] for e in node.events()}
        assert "session.supervisor" not in kinds  # served: nothing for the operator to do

        # restarting the session (stop, resume) gives it a supervisor of this release
        node.run("stop", "before")
        resumed = node.run("resume", "before")["record"]
        assert resumed["active"]["pid"] != pty_pid
        assert pythonpath(resumed["active"]["pid"]) != str(code)
        current = {"roost": roost.__version__, "wire": p.SUPERVISOR_WIRE}
        assert resumed["active"]["supervisor"] == current
        node.run("prompt", "before", "said to the new supervisor")
        node.wait_screen("before", "echo: said to the new supervisor")
        actors = node.run("node", "status")["actors"]
        assert actors[f"session/{pty['id']}"]["wire"] == p.SUPERVISOR_WIRE
        assert actors[f"session/{stream['id']}"]["wire"] == 2
    finally:
        node.kill_all()
