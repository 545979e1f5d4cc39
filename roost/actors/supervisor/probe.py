"""Sampling a session's processes with psutil: the evidence adapters judge screens by.

The supervisor owns the PTY, so it alone can ask which process group is in the terminal's
foreground (``tcgetpgrp`` on the master side); the rest comes from psutil: the agent, its
descendants, and for each pid, ppid, pgid, exe, cmdline and start time.
"""

from __future__ import annotations

import contextlib
import os
import time

import psutil

from roost.adapters.evidence import Evidence, ProcessInfo


def _info(proc: psutil.Process) -> ProcessInfo | None:
    try:
        with proc.oneshot():
            exe = ""
            with contextlib.suppress(psutil.AccessDenied, psutil.ZombieProcess, OSError):
                exe = proc.exe()
            return ProcessInfo(
                pid=proc.pid,
                ppid=proc.ppid(),
                pgid=os.getpgid(proc.pid),
                name=proc.name(),
                exe=exe,
                cmdline=tuple(proc.cmdline()),
                start_time=proc.create_time(),
            )
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
        return None


def sample(agent_pid: int | None, pty_fd: int | None) -> Evidence:
    """One sample; the agent is None once it has exited (or became a zombie)."""
    agent = descendants = None
    if agent_pid:
        try:
            proc = psutil.Process(agent_pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                agent = _info(proc)
                children = proc.children(recursive=True)
                descendants = tuple(i for i in map(_info, children) if i is not None)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            agent = None
    foreground = None
    if pty_fd is not None:
        with contextlib.suppress(OSError):
            foreground = os.tcgetpgrp(pty_fd)
    return Evidence(
        agent=agent, foreground_pgid=foreground, descendants=descendants or (), taken=time.time()
    )
