"""Supervisors forked by the node's zygote (roost.actors.supervisor.zygote): detached and clean as
a supervisor started as its own interpreter, surviving the zygote's death and the node's, and
never forked from code that changed on disk since the zygote started. With ``ROOST_ZYGOTE=0``
the node starts each as an interpreter of its own, and says so."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

import roost
from tests.e2e.conftest import Node, alive, sigkill, stopped, wait_for

ZYGOTE_ARGV = ["-P", "-m", "roost.actors.supervisor", "--zygote"]


def log_events(node: Node) -> list[dict[str, Any]]:
    lines = (node.state_dir / "logs" / "node.log").read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def said(node: Node, event: str) -> list[dict[str, Any]]:
    return [e for e in log_events(node) if e.get("event") == event]


def spawn(node: Node, name: str, *extra: str) -> dict[str, Any]:
    rec: dict[str, Any] = node.run("spawn", "echo", "--name", name, *extra)["record"]
    return rec


def zygote_of(pid: int) -> psutil.Process:
    parent = psutil.Process(pid).parent()
    assert parent is not None and parent.cmdline()[1:] == ZYGOTE_ARGV, parent
    return parent


def status_of(pid: int) -> dict[str, str]:
    fields = dict(
        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return {k: fields[k].strip() for k in ("SigBlk", "SigIgn", "SigCgt")}


def descriptors(pid: int) -> dict[int, str]:
    found = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
    return found


def test_a_forked_supervisor_is_detached_and_holds_nothing_of_the_zygote(
    node: Node, tmp_path: Path
) -> None:
    node.up()
    pty, stream = spawn(node, "a"), spawn(node, "b", "--mode", "stream")
    pid = pty["active"]["pid"]
    zygote = zygote_of(pid)
    assert zygote_of(stream["active"]["pid"]).pid == zygote.pid  # one zygote for the node
    assert zygote.ppid() == node.pid()
    shown = node.run("node", "status")["actors"]["zygote"]
    assert (shown["health"], shown["pid"]) == ("running", zygote.pid)
    assert os.getsid(pid) == pid and os.getpgid(pid) == pid  # its own session and group
    # what ps shows: the record it supervises, not the zygote's command line it was forked with
    assert psutil.Process(pid).cmdline()[:3] == ["roost-supervisor", "--record", pty["id"]]
    assert psutil.Process(pid).name() == "roost-sup"
    mine, its = descriptors(pid), descriptors(zygote.pid)
    assert [mine[fd] for fd in (0, 1, 2)] == [os.devnull] * 3
    assert not {its[0], its[1]} & set(mine.values())  # not the node's pipes to the zygote
    session = str(node.state_dir / "sessions" / pty["id"])
    for target in mine.values():  # its own files, sockets, the PTY, its loop's own fds
        if target.startswith("/") and target != os.devnull and not target.startswith("/dev/"):
            assert target.startswith(session), target
    node.run("prompt", "a", "hello from a fork")
    node.wait_screen("a", "echo: hello from a fork")
    assert node.run("turn", "b", "a turn", "--wait")["turn"]["state"] == "completed"

    # the same session started the usual way: the same signal dispositions and mask
    plain = Node(tmp_path / "plain")
    plain.env["ROOST_ZYGOTE"] = "0"
    try:
        plain.up()
        other = spawn(plain, "c")["active"]["pid"]
        assert "--spec" in psutil.Process(other).cmdline()
        assert psutil.Process(other).ppid() == plain.pid()
        assert said(plain, "zygote-off")
        assert plain.run("node", "status")["actors"]["zygote"]["health"] == "off"
        assert status_of(other) == status_of(pid)
        assert os.getsid(other) == other
    finally:
        plain.kill_all()


def test_sessions_outlive_their_zygote_and_the_next_spawn_gets_a_new_one(node: Node) -> None:
    node.up()
    first = spawn(node, "first")
    zygote = zygote_of(first["active"]["pid"]).pid
    sigkill(zygote)
    assert node.run("node", "status")["actors"]["zygote"]["health"] == "idle"
    node.run("prompt", "first", "after the zygote died")
    node.wait_screen("first", "echo: after the zygote died")
    second = spawn(node, "second")
    assert zygote_of(second["active"]["pid"]).pid != zygote
    assert said(node, "zygote-exited")
    assert node.record("first")["state"] == "live"


def test_the_zygote_ends_with_the_node_and_its_sessions_do_not(node: Node) -> None:
    node.up()
    rec = spawn(node, "kept")
    pid = rec["active"]["pid"]
    zygote = zygote_of(pid).pid
    sigkill(node.pid())
    wait_for(lambda: not alive(zygote), 10, "the zygote to exit with the node")
    assert alive(pid)
    node.up()
    wait_for(lambda: node.record("kept")["state"] == "live", 15, "the session re-attached")
    assert node.record("kept")["active"]["pid"] == pid
    node.run("prompt", "kept", "after the node came back")
    node.wait_screen("kept", "echo: after the node came back")
    node.run("node", "stop")
    assert alive(pid)  # a stopped node stops its zygote, never a session


def test_code_changed_on_disk_is_never_forked(node: Node, tmp_path: Path) -> None:
    code = tmp_path / "code"
    shutil.copytree(
        Path(roost.__file__).parent, code / "roost", ignore=shutil.ignore_patterns("__pycache__")
    )
    node.env.update({"PYTHONPATH": str(code), "PYTHONSAFEPATH": "1"})
    node.up()
    before = spawn(node, "before")["active"]["pid"]
    old = zygote_of(before)
    assert old.environ().get("PYTHONPATH") == str(code)
    module = code / "roost" / "actors" / "supervisor" / "keyboard.py"
    module.write_text(module.read_text() + "\n# upgraded\n")

    after = spawn(node, "after")["active"]["pid"]
    assert psutil.Process(after).ppid() == node.pid()  # started the usual way, of the new code
    assert "--spec" in psutil.Process(after).cmdline()
    wait_for(lambda: not alive(old.pid), 10, "the stale zygote to exit")
    assert [e["why"] for e in said(node, "zygote-stale")] == [f"changed on disk: {module}"]
    later = spawn(node, "later")["active"]["pid"]
    assert zygote_of(later).pid != old.pid  # a zygote of the code on disk now
    for name in ("before", "after", "later"):
        node.run("prompt", name, f"hello {name}")
        node.wait_screen(name, f"echo: hello {name}")


def runtime_of(node: Node) -> Path:
    digest = hashlib.sha256(str(node.state_dir.resolve()).encode()).hexdigest()[:12]
    return Path(node.env["XDG_RUNTIME_DIR"]) / f"roost-{os.getuid()}" / digest


def holding(node: Node, directory: Path) -> psutil.Process | None:
    """The node's process that has a file under ``directory`` open (a session's supervisor)."""
    for proc in node.processes():
        with contextlib.suppress(psutil.Error):
            if any(f.path.startswith(str(directory)) for f in proc.open_files()):
                return proc
    return None


@contextlib.contextmanager
def spawn_as_the_node_dies(node: Node, name: str) -> Iterator[tuple[psutil.Process, str]]:
    """A spawn of ``name`` in flight when the daemon is SIGKILLed: its launch committed and its
    fork request in the zygote's pipe, the zygote stopped (SIGSTOP) so that it has not forked
    yet. Yields the zygote (still stopped) and the record's id."""
    node.up()
    zygote = zygote_of(spawn(node, "first")["active"]["pid"])
    runtime = runtime_of(node)
    cli = None
    os.kill(zygote.pid, signal.SIGSTOP)
    try:
        cli = subprocess.Popen(
            [sys.executable, "-m", "roost", "--json", "spawn", "echo", "--name", name],
            env=node.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: list(runtime.glob("spec-*.msgpack")), 15, "the launch's spec file")
        rid = wait_for(lambda: (rec := node.record(name))["state"] == "starting" and rec["id"], 15)
        sigkill(node.pid())
        yield zygote, rid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(zygote.pid, signal.SIGCONT)
        if cli is not None:
            cli.kill()
            cli.wait(10)


