"""The actors the node owns as child processes (state store, adapters), restarted one_for_one.

``decide`` is the restart policy as a plain function (OTP-style intensity: at most ``max_restarts``
in ``window`` seconds, with exponential back-off); past the limit the child is reported failed in
``node status`` instead of looping. ``Child`` runs the process and applies the policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

log = structlog.get_logger("roost.children")


async def wait_or_kill(proc: asyncio.subprocess.Process, grace: float) -> None:
    """Wait up to ``grace`` seconds for ``proc`` to exit, then SIGKILL it and reap it."""
    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int = 5
    window: float = 30.0
    backoff_base: float = 0.1
    backoff_max: float = 5.0


def decide(restarts: list[float], now: float, policy: RestartPolicy) -> float | None:
    """Seconds to wait before the next restart, or None when the intensity limit is exceeded."""
    recent = [t for t in restarts if now - t < policy.window]
    if len(recent) >= policy.max_restarts:
        return None
    return min(policy.backoff_max, policy.backoff_base * float(1 << len(recent)))


@dataclass
class Child:
    """One supervised child process; ``argv`` gets ``--lifeline FD`` appended, and
    ``first_only`` too at its first start (not at a restart)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    clock: Callable[[], float] = time.monotonic
    restarts: list[float] = field(default_factory=list)
    health: str = "starting"
    pid: int | None = None
    on_exit: Callable[[], None] | None = None
    first_only: list[str] = field(default_factory=list)
    _proc: asyncio.subprocess.Process | None = None
    _lifeline_w: int | None = None
    _stopping: bool = False  # stop() was called: an exit now is the one asked for

    async def _start(self) -> asyncio.subprocess.Process:
        extra: list[str] = []
        kwargs: dict[str, Any] = {}
        if sys.platform != "win32":
            read_end, self._lifeline_w = os.pipe()
            extra = ["--lifeline", str(read_end)]
            kwargs["pass_fds"] = (read_end,)
        first = [] if self.restarts or self.pid is not None else self.first_only
        proc = await asyncio.create_subprocess_exec(
            *self.argv, *first, *extra, env=self.env, stdin=asyncio.subprocess.DEVNULL, **kwargs
        )
        if extra:
            os.close(int(extra[1]))
        self.pid, self.health = proc.pid, "running"
        return proc

    def _close_lifeline(self) -> None:
        if self._lifeline_w is not None:
            with contextlib.suppress(OSError):
                os.close(self._lifeline_w)
            self._lifeline_w = None

    async def run(self) -> None:
        """Run, and restart on exit per the policy, until cancelled."""
        try:
            while True:
                self._proc = await self._start()
                code = await self._proc.wait()
                self._close_lifeline()
                if self.on_exit is not None:
                    self.on_exit()  # its registrations go at once: callers hear "unavailable"
                if self._stopping:  # the node stopping it (node stop): no warning, no restart
                    log.info("child-stopped", child=self.name, code=code)
                    return
                delay = decide(self.restarts, self.clock(), self.policy)
                log.warning("child-exited", child=self.name, code=code, restart_in=delay)
                if delay is None:
                    self.health, self.pid = "failed", None
                    return
                self.health = "restarting"
                await asyncio.sleep(delay)
                self.restarts.append(self.clock())
        finally:
            await self.stop()

    async def stop(self, grace: float = 3.0) -> None:
        self._stopping = True
        self._close_lifeline()
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        await wait_or_kill(proc, grace)

    def status(self) -> dict[str, Any]:
        return {
            "health": self.health,
            "pid": self.pid,
            "restarts": len(self.restarts),
            "kind": "child",
        }
