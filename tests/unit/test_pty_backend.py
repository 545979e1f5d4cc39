"""The agent's terminal (roost.actors.supervisor.pty_backend): a read takes what the pty holds
up to its size, not the 4095 bytes one read of a pty hands over, and loses nothing when the
agent goes."""

from __future__ import annotations

import errno
import os
import sys
import time
from pathlib import Path

import pytest

from roost.actors.supervisor import pty_backend
from roost.actors.supervisor.pty_backend import PosixPty, waiting
from tests import kit

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pty")

WRITER = """
import os, sys, time
from pathlib import Path
os.write(1, b"x" * 10_000 + b"END")
Path(sys.argv[1]).touch()
time.sleep(float(sys.argv[2]))
"""


def start(tmp_path: Path, linger: float) -> tuple[PosixPty, Path]:
    done = tmp_path / "written"
    argv = [sys.executable, "-c", WRITER, str(done), str(linger)]
    pty = PosixPty(argv, str(tmp_path), {"PATH": "/usr/bin:/bin"}, 24, 80)
    kit.wait_until(done.exists)  # every byte is in the pty now: the write returned
    return pty, done


class Source:
    """A pty's side as the read sees it: at most 4095 bytes a read, as Linux's gives."""

    def __init__(self, data: bytes, fail_after: int | None = None) -> None:
        self.data, self.reads, self.fail_after = data, 0, fail_after

    def read(self, fd: int, size: int) -> bytes:
        if self.fail_after is not None and self.reads >= self.fail_after:
            raise OSError(errno.EIO, "gone")
        self.reads += 1
        piece, self.data = self.data[: min(size, 4095)], self.data[min(size, 4095) :]
        return piece


def fake_pty(monkeypatch: pytest.MonkeyPatch, source: Source) -> PosixPty:
    monkeypatch.setattr(os, "read", source.read)
    monkeypatch.setattr(pty_backend, "waiting", lambda fd: bool(source.data))
    pty = PosixPty.__new__(PosixPty)
    pty.fd = 99
    return pty


def test_a_read_takes_what_is_waiting_up_to_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    data = bytes(range(256)) * 80
    source = Source(data)
    pty = fake_pty(monkeypatch, source)
    assert pty.read(8192) == data[:8192]
    assert pty.read(65536) == data[8192:] and source.reads == 3 + 4


def test_an_error_after_a_read_keeps_what_was_read(monkeypatch: pytest.MonkeyPatch) -> None:
    pty = fake_pty(monkeypatch, Source(b"y" * 9000, fail_after=1))
    assert pty.read(65536) == b"y" * 4095
    with pytest.raises(OSError):
        pty.read(65536)


def test_waiting_is_what_the_pty_holds(tmp_path: Path) -> None:
    pty, _ = start(tmp_path, 30)
    try:
        fd = pty.fd
        assert fd is not None
        got = b""
        while not got.endswith(b"END"):
            kit.wait_until(
                lambda: waiting(fd)
            )  # the tty hands what was written to the master a little later
            got += pty.read(65536)
        assert got == b"x" * 10_000 + b"END" and not waiting(fd)
        with pytest.raises(BlockingIOError):  # non-blocking: nothing there is not the end
            pty.read(65536)
    finally:
        pty.signal_group(9)


def test_what_was_read_before_the_agent_went_is_kept(tmp_path: Path) -> None:
    pty, _ = start(tmp_path, 0)
    assert pty.fd is not None
    kit.wait_until(lambda: pty.poll() is not None)  # gone: the pty's last bytes are still there
    got, deadline = b"", time.monotonic() + 10
    while True:
        try:
            more = pty.read(65536)
        except BlockingIOError:  # not handed over yet (the fd does not block)
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.01)
            continue
        except OSError:
            break
        if not more:
            break
        got += more
    assert got == b"x" * 10_000 + b"END"
