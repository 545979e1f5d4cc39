"""Starting detached supervisor processes and judging whether a process is still the one we know.

A supervisor is started in its own session and process group, with its launch spec in a private
file rather than on argv (the spec holds the agent's environment and the node token). It is
forked by the node's zygote (``zygote.py``) where there is one, else started as an interpreter of
its own (``start_new_session``), which the node polls so none lingers as a zombie. Either way it
reads the same spec file and registers the same way.

A launch is two steps, so that it can be made durable in between: ``prepare`` writes the spec
file, named by the launch's instance, and ``start`` starts the supervisor that reads it. The node
commits the instance (the record ``starting``) between the two. A node that comes up after its
predecessor died finds such a launch in one of two states: its spec file still there (no
supervisor read it: ``withdraw`` takes it back so none ever will), or gone (a supervisor read it
and is on its way to attach).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import msgpack
import psutil
import structlog

from roost.actors.node.zygote import InDoubt, Unavailable, Zygote
from roost.actors.supervisor.terminal import write_private
from roost.interpreter import python_module
from roost.wire.messages import LaunchSpec

log = structlog.get_logger("roost.launcher")

SCRUBBED_ENV = ("ROOST_TOKEN", "ROOST_ACTOR_TOKEN")


def agent_env(
    base: dict[str, str], record_env: dict[str, str], launch_env: dict[str, str]
) -> dict[str, str]:
    """The agent's environment: the node's minus roost's secrets, plus record and adapter env."""
    env = {k: v for k, v in base.items() if k not in SCRUBBED_ENV}
    env.update(record_env)
    env.update(launch_env)
    env.setdefault("TERM", "xterm-256color")
    return env


class Launcher:
    """Starts supervisors (through ``zygote`` when given) and reaps the ones it started itself."""

    def __init__(self, runtime_dir: Path, zygote: Zygote | None = None) -> None:
        self.runtime_dir, self.zygote = runtime_dir, zygote
        self._children: list[subprocess.Popen[bytes]] = []

    def spec_path(self, instance: str) -> Path:
        return self.runtime_dir / f"spec-{instance}.msgpack"

    def prepare(self, spec: LaunchSpec) -> Path:
        """Write the launch's spec file (nothing reads it until ``start``)."""
        path = self.spec_path(spec["instance_id"])
        write_private(path, msgpack.packb(spec, use_bin_type=True))
        return path

    def withdraw(self, instance: str) -> bool:
        """Take back a launch's spec file: True when it was still there (no supervisor read it,
        and none ever will), False when a supervisor has read it (or it never existed)."""
        back = take_back(self.spec_path(instance))
        if back is None:
            return False
        back.unlink(missing_ok=True)
        return True

    def sweep_specs(self, older_than: float) -> int:
        """Remove spec files older than ``older_than`` seconds (launches no supervisor read: a
        node that died between writing one and committing its launch); how many. They hold the
        agent's environment and the node's token."""
        now, removed = time.time(), 0
        for path in self.runtime_dir.glob("spec-*.msgpack"):
            with contextlib.suppress(OSError):
                if now - path.stat().st_mtime > older_than:
                    path.unlink()
                    removed += 1
        return removed

    async def start(self, path: Path) -> int | None:
        """Start the supervisor of the spec file ``path`` (from ``prepare``): its pid (None: one
        was forked, its pid comes with its attach)."""
        if self.zygote is not None:
            try:
                return await self.zygote.fork(path)
            except InDoubt as exc:
                back = take_back(path)
                log.warning("zygote-in-doubt", reason=str(exc), forked=back is None)
                if back is None:
                    return None
                path = back
            except Unavailable as exc:
                log.warning("supervisor-without-zygote", reason=str(exc))
        return self._popen(path)

    def _popen(self, path: Path) -> int:
        kwargs: dict[str, Any] = {
            "stdin": subprocess.DEVNULL,
            "stdout": subprocess.DEVNULL,
            "stderr": subprocess.DEVNULL,
            "close_fds": True,
        }
        if sys.platform == "win32":
            kwargs["creationflags"] = (
                subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.DETACHED_PROCESS
            )
        else:
            kwargs["start_new_session"] = True
        proc = subprocess.Popen(
            python_module("roost.actors.supervisor", "--spec", str(path)), **kwargs
        )
        self._children.append(proc)
        return proc.pid

    def reap(self) -> None:
        self._children = [c for c in self._children if c.poll() is None]

    async def close(self) -> None:
        """Stop the zygote (never a supervisor)."""
        if self.zygote is not None:
            await self.zygote.close()


def take_back(path: Path) -> Path | None:
    """The spec file of a launch whose outcome is unknown, renamed so no supervisor forked for it
    can read it any more (a supervisor unlinks its spec before it does anything); None when one
    already has."""
    back = path.with_name(f"spec-{uuid.uuid4().hex}.msgpack")
    try:
        os.rename(path, back)
    except FileNotFoundError:
        return None
    return back


def process_started(pid: int) -> float | None:
    """When ``pid`` started, in seconds since the epoch (psutil's ``create_time``), or None."""
    if LINUX:
        got = _proc_stat(pid)
        return got[1] if got is not None else None
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


# How far two readings of one process's start time may be apart. A start time in seconds since the
# epoch is the boot time plus the process's start in ticks since boot, and Linux gives the boot
# time in whole seconds (``btime``), recomputed from the wall clock at every read: as the clock is
# adjusted it can step by one second between two reads, so the node that recorded a start time
# and the node that checks it (after a restart) may be a second apart for the same process. A pid
# reused by another process starts far later than that.
SAME_START_S = 2.0


def still_running(pid: int | None, started: float | None) -> bool:
    """True while ``pid`` is alive, not a zombie, and is the process that started at ``started``
    (within ``SAME_START_S``)."""
    if not pid:
        return False
    if LINUX:
        got = _proc_stat(pid)
        if got is None or got[0] in ("Z", "X"):
            return False
        return started is None or abs(got[1] - started) < SAME_START_S
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(proc.create_time() - started) < SAME_START_S
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


LINUX = sys.platform.startswith("linux")
_boot: list[float] = []  # the boot time, read once (psutil reads /proc/stat at every call)


def _proc_stat(pid: int) -> tuple[str, float] | None:
    """A process's state letter and start time from one read of ``/proc/<pid>/stat``, the
    time computed as psutil computes ``create_time``; None when there is no such process.
    The sweep asks this of every live session every second: psutil would read four files."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()  # the name in () may hold spaces
    if not _boot:
        _boot.append(psutil.boot_time())
    return fields[0].decode(), int(fields[19]) / CLOCK_TICKS + _boot[0]


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if LINUX else 100
