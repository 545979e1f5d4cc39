"""The agent in a PTY (roost.actors.supervisor.pty_agent): an agent whose descendant keeps the
PTY open after it exits is still seen to exit, by its pidfd or, where there is none, the poll."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest

from roost.actors.supervisor import pty_agent
from roost.actors.supervisor.pty_agent import PtyAgent
from roost.actors.supervisor.pty_backend import ExitStatus

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
        spec = {
            "argv": ["/bin/sh", "-c", "sleep 60 & exit 3"],  # the sleep keeps the PTY open
            "cwd": str(tmp_path),
            "env": {"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            "rows": 24,
            "cols": 80,
        }
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
