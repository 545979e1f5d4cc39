"""The agent in a PTY (roost.actors.supervisor.pty_agent): an agent whose descendant keeps the
PTY open after it exits is still seen to exit, by its pidfd or, where there is none, the poll."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import sys
from pathlib import Path

import pytest

from roost.actors.supervisor import pty_agent
from roost.actors.supervisor.pty_agent import PtyAgent
from roost.actors.supervisor.pty_backend import ExitStatus
from roost.wire.messages import LaunchSpec
from tests import kit

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a POSIX PTY")


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "poll"])
def test_an_exit_behind_a_pty_held_open_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pidfd: bool
) -> None:
    if pidfd and not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd here")
    if pidfd:
        monkeypatch.setattr(pty_agent, "WATCH_S", 3600.0)  # so only the pidfd can see it
    else:
        monkeypatch.setattr(pty_agent, "_pidfd", lambda pid: None)
        monkeypatch.setattr(pty_agent, "WATCH_S", 0.05)

    async def main() -> None:
        exits: list[ExitStatus] = []
        spec = kit.launch_spec(
            argv=["/bin/sh", "-c", "sleep 60 & exit 3"],  # the sleep keeps the PTY open
            cwd=str(tmp_path),
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            rows=24,
            cols=80,
        )
        agent = PtyAgent(spec, lambda data: None, exits.append)
        agent.launch()
        assert agent.pid is not None
        try:
            await asyncio.wait_for(agent.exited.wait(), 10)
            assert [e.to_wire() for e in exits] == [ExitStatus(3, None).to_wire()]
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(agent.pid, signal.SIGKILL)  # the sleep left behind
            for task in list(agent._tasks):
                task.cancel()

    asyncio.run(main())


SLOW_READER = """
import os, sys, termios, time, tty
tty.setraw(0, termios.TCSANOW)  # (TCSAFLUSH, the default, would drop what was typed so far)
time.sleep(float(sys.argv[2]))  # reads nothing meanwhile: its terminal's input buffer fills
want, got = int(sys.argv[3]), bytearray()
while len(got) < want:
    got += os.read(0, 65536)
with open(sys.argv[1], "wb") as fh:
    fh.write(got)
"""


def test_typing_into_an_agent_that_does_not_read_never_blocks_and_keeps_the_order(
    tmp_path: Path,
) -> None:
    data = b"".join(b"%07d\n" % i for i in range(40_000))  # 320 KB: many times a tty's buffer
    out = tmp_path / "read"

    async def main() -> None:
        spec = kit.launch_spec(
            argv=[sys.executable, "-c", SLOW_READER, str(out), "1.0", str(len(data))],
            cwd=str(tmp_path),
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            rows=24,
            cols=80,
        )
        agent = PtyAgent(spec, lambda data: None, lambda status: None)
        agent.launch()
        try:
            loop = asyncio.get_running_loop()
            began = loop.time()
            for at in range(0, len(data), 10_000):
                agent.write(data[at : at + 10_000])
            assert loop.time() - began < 0.5  # never waited for the agent
            assert agent.pending > 0
            await asyncio.wait_for(agent.exited.wait(), 20)
            assert agent.pending == 0
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(agent.pid or 0, signal.SIGKILL)
            for task in list(agent._tasks):
                task.cancel()

    asyncio.run(main())
    assert out.read_bytes() == data  # every byte, in order


TRICKLE = """
import os, sys, time
for i in range(int(sys.argv[1])):
    os.write(1, b"%04d " % i)
    time.sleep(float(sys.argv[2]))
os.write(1, b"END")
time.sleep(30)
"""


def _spec(tmp_path: Path, argv: list[str]) -> LaunchSpec:
    """The launch of ``argv`` in a 24x80 terminal, with only PATH from the environment."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return kit.launch_spec(argv=argv, cwd=str(tmp_path), env=env, rows=24, cols=80)


def _end(agent: PtyAgent) -> None:
    """The agent's process group killed and its tasks cancelled (the test's loop ends next)."""
    if agent.pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(agent.pid, signal.SIGKILL)
    for task in list(agent._tasks):
        task.cancel()


def _reads(tmp_path: Path, argv: list[str], done: bytes, pace: float) -> list[tuple[float, int]]:
    """The supervisor's reads of an agent's output (loop time, bytes) until ``done`` shows."""

    async def main() -> list[tuple[float, int]]:
        loop = asyncio.get_running_loop()
        reads: list[tuple[float, int]] = []
        seen = bytearray()
        ended = asyncio.Event()

        def output(data: bytes) -> None:
            reads.append((loop.time(), len(data)))
            seen.extend(data)
            if done in seen:
                ended.set()

        spec = _spec(tmp_path, argv)
        agent = PtyAgent(spec, output, lambda status: None)
        agent.pace = pace
        agent.launch()
        assert agent.pid is not None
        try:
            await asyncio.wait_for(ended.wait(), 60)
        finally:
            _end(agent)
        return reads

    return asyncio.run(main())