def test_a_supervisor_forked_as_the_node_died_is_adopted_by_the_next_node(node: Node) -> None:
    """The zygote forks the supervisor of a launch whose node has died; the next node knows the
    launch (its instance was committed before the fork) and adopts the supervisor when it
    attaches, however late: no session.lost, the same generation and process."""
    with spawn_as_the_node_dies(node, "b") as (zygote, rid):
        os.kill(zygote.pid, signal.SIGCONT)  # it reads the request the dead node left
        runtime = runtime_of(node)
        wait_for(lambda: not list(runtime.glob("spec-*.msgpack")), 15, "the spec to be read")
        sup = wait_for(lambda: holding(node, node.state_dir / "sessions" / rid), 15)
        with stopped(sup.pid):  # it has not attached when the next node comes up
            node.up()
            assert node.record("b")["state"] == "starting"
        rec = wait_for(lambda: (x := node.record("b"))["state"] == "live" and x, 20)
    assert rec["active"]["pid"] == sup.pid and rec["generation"] == 1
    kinds = [e["kind"] for e in node.run("events", "--id", rid)["events"]]
    assert "session.lost" not in kinds, kinds
    node.run("prompt", "b", "adopted")
    node.wait_screen("b", "echo: adopted")


def test_a_launch_no_supervisor_read_is_withdrawn_by_the_next_node(node: Node) -> None:
    """The node died before the zygote forked: the next node takes the spec file back (the
    zygote, let go later, starts nothing from it) and says the launch was interrupted."""
    with spawn_as_the_node_dies(node, "c") as (zygote, rid):
        node.up()
        assert not list(runtime_of(node).glob("spec-*.msgpack"))
        os.kill(zygote.pid, signal.SIGCONT)
        wait_for(lambda: not alive(zygote.pid), 10, "the old zygote to exit")
    events = node.run("events", "--id", rid)["events"]
    lost = [e["data"]["reason"] for e in events if e["kind"] == "session.lost"]
    assert lost == ["launch-interrupted"]
