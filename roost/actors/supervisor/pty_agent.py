"""The agent of a ``pty``-mode session: its PTY, output pump, exit detection and termination.

Output goes to a callback as it arrives; the exit (with its status) to another, exactly once.
What is typed goes to the terminal as fast as the agent reads it: what the terminal has no room
for waits here, in order, and is written as the terminal becomes writable, so an agent that
stops reading never blocks the supervisor (``pending`` says how much waits).
Termination is SIGTERM (and SIGCONT, for a stopped agent) to the agent's process group, then
SIGKILL after the grace period.
The exit is seen when the PTY closes, and, for an agent whose descendants keep the PTY open
after it exits, when the agent's process ends: on Linux a pidfd becomes readable then (no
wake-up while the agent runs); elsewhere a poll every ``WATCH_S`` is the backstop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from roost.actors.runtime.process import logged_crash
from roost.actors.supervisor.pty_backend import ExitStatus, PtyBackend, spawn_pty
from roost.wire.messages import LaunchSpec

log = structlog.get_logger("roost.pty")

READ_CHUNK = 65536
# The longest line a terminal in canonical mode takes (Linux: its 4096-byte line buffer less the
# line's end); it drops the bytes past it.
CANON_LINE_MAX = 4095
WATCH_S = 1.0  # where there is no pidfd (not Linux, or a kernel before 5.3)
# While output trickles in (a TUI repainting as its answer streams: dozens of small writes a
# second), the terminal is read at most once a READ_PACE_S: each read costs the supervisor a
# wake-up, a transcript write, a publish and a timer whatever its size, which made most of what
# a streamed answer cost. The first read after a pause in the output is at once (typing is
# echoed without delay), and a read of PACE_BELOW bytes or more is followed by the next at once:
# a pty hands over at most its line discipline's 4 KiB buffer (less its last byte) while more
# waits behind it, so a read that size means a writer faster than the pace (a flood), which is
# never held up.
READ_PACE_S = 0.05
# The pace while nobody subscribes to the session's output: only the screen (read by the
# classifier about once a second while output flows) and the transcript take it then. Output
# is quiet once a paced read finds nothing, so a pty turn's end is seen at most two paces after
# its last byte (0.6 s), plus a classification: within a second. Each paced read costs a
# wake-up (most of what a streamed answer costs an unwatched supervisor), so this is as long as
# that bound allows.
UNWATCHED_PACE_S = 0.3
PACE_BELOW = 4095


class PtyAgent:
    def __init__(
        self,
        spec: LaunchSpec,
        on_output: Callable[[bytes], None],
        on_exit: Callable[[ExitStatus], None],
    ) -> None:
        self.spec, self._on_output, self._on_exit = spec, on_output, on_exit
        self.pace = READ_PACE_S  # 0: every output is read as it comes
        self.pty: PtyBackend | None = None
        self.exit: ExitStatus | None = None
        self.exited = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._unwritten = bytearray()  # typed, not yet taken by the terminal
        self.on_drained: Callable[[], None] | None = None  # the terminal took all that waited
        self._reading_now = False  # read_now under way (its output may look at the screen)
        # Reads are paced: the next is due a pace from now. Whoever waits for the output to
        # pause needs no timer of its own while this holds: ``on_unpaced`` is called when it
        # ends (a paced read found nothing, or so much that the reader takes over).
        self.pacing = False
        self.on_unpaced: Callable[[], None] | None = None

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(logged_crash)

    @property
    def pid(self) -> int | None:
        return self.pty.pid if self.pty is not None else None

    def launch(self) -> None:
        spec = self.spec
        self.pty = spawn_pty(spec["argv"], spec["cwd"], spec["env"], spec["rows"], spec["cols"])
        loop = asyncio.get_running_loop()
        if self.pty.fd is not None:
            loop.add_reader(self.pty.fd, self._readable)
        else:
            self._spawn(self._read_thread())
        self._spawn(self._watch())

    def line_max(self) -> int | None:
        """The longest line the agent's terminal takes now: ``CANON_LINE_MAX`` bytes while it is
        in canonical mode (ICANON: the terminal edits a line and hands it over whole, cut at its
        limit), None while the agent reads every byte (or where there is no terminal mode)."""
        if self.pty is None or self.pty.fd is None or self.exit is not None:
            return None
        import termios  # POSIX only, as a PTY with an fd is

        try:
            lflag = termios.tcgetattr(self.pty.fd)[3]
        except (termios.error, OSError):
            return None
        return CANON_LINE_MAX if lflag & termios.ICANON else None

    @property
    def pending(self) -> int:
        """Bytes typed that the terminal has not taken yet."""
        return len(self._unwritten)

    def write(self, data: bytes) -> None:
        """Type ``data`` after whatever still waits; never blocks."""
        assert self.pty is not None
        if self.exit is not None or not data:
            return
        if self._unwritten:
            self._unwritten += data
            return
        written = self.pty.write(data)
        if written < len(data):
            self._unwritten += data[written:]
            assert self.pty.fd is not None  # a backend without an fd writes all at once
            asyncio.get_running_loop().add_writer(self.pty.fd, self._writable)

    def _writable(self) -> None:
        assert self.pty is not None and self.pty.fd is not None
        try:
            written = self.pty.write(bytes(self._unwritten[:READ_CHUNK]))
        except OSError:  # the agent has gone: its exit is seen on the read side
            written = len(self._unwritten)
        del self._unwritten[:written]
        if not self._unwritten:
            asyncio.get_running_loop().remove_writer(self.pty.fd)
            if self.on_drained is not None:
                self.on_drained()

    def resize(self, rows: int, cols: int) -> None:
        assert self.pty is not None
        self.pty.resize(rows, cols)

    def _readable(self) -> None:
        """The terminal has output: read it; a small read starts the pace (``READ_PACE_S``)."""
        assert self.pty is not None and self.pty.fd is not None
        try:
            data = self.pty.read(READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if self._take(data) and self.pace > 0 and len(data) < PACE_BELOW:
            asyncio.get_running_loop().remove_reader(self.pty.fd)
            asyncio.get_running_loop().call_later(self.pace, self._paced)
            self.pacing = True

    def _paced(self) -> None:
        """A pace after a small read: read what came meanwhile and wait another pace; when
        nothing came (the output paused) or a read was big, wait on the terminal again. While
        output flows the terminal is read by this timer alone (no reader to remove and add
        back at each read)."""
        pty = self.pty
        if pty is None or pty.fd is None:
            return
        loop = asyncio.get_running_loop()
        try:
            data = pty.read(READ_CHUNK)
        except BlockingIOError:
            loop.add_reader(pty.fd, self._readable)
            self._unpaced()
            return
        except OSError:
            data = b""
        if not self._take(data):
            self._unpaced()
            return
        if len(data) < PACE_BELOW:
            loop.call_later(self.pace, self._paced)
        else:
            loop.add_reader(pty.fd, self._readable)
            self._unpaced()

    def _unpaced(self) -> None:
        self.pacing = False
        if self.on_unpaced is not None:
            self.on_unpaced()

    def read_now(self) -> None:
        """Hand on what the terminal holds now, without waiting for the pace: a look at the
        screen (a client's, the classifier's, the typing's) between two paced reads sees all
        the agent has written. The paced read or the reader still comes as planned (and finds
        less, or nothing); the end of the output is left to them."""
        pty = self.pty
        if pty is None or pty.fd is None or self.exit is not None or self._reading_now:
            return
        self._reading_now = True
        try:
            self._hand_on_waiting(until_short=True)  # a flood is the reader's, not a look's
        finally:
            self._reading_now = False

    def _take(self, data: bytes) -> bool:
        """Hand a read's output on; an empty read (the terminal closed) ends the reading and
        reaps the agent. Whether the terminal is still open."""
        assert self.pty is not None and self.pty.fd is not None
        if not data:
            asyncio.get_running_loop().remove_reader(self.pty.fd)
            self._drop_unwritten()
            self._spawn(self._reap())
            return False
        self._on_output(data)
        return True

    async def _read_thread(self) -> None:
        assert self.pty is not None
        while True:
            try:
                data = await asyncio.to_thread(self.pty.read, READ_CHUNK)
            except (OSError, EOFError):
                data = b""
            if not data:
                await self._reap()
                return
            self._on_output(data)

    async def _reap(self) -> None:
        assert self.pty is not None
        while (status := self.pty.poll()) is None:
            await asyncio.sleep(0.05)
        if self.exit is None:
            self._drain()
            self.exit = status
            self._drop_unwritten()
            log.info("agent-exited", **status.to_wire())
            self.exited.set()
            self._on_exit(status)

    def _drain(self) -> None:
        """Hand on what the terminal still holds when the agent has ended (its last words, in a
        read the pace put off or its exit came before), so the last screen shows them."""
        if self.pty is not None and self.pty.fd is not None:
            self._hand_on_waiting(until_short=False)

    def _hand_on_waiting(self, *, until_short: bool) -> None:
        """Read what the terminal holds now and hand it on: at most 4 MiB (a descendant that
        writes on cannot hold us here), and with ``until_short`` no further than a read shorter
        than a full one (the terminal had no more then)."""
        assert self.pty is not None
        for _ in range(64):
            try:
                data = self.pty.read(READ_CHUNK)
            except OSError:  # BlockingIOError: nothing more now; EIO: the terminal is closed
                return
            if not data:
                return
            self._on_output(data)
            if until_short and len(data) < PACE_BELOW:
                return

    def _drop_unwritten(self) -> None:
        if self._unwritten and self.pty is not None and self.pty.fd is not None:
            log.warning("input-not-typed", bytes=len(self._unwritten), reason="the agent ended")
            asyncio.get_running_loop().remove_writer(self.pty.fd)
            self._unwritten.clear()

    async def _watch(self) -> None:
        """A backstop for agents whose descendants keep the PTY open after they exit."""
        assert self.pty is not None
        pidfd = _pidfd(self.pty.pid)
        if pidfd is not None:
            try:
                await self._ended(pidfd)
            finally:
                os.close(pidfd)
            await self._reap()
            return
        while not self.exited.is_set():
            await asyncio.sleep(WATCH_S)
            if self.pty.poll() is not None:
                await self._reap()

    async def _ended(self, pidfd: int) -> None:
        """Until the process ``pidfd`` refers to has ended (its pidfd turns readable)."""
        loop = asyncio.get_running_loop()
        ended = loop.create_future()
        loop.add_reader(pidfd, _settle, ended)
        try:
            await ended
        finally:
            loop.remove_reader(pidfd)

    async def terminate(self, grace: float) -> None:
        if self.pty is None or self.exited.is_set():
            return
        self.pty.signal_group(signal.SIGTERM)
        self.pty.signal_group(signal.SIGCONT)  # a stopped agent takes its SIGTERM now
        try:
            await asyncio.wait_for(self._wait_exit(), grace)
        except TimeoutError:
            log.warning("agent-kill", reason="SIGTERM grace expired")
            self.pty.signal_group(signal.SIGKILL)
            await self._wait_exit()

    async def _wait_exit(self) -> None:
        assert self.pty is not None
        while not self.exited.is_set():
            if self.pty.poll() is not None:
                await self._reap()
            await asyncio.sleep(0.02)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _pidfd(pid: int) -> int | None:
    """A pidfd for ``pid``, or None where the system has none (then the poll is the backstop)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    with contextlib.suppress(OSError):
        return int(opener(pid))
    return None
