"""A container's main process: the node daemon under it, started again when it dies.

In a container the main process is PID 1 of the container's PID namespace, and when PID 1 ends
the kernel kills every process in the namespace (pid_namespaces(7)). A daemon that is the main
process takes its sessions down with it when it crashes or is restarted, where on a host they
live on. ``roost node run`` is the main process instead: it starts the daemon (``node up
--foreground``) as its child and starts it again when it dies (a crash, a SIGKILL, the OOM
killer), after a back-off; the supervisors, detached from the daemon, are reparented to it and
go on, and the new daemon finds them as after a daemon crash on a host. Being PID 1 (or a
child subreaper, under tini or ``docker run --init``), it reaps every orphan that exits.

It ends only when asked to: SIGTERM or SIGINT (``docker stop``, a pod's deletion) stops the
daemon the way ``roost node stop`` does (with ``--stop-sessions``, the sessions first) and then
ends; a daemon that exits with status 0 (``roost node stop`` run inside the container) ends it
too. Sessions left running then end with the container; their records stay as they were, so
the next start cold-resumes those whose restore policy says so, by their provider session ids.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable

BACKOFF_S = (0.5, 30.0)  # the first wait before a restart, doubled up to the second
STABLE_S = 60.0  # a daemon that served this long starts the back-off over when it dies
STOP_GRACE_S = 60.0  # how long a stopping daemon is given before SIGKILL
PR_SET_CHILD_SUBREAPER = 36


def say(text: str) -> None:
    print(f"roost node run: {text}", file=sys.stderr, flush=True)


def become_subreaper() -> None:
    """Orphans of the daemon are reparented to this process (it is PID 1 in a container)."""
    if os.getpid() == 1 or not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


class Init:
    def __init__(self, daemon: list[str], stop: Callable[[int], None]) -> None:
        self.daemon, self._stop = daemon, stop
        self.child: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.wait = BACKOFF_S[0]
        self.stopping = False
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.write_fd, False)

    def _wake(self, signum: int, _frame: object) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping = True
        with contextlib.suppress(OSError):
            os.write(self.write_fd, b"x")

    def start(self) -> None:
        self.child = subprocess.Popen(self.daemon, stdin=subprocess.DEVNULL)
        self.started = time.monotonic()
        say(f"daemon started (pid {self.child.pid})")

    def reap(self) -> int | None:
        """Reap every child that has exited; the daemon's exit status if it was among them."""
        status = None
        while True:
            try:
                pid, raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return status
            if pid == 0:
                return status
            if self.child is not None and pid == self.child.pid:
                status = os.waitstatus_to_exitcode(raw)
                self.child.returncode = status  # Popen must not wait for it again
                self.child = None

    def serve(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGHUP):
            signal.signal(sig, self._wake)
        become_subreaper()
        self.start()
        restart_at: float | None = None
        deadline: float | None = None
        while True:
            timeout = None if restart_at is None else max(0.0, restart_at - time.monotonic())
            if deadline is not None:
                timeout = max(0.0, deadline - time.monotonic())
            with contextlib.suppress(InterruptedError):
                if select.select([self.read_fd], [], [], timeout)[0]:
                    with contextlib.suppress(OSError):
                        os.read(self.read_fd, 512)
            status = self.reap()
            if self.stopping and deadline is None:
                deadline = time.monotonic() + STOP_GRACE_S
                if self.child is None:
                    return 0
                say("stopping the daemon")
                self._stop(self.child.pid)
            if status is not None:
                if self.stopping or status == 0:
                    say("the daemon stopped; ending")
                    return 0
                served = time.monotonic() - self.started
                if served >= STABLE_S:
                    self.wait = BACKOFF_S[0]
                say(f"the daemon exited ({_status(status)}); starting it again in {self.wait:g} s")
                restart_at = time.monotonic() + self.wait
                self.wait = min(self.wait * 2, BACKOFF_S[1])
            if deadline is not None:
                if self.child is None:
                    return 0
                if time.monotonic() >= deadline:
                    say("the daemon did not stop in time; killing it")
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.child.pid, signal.SIGKILL)
                    deadline = time.monotonic() + 5.0
                continue
            if restart_at is not None and time.monotonic() >= restart_at:
                restart_at = None
                self.start()


def _status(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"status {code}"


def stopper(roost: list[str], stop_sessions: bool) -> Callable[[int], None]:
    """How a stop request reaches the daemon: ``roost node stop`` (its sessions stopped first
    if asked), else SIGTERM, which stops it the same way, sessions kept."""

    def stop(pid: int) -> None:
        if stop_sessions:
            argv = [*roost, "node", "stop", "--stop-sessions"]
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                done = subprocess.run(argv, stdin=subprocess.DEVNULL, timeout=STOP_GRACE_S)
                if done.returncode == 0:
                    return
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError as exc:
            if exc.errno != errno.ESRCH:
                raise

    return stop
