"""Learning that a live record's supervisor died the moment it does, without polling.

Linux's pidfd (``os.pidfd_open``) becomes readable when its process exits, whoever the parent is
(a supervisor outlives the node that started it), so the node's event loop wakes once, when it
happens, and not once per session per second. ``follow`` is told of every record the node keeps:
it watches the supervisor of each active record that names one, and stops watching when the
record moves on. Where there is no pidfd (another OS, an old kernel), ``watched`` says no and the
sweep polls that record's pid every second.
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable

import structlog

from roost.actors.node.launcher import still_running
from roost.actors.state import records as r
from roost.actors.state.records import Record

log = structlog.get_logger("roost.deaths")


class Deaths:
    """pidfds of supervisors; ``on_death(record_id)`` when one exits (or is found gone)."""

    def __init__(self, on_death: Callable[[str], None]) -> None:
        self._on_death = on_death
        self._watched: dict[str, tuple[int, int]] = {}  # record id -> (pid, pidfd)
        self._usable = hasattr(os, "pidfd_open")

    def watched(self, record_id: str) -> bool:
        return record_id in self._watched

    def follow(self, record: Record) -> None:
        """Watch the supervisor an active record names; forget one it no longer names."""
        active = record.active or {}
        pid = active.get("pid") if record.state in r.ACTIVE_STATES else None
        held = self._watched.get(record.id)
        if held is not None and held[0] == pid:
            return
        if held is not None:
            self._close(record.id)
        if isinstance(pid, int) and pid > 0 and self._usable:
            self._watch(record.id, pid, active.get("started"))

    def _watch(self, record_id: str, pid: int, started: float | None) -> None:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            self._watched[record_id] = (pid, -1)  # gone already: said once, nothing to close
            self._on_death(record_id)
            return
        except OSError as exc:  # not permitted, no pidfd here: the sweep polls this one
            log.info("pidfd-unavailable", record=record_id, errno=exc.errno)
            self._usable = exc.errno not in (errno.ENOSYS, errno.EINVAL)  # none for anyone
            return
        self._watched[record_id] = (pid, fd)
        if not still_running(pid, started):  # the pid is another process's now (or a zombie)
            self._on_death(record_id)
            return
        asyncio.get_running_loop().add_reader(fd, self._exited, record_id)

    def _exited(self, record_id: str) -> None:
        held = self._watched.get(record_id)
        if held is None:
            return
        asyncio.get_running_loop().remove_reader(held[1])
        self._on_death(record_id)

    def _close(self, record_id: str) -> None:
        _, fd = self._watched.pop(record_id)
        if fd >= 0:
            asyncio.get_running_loop().remove_reader(fd)
            os.close(fd)

    def close(self) -> None:
        for record_id in list(self._watched):
            self._close(record_id)
