"""Watching live records' supervisors by pidfd (roost.actors.node.deaths): a death is heard once,
when it happens, with no polling; a pid that is gone, or is another process now, is a death at
once; a record that moves on is no longer watched. The supervisors are real short-lived
processes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from roost.actors.node.deaths import Deaths
from roost.actors.node.launcher import process_started
from roost.actors.state import records as r
from roost.actors.state.records import Record
from roost.wire.messages import Active

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd here")


def live(pid: int, started: float | None, rid: str = "r1") -> Record:
    active: Active = {
        "record": rid,
        "generation": 1,
        "instance": "i1",
        "pid": pid,
        "started": started,
    }
    return Record(rid, None, "echo", "pty", "/", state=r.LIVE, generation=1, active=active)


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


async def _turns(n: int = 10) -> None:
    """Some turns of the event loop, each polling the descriptors without waiting."""
    for _ in range(n):
        await asyncio.sleep(0)


def test_a_watched_supervisor_s_death_is_heard_once() -> None:
    proc = sleeper()

    async def scenario() -> list[str]:
        heard: list[str] = []
        died = asyncio.Event()

        def on_death(record_id: str) -> None:
            heard.append(record_id)
            died.set()

        deaths = Deaths(on_death)
        record = live(proc.pid, process_started(proc.pid))
        deaths.follow(record)
        deaths.follow(record)  # told again (every write is): still one watch
        assert deaths.watched("r1") and heard == []
        proc.kill()
        async with asyncio.timeout(10):
            await died.wait()
        await _turns()  # nothing more comes: the pidfd stays readable, its reader is gone
        deaths.close()
        return heard

    try:
        assert asyncio.run(scenario()) == ["r1"]
    finally:
        proc.kill()
        proc.wait()


def test_a_pid_gone_or_reused_is_a_death_at_once() -> None:
    proc = sleeper()
    proc.kill()
    proc.wait()
    other = sleeper()

    async def scenario() -> list[str]:
        heard: list[str] = []
        deaths = Deaths(heard.append)
        deaths.follow(live(proc.pid, 1.0, "gone"))
        deaths.follow(live(other.pid, 1.0, "reused"))  # alive, but it started at another time
        deaths.close()
        return heard

    try:
        assert asyncio.run(scenario()) == ["gone", "reused"]
    finally:
        other.kill()
        other.wait()


def test_a_record_that_moves_on_is_no_longer_watched() -> None:
    first, second = sleeper(), sleeper()

    async def scenario() -> list[str]:
        heard: list[str] = []
        deaths = Deaths(heard.append)
        deaths.follow(live(first.pid, process_started(first.pid)))
        fds = len(os.listdir("/proc/self/fd"))
        deaths.follow(live(second.pid, process_started(second.pid)))  # a new generation's pid
        assert len(os.listdir("/proc/self/fd")) == fds  # the first pidfd is closed
        dormant = live(second.pid, None)
        dormant.state, dormant.active = r.DORMANT, None
        deaths.follow(dormant)
        assert not deaths.watched("r1")
        for proc in (first, second):
            proc.kill()
            proc.wait()
        await _turns()  # a pidfd still watched would be readable now, and heard
        return heard

    try:
        assert asyncio.run(scenario()) == []
    finally:
        for proc in (first, second):
            proc.kill()
            proc.wait()
