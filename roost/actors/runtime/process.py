"""Process plumbing shared by the actor processes: logging setup, lifelines, the main wrapper.

A child the node owns (state store, adapter host) holds the read end of a pipe whose write end
only the node holds; when the node dies, for any reason, the child reads EOF and exits, so a
restarted node never finds a second writer on its database.

Every long-lived task of a process has an owner (``Tasks``): one that ends with an exception is
logged at once (``task-crashed``, with its name and traceback) and either started again (a
supervisor's loops, within a restart limit) or ends the process, which exits with ``CRASHED``
for its parent to restart (the daemon's ``Child`` policy for the state store and the adapter
host; the service manager, or whoever started it, for the daemon and the hub). No task dies
silently while the rest of the process goes on answering.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from roost.actors.runtime.children import RestartPolicy, decide

log = structlog.get_logger("roost.process")

# The exit status of a process one of whose essential tasks crashed (sysexits' EX_SOFTWARE):
# non-zero, so a parent or service manager that restarts on failure restarts it.
CRASHED = 70


@dataclass(frozen=True)
class LogBound:
    """How big a log file may grow before it is rotated, and how many old files are kept:
    ``<name>.1`` (the newest) .. ``<name>.<keep>``; the oldest beyond that is deleted."""

    max_bytes: int
    keep: int

    @property
    def total(self) -> int:
        """The most the log and its rotated files hold together (plus one line)."""
        return self.max_bytes * (self.keep + 1)


NODE_LOG = LogBound(10 * 1024 * 1024, 3)  # node.log, state.log, adapters.log, hub.log
SUPERVISOR_LOG = LogBound(2 * 1024 * 1024, 2)  # sessions/<record>/supervisor.log


def rotate(path: Path, keep: int) -> None:
    """Shift ``path`` to ``path.1`` and each ``path.N`` to ``path.N+1``, dropping ``.keep``.
    Renames only: a reader following ``path`` sees it replaced (``roost logs --follow``)."""
    for n in range(keep - 1, 0, -1):
        with contextlib.suppress(FileNotFoundError):
            os.replace(f"{path}.{n}", f"{path}.{n + 1}")
    if keep > 0:
        os.replace(path, f"{path}.1")
    else:
        os.unlink(path)


class LogFile:
    """An append-only log file a full disk cannot break: a line the disk refuses (ENOSPC, an
    I/O error) waits in memory (the newest ``BACKLOG``) and goes out before the next line, so
    a log call never raises and a spell of ENOSPC is in the log once space is back.

    Before a line that finds the file at ``bound.max_bytes`` or more, the file is rotated
    (``rotate``) and a new one opened. Each log file has one writing process (the daemon, the
    state store, the adapter host, a record's supervisor); should a second one briefly share it
    (a supervisor handing over to its successor), the one that finds the path already rotated by
    the other just reopens it rather than rotating again."""

    BACKLOG = 500

    def __init__(self, path: Path, bound: LogBound = NODE_LOG) -> None:
        self.path, self.bound = path, bound
        self._fd = self._open()
        self._part = ""
        self._lines: collections.deque[bytes] = collections.deque(maxlen=self.BACKLOG)

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def write(self, text: str) -> int:
        self._part += text
        while "\n" in self._part:
            line, self._part = self._part.split("\n", 1)
            self._lines.append((line + "\n").encode())
        self.flush()
        return len(text)

    def flush(self) -> None:
        if self._lines:
            self._rotate_if_full()
        while self._lines:
            data = self._lines[0]
            try:
                done = os.write(self._fd, data)
            except OSError:
                return
            if done < len(data):
                self._lines[0] = data[done:]  # the rest of the line goes first next time
                return
            self._lines.popleft()

    def _rotate_if_full(self) -> None:
        """Rotate, or follow a rotation done by another writer; on any failure (a full disk
        cannot open the new file) keep writing where we are."""
        try:
            mine = os.fstat(self._fd)
            if mine.st_size < self.bound.max_bytes:
                return
            try:
                rotated = os.stat(self.path).st_ino != mine.st_ino
            except FileNotFoundError:
                rotated = True
            if not rotated:
                rotate(self.path, self.bound.keep)
            fd = self._open()
        except OSError:
            return
        os.close(self._fd)
        self._fd = fd

    def fileno(self) -> int:
        return self._fd


def setup_logging(log_file: Path | None, actor: str, bound: LogBound = NODE_LOG) -> None:
    """JSON lines to ``log_file`` (or stderr), rotated at ``bound``; never tokens, which no
    caller passes to a logger."""
    stream: Any = LogFile(log_file, bound) if log_file else sys.stderr
    logging.basicConfig(stream=stream, level=logging.INFO, format="%(message)s", force=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.PrintLoggerFactory(stream),
        context_class=dict,
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(actor=actor, pid=os.getpid())


def watch_lifeline(fd: int | None, on_lost: Callable[[], None]) -> None:
    """Call ``on_lost`` when the pipe from the parent closes (POSIX only)."""
    if fd is None or sys.platform == "win32":
        return
    loop = asyncio.get_running_loop()

    def readable() -> None:
        try:
            data = os.read(fd, 64)
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(fd)
            on_lost()

    loop.add_reader(fd, readable)


def retitle(words: Sequence[str], name: str) -> bool:
    """Linux: what ``ps`` shows for this process, for a forked child whose command line is still
    its parent's: ``name`` as its name (``comm``, 15 bytes at most) and ``words`` as its command
    line, written over the argument area the kernel shows (``arg_start``..``arg_end`` of
    ``/proc/self/stat``; cut to its size, the rest zeroed). Python keeps copies of its argv, so
    nothing reads that memory again. False where it cannot (another system, an older kernel)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
        stat = Path("/proc/self/stat").read_bytes()
        fields = stat[stat.rindex(b")") + 2 :].split()
        start, end = int(fields[45]), int(fields[46])  # fields 48 and 49: arg_start, arg_end
    except (OSError, ValueError, IndexError, AttributeError):
        return False
    if not 0 < start < end:
        return False
    data = b"\0".join(word.encode() for word in words)[: end - start - 1]
    ctypes.memmove(start, data.ljust(end - start, b"\0"), end - start)
    return True


def run_until_stopped(main: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> None:
    """Run ``main(stop)`` where ``stop`` is set by SIGTERM/SIGINT; a ``TaskCrashed`` out of it
    (logged already) exits the process with ``CRASHED``."""

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        if sys.platform != "win32":
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
        await main(stop)

    try:
        asyncio.run(runner())
    except TaskCrashed:
        raise SystemExit(CRASHED) from None


class TaskCrashed(Exception):
    """A long-lived task ended with an exception (``error``), or kept doing so past its
    restart limit."""

    def __init__(self, name: str, error: BaseException) -> None:
        super().__init__(f"task {name} crashed: {error!r}")
        self.name, self.error = name, error


Factory = Callable[[], Coroutine[Any, Any, Any]]


class Tasks:
    """The long-lived tasks of a process, and their owner. A task that returns has ended as it
    may (a child given up on, a feature that is off); one that ends with an exception is logged
    at once as ``task-crashed`` and, for ``keep``, started again after the ``decide`` back-off
    (the intensity limit of the node's children) or, for ``start`` and past that limit,
    recorded as ``failure`` and reported to ``on_crash`` (the process then stops: see
    ``run_until``)."""

    def __init__(self, on_crash: Callable[[TaskCrashed], None] | None = None) -> None:
        self.on_crash = on_crash
        self.failure: TaskCrashed | None = None  # the first crash that was not restarted
        self._tasks: list[asyncio.Task[Any]] = []
        self._clock = time.monotonic

    def start(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]:
        """Run ``coro``; its crash ends the process (named after the coroutine's function)."""
        task = asyncio.create_task(coro, name=name or getattr(coro, "__qualname__", repr(coro)))
        self._own(task)
        return task

    def keep(
        self, factory: Factory, name: str, policy: RestartPolicy | None = None
    ) -> asyncio.Task[Any]:
        """Run ``factory()`` and, each time it crashes, a fresh ``factory()`` again, within
        ``policy``'s limit; past it the crash is a ``start`` task's."""
        task = asyncio.create_task(self._restarting(factory, name, policy or RestartPolicy()))
        task.set_name(name)
        self._own(task)
        return task

    async def _restarting(self, factory: Factory, name: str, policy: RestartPolicy) -> None:
        restarts: list[float] = []
        while True:
            try:
                await factory()
                return
            except Exception as exc:
                delay = decide(restarts, self._clock(), policy)
                _crashed(name, exc, restart_in=delay)
                if delay is None:
                    raise TaskCrashed(name, exc) from exc
            await asyncio.sleep(delay)
            restarts.append(self._clock())

    def _own(self, task: asyncio.Task[Any]) -> None:
        self._tasks.append(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled() or (error := task.exception()) is None:
            return
        if isinstance(error, TaskCrashed):  # a kept task past its limit: logged as it crashed
            crash = error
        else:
            crash = TaskCrashed(task.get_name(), error)
            _crashed(crash.name, error)
        if self.failure is None:
            self.failure = crash
        if self.on_crash is not None:
            self.on_crash(crash)

    async def cancel(self) -> None:
        """Cancel every task and wait for them to end."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _crashed(name: str, error: BaseException, **extra: Any) -> None:
    log.error("task-crashed", task=name, error=repr(error), exc_info=error, **extra)


def logged_crash(task: asyncio.Task[Any]) -> None:
    """A done callback for a short-lived task: its crash is logged (``task-crashed``), never
    left to asyncio's "exception was never retrieved"."""
    if not task.cancelled() and (error := task.exception()) is not None:
        _crashed(task.get_name(), error)


Named = Coroutine[Any, Any, Any] | tuple[str, Coroutine[Any, Any, Any]]


async def run_until(stop: asyncio.Event, *coros: Named) -> None:
    """Run ``coros`` (each named after its function, or given as ``(name, coroutine)``) as
    tasks until ``stop`` is set, or one of them crashes; then cancel and await them all, and
    raise that crash (``TaskCrashed``: ``run_until_stopped`` exits with ``CRASHED``), so the
    process's parent restarts it rather than it serving on without that task."""
    tasks = Tasks(on_crash=lambda _: stop.set())
    for coro in coros:
        if isinstance(coro, tuple):
            tasks.start(coro[1], coro[0])
        else:
            tasks.start(coro)
    try:
        await stop.wait()
    finally:
        await tasks.cancel()
    if tasks.failure is not None:
        raise tasks.failure


def child_args(
    prog: str, *required: str, optional: tuple[str, ...] = (), flags: tuple[str, ...] = ()
) -> argparse.Namespace:
    """The command line of a child actor the node starts (state store, adapters)."""
    parser = argparse.ArgumentParser(prog=prog)
    for flag in ("--state-dir", "--endpoint", *required):
        parser.add_argument(flag, required=True)
    for flag in optional:
        parser.add_argument(flag)
    for flag in flags:
        parser.add_argument(flag, action="store_true")
    parser.add_argument("--lifeline", type=int)
    return parser.parse_args()


def announce(payload: dict[str, Any]) -> None:
    """The one line the launching CLI reads (and, under systemd, the readiness it waits for);
    then stdout goes to the log."""
    with contextlib.suppress(OSError):
        sys.stdout.write(json.dumps(payload) + "\n")
        sys.stdout.flush()
    if "ready" in payload:
        sd_notify(f"READY=1\nSTATUS=serving\nMAINPID={os.getpid()}")
    else:
        code = (payload.get("error") or {}).get("code", "internal")
        sd_notify(f"STATUS=refused: {code}")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def sd_notify(state: str) -> bool:
    """Tell systemd (a ``Type=notify`` unit: ``$NOTIFY_SOCKET``) how the service is; False when
    not run by systemd or the message did not go. The protocol is one datagram of
    newline-separated ``KEY=value`` lines on a unix socket (an ``@`` is the abstract namespace)."""
    where = os.environ.get("NOTIFY_SOCKET", "")
    if not where or not hasattr(socket, "AF_UNIX"):
        return False
    address = "\0" + where[1:] if where.startswith("@") else where
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(state.encode())
    except OSError:
        return False
    return True
