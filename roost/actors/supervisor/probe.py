"""Sampling a session's processes with psutil: the evidence adapters judge screens by.

The supervisor owns the PTY, so it alone can ask which process group is in the terminal's
foreground (``tcgetpgrp`` on the master side); the rest comes from psutil: the agent, its
descendants, and for each pid, ppid, pgid, exe, cmdline and start time. The descendants are found
by walking down from the agent (Linux's ``/proc/<pid>/task/<tid>/children``), never by reading
every process on the machine as ``psutil.Process.children(recursive=True)`` does (it stays the
fallback where those files are missing).
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


CHILDREN = "/proc/{pid}/task/{tid}/children"


def _children_of(pid: int) -> list[int] | None:
    """The pids whose parent is ``pid`` (of each of its threads), or None where /proc has no
    ``children`` files."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    out: list[int] = []
    for tid in tids:
        try:
            with open(CHILDREN.format(pid=pid, tid=tid)) as f:
                out.extend(int(c) for c in f.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended meanwhile
            return None  # a kernel without CONFIG_PROC_CHILDREN
        except (OSError, ValueError):
            continue
    return out


def descendants_of(proc: psutil.Process) -> list[psutil.Process]:
    """The agent's descendants, parents before children, walking down its own tree only."""
    found: list[psutil.Process] = []
    todo = [proc.pid]
    seen = {proc.pid}
    while todo:
        kids = _children_of(todo.pop(0))
        if kids is None:
            return list(proc.children(recursive=True))
        for pid in kids:
            if pid in seen:
                continue
            seen.add(pid)
            todo.append(pid)
            try:
                found.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
    return found


def sample(agent_pid: int | None, pty_fd: int | None) -> Evidence:
    """One sample; the agent is None once it has exited (or became a zombie)."""
    agent = descendants = None
    if agent_pid:
        try:
            proc = psutil.Process(agent_pid)
            with proc.oneshot():  # its /proc files read once for the status and the rest
                alive = proc.status() != psutil.STATUS_ZOMBIE
                if alive:
                    agent = _info(proc)
            if alive:
                children = descendants_of(proc)
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
