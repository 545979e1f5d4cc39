"""Starting supervisors and judging their liveness (roost.actors.node.launcher)."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from roost.actors.node import launcher as launching


def test_start_times_match_psutil_and_a_zombie_or_another_process_is_not_running() -> None:
    me = psutil.Process()
    assert launching.process_started(me.pid) == pytest.approx(me.create_time(), abs=0.01)
    assert launching.still_running(me.pid, me.create_time())
    assert not launching.still_running(me.pid, me.create_time() - 5)  # a reused pid
    assert not launching.still_running(None, None)
    child = subprocess.Popen([sys.executable, "-c", "pass"])  # exits; not reaped: a zombie
    deadline = time.monotonic() + 30
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    assert not launching.still_running(child.pid, None)
    child.wait()
    assert launching.process_started(child.pid) is None
