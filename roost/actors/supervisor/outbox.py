"""A supervisor's outbox: structured events and reports, spooled on disk, delivered in order.

Everything a supervisor must not lose (turn events, the end of a turn, the agent's exit) is first
appended to ``spool.bin`` in the session's directory, then delivered by one flusher task, in order,
retrying while the broker, node or state store is away. Each delivered entry advances ``spool.ack``.
Events carry an id derived from the entry (``<instance>:<n>:<i>``), so an entry delivered twice
(committed, then the ack lost with the broker) is appended once. When a supervisor dies, the node
delivers what its spool still holds (``pending``) before it declares the session lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import msgpack
import structlog

from roost.wire.errors import TRANSIENT, RoostError
from roost.wire.messages import OutboxEntry

log = structlog.get_logger("roost.outbox")

Entry = OutboxEntry
Deliver = Callable[[Entry], Awaitable[None]]
SPOOL, ACK = "spool.bin", "spool.ack"


def read_ack(directory: Path) -> int:
    try:
        return int((directory / ACK).read_text() or 0)
    except (OSError, ValueError):
        return 0


def pending(directory: Path) -> list[Entry]:
    """Entries written but not yet acknowledged, in order."""
    acked = read_ack(directory)
    try:
        data = (directory / SPOOL).read_bytes()
    except OSError:
        return []
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(data)
    entries: list[dict[str, Any]] = []
    with contextlib.suppress(ValueError, msgpack.OutOfData):
        entries = [e for e in unpacker if isinstance(e, dict) and e.get("n", 0) > acked]
    return cast("list[Entry]", entries)


def mark_delivered(directory: Path, n: int) -> None:
    """Advance the ack; on a full disk it stays behind (a re-sent entry is appended once)."""
    tmp = directory / (ACK + ".tmp")
    try:
        tmp.write_text(str(n))
        os.replace(tmp, directory / ACK)
    except OSError as exc:
        log.warning("spool-ack-failed", n=n, errno=errno.errorcode.get(exc.errno or 0))


class Outbox:
    """Ordered, durable delivery with retry; ``deliver`` raises RoostError on failure."""

    def __init__(
        self, directory: Path, deliver: Deliver, *, retry: float = 0.3, instance: str = ""
    ) -> None:
        self.directory, self._deliver, self._retry = directory, deliver, retry
        self._instance = instance  # in each entry ("i"): whoever delivers it stamps the same eids
        self._queue: list[Entry] = pending(directory)
        self._n: int = max([read_ack(directory), *(int(e["n"]) for e in self._queue)])
        # unbuffered: a write the disk refuses is known at once, and cut back off the spool
        self._fh = open(directory / SPOOL, "ab", buffering=0)  # noqa: SIM115 - held for life
        self._unspooled: list[Entry] = []  # queued, but not on disk (a full disk)
        self._behind = False
        self.stalled: RoostError | None = None  # the last transient refusal of the head entry
        self._wake = asyncio.Event()
        self._empty = asyncio.Event()
        if not self._queue:
            self._empty.set()

    def put(self, entry: Entry) -> int:
        """Append durably (flushed to the OS before returning) and wake the flusher."""
        self._n += 1
        entry = {**entry, "n": self._n}
        if self._instance:
            entry["i"] = self._instance
        self._unspooled.append(entry)
        self._spool()
        self._queue.append(entry)
        self._empty.clear()
        self._wake.set()
        return self._n

    def _spool(self) -> None:
        """Write the entries not yet on disk, in order; on a full disk (ENOSPC) or an I/O
        error the spool is cut back to its last whole entry and they wait in memory for the
        next try (they are still delivered; only a supervisor crash meanwhile loses them)."""
        while self._unspooled:
            data = msgpack.packb(self._unspooled[0], use_bin_type=True)
            end = self._fh.tell()
            try:
                written = self._fh.write(data) or 0
                if written != len(data):
                    raise OSError(errno.ENOSPC, "short write")
            except OSError as exc:
                with contextlib.suppress(OSError):
                    self._fh.truncate(end)
                    self._fh.seek(end)
                if not self._behind:
                    log.error("spool-write-failed", errno=errno.errorcode.get(exc.errno or 0))
                self._behind = True
                return
            self._unspooled.pop(0)
        if self._behind:
            log.info("spool-write-recovered")
        self._behind = False

    @property
    def size(self) -> int:
        return len(self._queue)

    def undelivered(self) -> RoostError:
        """Why new input is refused while earlier entries wait: the state store's disk is full
        (or failing), its own code; else ``unavailable``."""
        last = self.stalled
        if last is not None and last.code.startswith("storage-"):
            return RoostError(
                last.code, "earlier events wait for room: " + last.message, last.detail
            )
        return RoostError("unavailable", "earlier events are still being delivered")

    async def drained(self, timeout: float) -> bool:
        if self._empty.is_set():  # the usual case: no timer, no task
            return True
        try:
            await asyncio.wait_for(self._empty.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def run(self) -> None:
        while True:
            if not self._queue:
                self._empty.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            entry = self._queue[0]
            try:
                await self._deliver(entry)
            except RoostError as err:
                if err.code in TRANSIENT:
                    self.stalled = err
                    await asyncio.sleep(self._retry)
                    continue
                log.error(
                    "outbox-entry-refused",
                    n=entry["n"],
                    kind=entry.get("t"),
                    code=err.code,
                    reason=err.message,
                )
            self.stalled = None
            self._queue.pop(0)
            if self._unspooled and self._unspooled[0] is entry:
                self._unspooled.pop(0)  # delivered: no need for it on disk any more
            self._spool()
            mark_delivered(self.directory, entry["n"])
            if not self._queue:
                self._compact()

    def _compact(self) -> None:
        """Everything is delivered: start the spool afresh so it never grows without bound."""
        with contextlib.suppress(OSError):
            self._fh.seek(0)
            self._fh.truncate()

    def close(self) -> None:
        self._fh.close()
