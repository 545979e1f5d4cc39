"""``roost node run`` as a container's main process, in a container simulated with namespaces:
``unshare --pid --fork --mount-proc --net`` makes it PID 1 of a PID namespace of its own (and a
mount and network namespace), as a container engine does; the test's commands run inside with
``nsenter``. When PID 1 of a namespace ends, the kernel kills every process in it: so the init,
never the daemon, is PID 1, and a daemon killed inside leaves the sessions running."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.e2e.conftest import Node, activity, wait_for

UNSHARE = shutil.which("unshare")
NSENTER = shutil.which("nsenter")


def _namespaces_work() -> bool:
    if UNSHARE is None or NSENTER is None:
        return False
    probe = [UNSHARE, "--pid", "--fork", "--mount-proc", "--net", "true"]
    return subprocess.run(probe, capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(
    not _namespaces_work(),
    reason="no PID, mount and network namespaces here (unshare needs root or user namespaces)",
)


class Box:
    """The simulated container: unshare, and under it the init (PID 1 inside)."""

    def __init__(self, node: Node, *args: str) -> None:
        assert UNSHARE is not None and NSENTER is not None
        argv = [UNSHARE, "--pid", "--fork", "--mount-proc", "--net", "--kill-child"]
        self.outer = subprocess.Popen(
            [*argv, sys.executable, "-P", "-m", "roost", "node", "run", *args],
            env=node.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        self.init = wait_for(self._init, 15, "the init under unshare")
        node.prefix = [NSENTER, "-t", str(self.init.pid), "-p", "-m", "-n", "--"]
        self.node = node

    def _init(self) -> psutil.Process | None:
        kids = psutil.Process(self.outer.pid).children()
        return kids[0] if kids else None

    def daemon(self) -> psutil.Process | None:
        """The node daemon (the init's child), seen from outside."""
        for kid in self.init.children():
            with contextlib.suppress(psutil.Error):  # a zombie, until the init reaps it
                if "roost.actors.node" in " ".join(kid.cmdline()):
                    return kid
        return None

    def serving(self) -> dict[str, object] | None:
        status = self.node.run("node", "status", check=False)
        return status if status.get("pid") else None

    def pid_one(self) -> str:
        """What runs as PID 1 inside."""
        return Path(f"/proc/{self.init.pid}/root/proc/1/cmdline").read_bytes().decode()

    def close(self) -> None:
        if self.outer.poll() is None:
            self.outer.kill()
        self.outer.wait(10)


@pytest.fixture
def box(node: Node) -> Iterator[Box]:
    made = Box(node)
    try:
        yield made
    finally:
        made.close()


def test_a_daemon_killed_in_a_container_leaves_its_sessions_running(
    box: Box, node: Node, project: Path
) -> None:
    wait_for(box.serving, 30, "the node in the box to serve")
    assert "node\0run" in box.pid_one()
    rid = node.run("spawn", "echo", "--name", "s", "--cwd", str(project))["record"]["id"]
    activity(node, rid, "ready")
    supervisor = node.record(rid)["active"]["pid"]
    node.run("prompt", rid, "before")
    node.wait_screen(rid, "echo: before")

    first = box.daemon()
    assert first is not None
    first.send_signal(signal.SIGKILL)
    wait_for(lambda: (d := box.daemon()) is not None and d.pid != first.pid, 30, "a new daemon")
    wait_for(box.serving, 30, "the new daemon to serve")

    assert box.outer.poll() is None and "node\0run" in box.pid_one()
    record = node.record(rid)
    assert record["state"] == "live" and record["active"]["pid"] == supervisor
    node.run("prompt", rid, "after")
    node.wait_screen(rid, "echo: after")

    # `roost node stop` inside ends the container, as the daemon's own stop
    # the command itself is a process of the box: it may be killed as the box ends (rc -9)
    argv = [*node.prefix, sys.executable, "-P", "-m", "roost", "--json", "node", "stop"]
    done = subprocess.run(argv, env=node.env, capture_output=True, timeout=60)
    assert done.returncode in (0, -signal.SIGKILL), done
    assert box.outer.wait(30) == 0


def test_sigterm_to_the_init_stops_the_daemon_and_a_new_box_resumes_its_sessions(
    box: Box, node: Node, project: Path
) -> None:
    """SIGTERM (docker stop, a pod's deletion) stops the daemon, sessions kept, and ends the
    box; its sessions end with it. The next start (a new pod on the same volume) finds them
    lost and cold-resumes those whose restore policy is resume, by their provider ids."""
    wait_for(box.serving, 30, "the node in the box to serve")
    spawned = node.run(
        "spawn", "echo", "--name", "s", "--cwd", str(project), "--restore", "resume"
    )["record"]
    rid = spawned["id"]
    activity(node, rid, "ready")
    conversation = node.record(rid)["provider_session"]
    box.init.send_signal(signal.SIGTERM)
    assert box.outer.wait(30) == 0

    again = Box(node)
    try:
        wait_for(again.serving, 30, "the node in the new box to serve")
        back = node.wait_state(rid, "live", timeout=30)
        assert back["generation"] == 2 and back["provider_session"] == conversation
        activity(node, rid, "ready")
    finally:
        again.close()