def test_a_trickle_of_output_is_read_at_most_once_a_pace(tmp_path: Path) -> None:
    """200 writes 5 ms apart: without the pace about one read each; with it, reads come at
    least a pace apart (but the first, at once) and every byte arrives."""
    argv = [sys.executable, "-c", TRICKLE, "200", "0.005"]
    unpaced = _reads(tmp_path, argv, b"END", 0.0)
    paced = _reads(tmp_path, argv, b"END", 0.1)
    assert len(unpaced) > 60  # the writes came apart
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(paced)]
    assert min(gaps) >= 0.1 * 0.9
    assert len(paced) < len(unpaced) / 3


def test_paced_reads_say_when_they_end(tmp_path: Path) -> None:
    """While a trickle is read at a pace, ``pacing`` holds; the paced read that finds nothing
    ends it and calls ``on_unpaced`` (the classifier's cue that the output paused)."""

    async def main() -> tuple[list[bool], int, bool]:
        pacing: list[bool] = []  # the flag at each read
        ended, unpaced = asyncio.Event(), asyncio.Event()
        spec = _spec(tmp_path, [sys.executable, "-c", TRICKLE, "40", "0.005"])

        def output(data: bytes) -> None:
            pacing.append(agent.pacing)
            if b"END" in data:
                ended.set()

        agent = PtyAgent(spec, output, lambda status: None)
        agent.pace = 0.05
        calls = [0]

        def on_unpaced() -> None:
            calls[0] += 1
            unpaced.set()

        agent.on_unpaced = on_unpaced
        agent.launch()
        try:
            await asyncio.wait_for(ended.wait(), 60)
            await asyncio.wait_for(unpaced.wait(), 10)
            return pacing, calls[0], agent.pacing
        finally:
            _end(agent)

    pacing, calls, after = asyncio.run(main())
    assert pacing[0] is False and any(pacing[1:])  # the first read at once, the rest paced
    assert calls >= 1 and after is False


def test_a_flood_is_not_held_up_by_the_pace(tmp_path: Path) -> None:
    """20 MB written as fast as the terminal takes it: big reads follow each other at once, so
    a long pace costs the flood nothing like a pace per read."""
    argv = [
        sys.executable,
        "-c",
        "import os\nfor _ in range(320): os.write(1, b'x' * 65536)\n"
        "os.write(1, b'END')\nimport time; time.sleep(30)",
    ]
    reads = _reads(tmp_path, argv, b"END", 1.0)
    took = reads[-1][0] - reads[0][0]
    assert sum(size for _, size in reads) >= 20 * 65536
    assert took < 0.25 * len(reads)  # a full pace per read would be a second each


def test_the_last_words_before_an_exit_are_read_before_the_exit_is_reported(
    tmp_path: Path,
) -> None:
    """An agent that writes, then writes its last words and exits while the pace holds the
    next read: what it wrote is handed on before its exit (the last screen shows it)."""
    if not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd here: the exit is seen at the read")
    script = "import os, time\nos.write(1, b'first ')\ntime.sleep(0.2)\nos.write(1, b'LAST')\n"

    async def main() -> bytes:
        seen = bytearray()
        at_exit: list[bytes] = []
        spec = _spec(tmp_path, [sys.executable, "-c", script])
        agent = PtyAgent(spec, seen.extend, lambda status: at_exit.append(bytes(seen)))
        agent.pace = 30.0  # the read after "first" would come long after the exit
        agent.launch()
        try:
            await asyncio.wait_for(agent.exited.wait(), 20)
        finally:
            for task in list(agent._tasks):
                task.cancel()
        return at_exit[0]

    assert asyncio.run(main()) == b"first LAST"


def test_a_look_between_two_paced_reads_reads_what_waits(tmp_path: Path) -> None:
    """With a long pace, what the agent writes after the first read waits in the terminal; a
    look at the screen (read_now) hands it on at once, and the paced read then finds nothing
    twice."""
    script = (
        "import os, sys, time\nos.write(1, b'first ')\nsys.stdin.readline()\n"
        "os.write(1, b'second')\ntime.sleep(30)\n"
    )

    async def main() -> list[bytes]:
        reads: list[bytes] = []
        spec = _spec(tmp_path, [sys.executable, "-c", script])
        agent = PtyAgent(spec, reads.append, lambda status: None)
        agent.pace = 30.0  # the read after "first" would come 30 s later
        agent.launch()
        assert agent.pid is not None
        try:
            while b"first" not in b"".join(reads):
                await asyncio.sleep(0.01)
            agent.write(b"go\r")
            deadline = asyncio.get_running_loop().time() + 10
            while b"second" not in b"".join(reads):  # the echo of "go", then "second"
                assert asyncio.get_running_loop().time() < deadline, reads
                await asyncio.sleep(0.05)
                agent.read_now()
        finally:
            _end(agent)
        return reads

    reads = asyncio.run(main())
    joined = b"".join(reads)
    assert joined.startswith(b"first ") and joined.endswith(b"second")
    assert joined.count(b"second") == 1
