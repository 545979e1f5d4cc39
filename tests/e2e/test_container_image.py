"""The real image (deploy/compose/Dockerfile, what deploy/kubernetes runs), built and run by a
container engine: ``roost node run`` as the container's main process (PID 1, no --init), an echo
session spawned inside, the daemon SIGKILLed inside, and the session still answering the next
daemon. tests/e2e/test_container_init.py does the same without an engine (``unshare``); this
one checks the image itself: its user, its entry point's replacement, the roost it installs.
Skipped where no engine (podman or docker) is on PATH or none can run containers."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "compose" / "Dockerfile"


def _engine() -> tuple[str | None, str]:
    """The first engine that answers ``info``, or None and why not."""
    found = [path for name in ("podman", "docker") if (path := shutil.which(name))]
    if not found:
        return None, "no container engine (podman/docker) on this machine"
    why = []
    for path in found:
        done = subprocess.run([path, "info"], capture_output=True, text=True, timeout=60)
        if done.returncode == 0:
            return path, ""
        last = (done.stderr.strip().splitlines() or ["`info` fails"])[-1]
        why.append(f"{path}: {last}")
    return None, f"no container engine (podman/docker) can run here ({'; '.join(why)})"


ENGINE, WHY_NOT = _engine()
pytestmark = [
    pytest.mark.skipif(ENGINE is None, reason=WHY_NOT),
    pytest.mark.timeout(1200),  # a first build installs Debian and PyPI packages
]


def engine(*args: str, check: bool = True, timeout: float = 60) -> str:
    assert ENGINE is not None
    done = subprocess.run([ENGINE, *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    base = next(
        line.split()[1] for line in DOCKERFILE.read_text().splitlines() if line.startswith("FROM ")
    )
    if subprocess.run([str(ENGINE), "pull", base], capture_output=True, timeout=600).returncode:
        pytest.skip(f"the base image {base} cannot be pulled here")
    tag = f"roost:e2e-{uuid.uuid4().hex[:8]}"
    engine("build", "-f", str(DOCKERFILE), "-t", tag, str(ROOT), timeout=1200)
    try:
        yield tag
    finally:
        engine("rmi", "-f", tag, check=False)


class Container:
    """A container of the image whose main process is ``roost node run``."""

    def __init__(self, image: str) -> None:
        self.name = f"roost-e2e-{uuid.uuid4().hex[:8]}"
        # the entry point replaced as the StatefulSet's command does; no --init: PID 1 is roost's
        engine("run", "-d", "--name", self.name, "--entrypoint", "roost", image, "node", "run")

    def roost(self, *args: str, check: bool = True) -> dict[str, Any]:
        out = engine("exec", self.name, "roost", "--json", *args, check=check)
        doc: dict[str, Any] = json.loads(out) if out.strip() else {}
        return doc

    def serving(self) -> int | None:
        pid = self.roost("node", "status", check=False).get("pid")
        return int(pid) if pid else None

    def ready(self, rid: str) -> bool:
        return bool(self.roost("show", rid)["record"]["activity"] == "ready")

    def screen(self, rid: str) -> str:
        return str(self.roost("show", rid, "--screen").get("screen") or "")

    def running(self) -> bool:
        return engine("inspect", "-f", "{{.State.Running}}", self.name).strip() == "true"

    def close(self) -> None:
        engine("rm", "-f", self.name, check=False)


@pytest.fixture
def box(image: str) -> Iterator[Container]:
    made = Container(image)
    try:
        yield made
    finally:
        made.close()


def test_the_image_keeps_sessions_running_when_its_daemon_is_killed(box: Container) -> None:
    first = wait_for(box.serving, 60, "the node in the container to serve")
    assert "node\0run" in engine("exec", box.name, "cat", "/proc/1/cmdline")  # PID 1
    assert engine("exec", box.name, "id", "-un").strip() == "roost"
    rid = box.roost("spawn", "echo", "--name", "s", "--cwd", "/home/roost")["record"]["id"]
    wait_for(lambda: box.ready(rid), 30, "the echo agent to be ready")
    box.roost("prompt", rid, "before")
    wait_for(lambda: "echo: before" in box.screen(rid), 30, "the echo agent's answer")
    supervisor = box.roost("show", rid)["record"]["active"]["pid"]

    engine("exec", box.name, "sh", "-c", f"kill -KILL {first}")

    def next_daemon() -> int | None:
        pid = box.serving()
        return pid if pid != first else None

    wait_for(next_daemon, 60, "a new daemon to serve")
    assert box.running()
    record = box.roost("show", rid)["record"]
    assert record["state"] == "live" and record["active"]["pid"] == supervisor
    wait_for(lambda: box.ready(rid), 30, "the echo agent to be ready again")
    box.roost("prompt", rid, "after")
    wait_for(lambda: "echo: after" in box.screen(rid), 30, "the answer to the next daemon")

    # SIGTERM to PID 1 (`stop`, a pod's deletion) stops the daemon and ends the container cleanly
    engine("stop", "--time", "90", box.name, timeout=120)
    assert engine("inspect", "-f", "{{.State.ExitCode}}", box.name).strip() == "0"
