"""Process plumbing shared by the actor processes: logging setup, lifelines, the main wrapper.

A child the node owns (state store, adapter host) holds the read end of a pipe whose write end
only the node holds; when the node dies, for any reason, the child reads EOF and exits, so a
restarted node never finds a second writer on its database.
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
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog


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


def run_until_stopped(main: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> None:
    """Run ``main(stop)`` where ``stop`` is set by SIGTERM/SIGINT."""

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        if sys.platform != "win32":
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
        await main(stop)

    asyncio.run(runner())


async def run_until(stop: asyncio.Event, *coros: Coroutine[Any, Any, Any]) -> None:
    """Run ``coros`` as tasks until ``stop`` is set, then cancel and await them all."""
    tasks = [asyncio.create_task(c) for c in coros]
    await stop.wait()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


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
