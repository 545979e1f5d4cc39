"""The terminal backend a supervisor drives: ptyprocess on POSIX, pywinpty on Windows.

Both imports are guarded so the module loads everywhere; ``spawn_pty`` picks the one this OS has.
The supervisor only uses the ``PtyBackend`` protocol: a readable fd (POSIX) or a blocking read (run
in a thread on Windows, where pywinpty forces one), write, resize, signal, and exit status.

On POSIX the terminal's fd is non-blocking: a write takes what the terminal has room for and says
how much that was, so an agent that stops reading (its input buffer holds a few KiB) never
blocks the supervisor's loop; the caller keeps the rest (``PtyAgent``).
"""

from __future__ import annotations

import array
import os
import signal
import sys
from dataclasses import dataclass
from typing import Any, Protocol

from roost.wire.errors import RoostError

if sys.platform != "win32":
    import fcntl
    import termios


@dataclass(frozen=True)
class ExitStatus:
    code: int | None
    signal: int | None

    def to_wire(self) -> dict[str, Any]:
        return {"code": self.code, "signal": self.signal}


class PtyBackend(Protocol):
    pid: int
    fd: int | None

    def read(self, size: int) -> bytes: ...
    def write(self, data: bytes) -> int: ...
    def resize(self, rows: int, cols: int) -> None: ...
    def signal_group(self, sig: int) -> None: ...
    def poll(self) -> ExitStatus | None: ...


class PosixPty:
    """An agent in a POSIX pseudo-terminal; it leads its own session and process group."""

    def __init__(
        self, argv: list[str], cwd: str, env: dict[str, str], rows: int, cols: int
    ) -> None:
        from ptyprocess import PtyProcess

        try:
            self._proc = PtyProcess.spawn(argv, cwd=cwd, env=env, dimensions=(rows, cols))
        except (OSError, FileNotFoundError) as exc:
            raise RoostError(
                "launch-failed",
                f"cannot start {argv[0]!r}: {exc.strerror or exc}",
                {"argv0": argv[0]},
            ) from None
        self.pid: int = self._proc.pid
        self.fd: int | None = self._proc.fd
        os.set_blocking(self._proc.fd, False)
        self._status: ExitStatus | None = None

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes: one read (called when the fd is readable), then more while the
        terminal says more is waiting. A pty hands over at most about 4 KiB a read, so under a
        flood each read cost a turn of the event loop and a transcript write of its own; the
        further reads never block, and an error in one (EIO: the agent has gone) keeps what the
        reads before it returned for the next call to report. A first read that finds nothing
        raises BlockingIOError (a wake-up with nothing to read is not the end)."""
        assert self.fd is not None
        data = os.read(self.fd, size)
        parts, got = [data], len(data)
        while 0 < got < size and waiting(self.fd):
            try:
                more = os.read(self.fd, size - got)
            except OSError:
                break
            if not more:
                break
            parts.append(more)
            got += len(more)
        return data if len(parts) == 1 else b"".join(parts)

    def write(self, data: bytes) -> int:
        """As much of ``data`` as the terminal takes now (0 when its buffer is full)."""
        assert self.fd is not None
        try:
            return os.write(self.fd, data)
        except BlockingIOError:
            return 0

    def resize(self, rows: int, cols: int) -> None:
        self._proc.setwinsize(rows, cols)

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            os.kill(self.pid, sig)

    def poll(self) -> ExitStatus | None:
        if self._status is None and not self._proc.isalive():
            self._status = ExitStatus(self._proc.exitstatus, self._proc.signalstatus)
        return self._status


class WindowsPty:
    """An agent in a Windows ConPTY through pywinpty (reads block: the supervisor uses a thread)."""

    def __init__(
        self, argv: list[str], cwd: str, env: dict[str, str], rows: int, cols: int
    ) -> None:
        import subprocess

        from winpty import PtyProcess

        try:
            self._proc = PtyProcess.spawn(
                subprocess.list2cmdline(argv), cwd=cwd, env=env, dimensions=(rows, cols)
            )
        except OSError as exc:
            raise RoostError("launch-failed", f"cannot start {argv[0]!r}: {exc}") from None
        self.pid = int(self._proc.pid)
        self.fd = None

    def read(self, size: int) -> bytes:
        data = self._proc.read(size)
        return data.encode("utf-8", "replace") if isinstance(data, str) else bytes(data)

    def write(self, data: bytes) -> int:
        self._proc.write(data.decode("utf-8", "replace"))
        return len(data)

    def resize(self, rows: int, cols: int) -> None:
        self._proc.setwinsize(rows, cols)

    def signal_group(self, sig: int) -> None:
        self._proc.terminate(force=sig != signal.SIGTERM)

    def poll(self) -> ExitStatus | None:
        if self._proc.isalive():
            return None
        return ExitStatus(self._proc.exitstatus, None)


def waiting(fd: int) -> bool:
    """Whether the terminal holds bytes a read would return at once (FIONREAD)."""
    count = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, count, True)
    except OSError:
        return False
    return count[0] > 0


def spawn_pty(argv: list[str], cwd: str, env: dict[str, str], rows: int, cols: int) -> PtyBackend:
    if sys.platform == "win32":
        return WindowsPty(argv, cwd, env, rows, cols)
    return PosixPty(argv, cwd, env, rows, cols)
