"""The node's handle on its supervisor fork server (``supervisor/zygote.py``).

Started at the first launch that wants it, not before; started again at a later launch once it
has died (after a failed start not before the back-off of ``RestartPolicy``, at most its
``max_restarts`` times in its window, then not until the window has passed: launches meanwhile
start supervisors the usual way at once);
stopped with the node (end of its stdin: a node that dies closes it too), which leaves the
supervisors it forked running. One request at a time: a fork takes a millisecond or two.

``fork`` gives the new supervisor's pid, or raises ``Unavailable`` when no supervisor was forked,
so the launcher starts one the usual way (``python -m roost.actors.supervisor --spec F``);
``InDoubt`` when the zygote went away while it had the request, so whether it forked is unknown
(the launcher then takes the spec file back before it starts another: never two supervisors for
one launch).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from roost.actors.runtime.children import RestartPolicy, decide, wait_or_kill
from roost.interpreter import python_module

log = structlog.get_logger("roost.zygote")

ARGV = tuple(python_module("roost.actors.supervisor", "--zygote"))
ENABLE_ENV = "ROOST_ZYGOTE"  # "0": every supervisor gets an interpreter of its own
READY_TIMEOUT_S = 10.0  # its imports, on a loaded machine
REPLY_TIMEOUT_S = 10.0  # a fork
STOP_GRACE_S = 3.0
LINE_LIMIT = 1 << 16


class Unavailable(Exception):
    """No supervisor was forked; the message says why."""


class InDoubt(Unavailable):
    """The zygote went away holding the request: a supervisor may or may not have been forked."""


def wanted(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """A fork server where the OS forks (not Windows) and the operator has not said no."""
    return sys.platform != "win32" and environ.get(ENABLE_ENV, "1") != "0"


class Zygote:
    def __init__(
        self,
        argv: Sequence[str] = ARGV,
        policy: RestartPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.argv = list(argv)
        self.policy, self.clock = policy or RestartPolicy(), clock
        self.starts: list[float] = []
        self.pid: int | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._gave_up = False
        self._not_before = 0.0  # no start before then (the back-off after a failed one)

    async def fork(self, spec_path: Path) -> int:
        async with self._lock:
            proc = await self._running()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write((json.dumps({"spec": str(spec_path)}) + "\n").encode())
                await proc.stdin.drain()
                reply = await asyncio.wait_for(read_line(proc.stdout), REPLY_TIMEOUT_S)
            except (OSError, EOFError, TimeoutError, ValueError) as exc:
                await self._discard("no reply to a fork request")
                raise InDoubt(f"the zygote did not answer: {exc!r}") from None
            if "pid" in reply:
                return int(reply["pid"])
            if "stale" in reply:
                log.info("zygote-stale", why=reply["stale"])
                await self._discard("stale")
            raise Unavailable(str(reply.get("stale") or reply.get("error") or reply))

    async def _running(self) -> asyncio.subprocess.Process:
        proc = self._proc
        if proc is not None and proc.returncode is None:
            return proc
        if proc is not None:
            log.warning("zygote-exited", zygote=proc.pid, code=proc.returncode)
            self._proc = self.pid = None
        now = self.clock()
        if now < self._not_before:  # the back-off after a failed start: no waiting meanwhile
            raise Unavailable("the zygote failed to start a moment ago")
        delay = decide(self.starts, now, self.policy)
        if delay is None:
            if not self._gave_up:
                log.error("zygote-failing", starts=len(self.starts), window=self.policy.window)
            self._gave_up = True
            raise Unavailable("the zygote keeps failing")
        self._gave_up = False
        self.starts.append(now)
        try:
            return await self._start()
        except Unavailable:
            self._not_before = self.clock() + delay
            raise

    async def _start(self) -> asyncio.subprocess.Process:
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=LINE_LIMIT,
            )
        except OSError as exc:
            raise Unavailable(f"the zygote could not start: {exc}") from None
        self._proc, self.pid = proc, proc.pid
        assert proc.stdout is not None
        try:
            ready = await asyncio.wait_for(read_line(proc.stdout), READY_TIMEOUT_S)
        except (OSError, EOFError, TimeoutError, ValueError) as exc:
            await self._discard("not ready")
            raise Unavailable(f"the zygote did not start: {exc!r}") from None
        if "ready" not in ready:
            await self._discard("not ready")
            raise Unavailable(f"the zygote did not start: {ready}")
        log.info("zygote-ready", zygote=proc.pid, roost=ready["ready"].get("roost"))
        return proc

    async def _discard(self, why: str) -> None:
        proc, self._proc, self.pid = self._proc, None, None
        if proc is not None:
            await stop_process(proc, 0.5)
            log.info("zygote-stopped", zygote=proc.pid, why=why)

    def status(self) -> dict[str, Any]:
        """``node.status``'s ``actors.zygote``: ``running`` (with its pid), ``idle`` (none now:
        the next launch starts one) or ``failing`` (it kept failing: launches start supervisors
        the usual way until its restart window has passed)."""
        running = self._proc is not None and self._proc.returncode is None
        health = "running" if running else "failing" if self._gave_up else "idle"
        return {
            "kind": "zygote",
            "health": health,
            "pid": self.pid if running else None,
            "starts": len(self.starts),
        }

    async def close(self) -> None:
        """Stop the zygote (its supervisors run on)."""
        async with self._lock:
            proc, self._proc, self.pid = self._proc, None, None
            if proc is not None:
                await stop_process(proc, STOP_GRACE_S)


async def read_line(stream: asyncio.StreamReader) -> dict[str, Any]:
    """One JSON object line; the stream's end is EOFError, anything but an object ValueError."""
    line = await stream.readline()
    if not line:
        raise EOFError("the zygote closed its output")
    got = json.loads(line)
    if not isinstance(got, dict):
        raise ValueError(f"not an object: {line[:80]!r}")
    return got


async def stop_process(proc: asyncio.subprocess.Process, grace: float) -> None:
    """End of its input (it exits on that), then SIGKILL after ``grace``."""
    if proc.stdin is not None:
        proc.stdin.close()
        with contextlib.suppress(OSError):
            await proc.stdin.wait_closed()
    await wait_or_kill(proc, grace)
