"""Files a full disk refuses: the log, a supervisor's spool, a transcript,
and what SQLite's errors mean. ENOSPC is real: "the disk fills" points the file's descriptor at
``/dev/full``, whose every write fails with ENOSPC; "space freed" points it back at a file."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import msgpack
import pytest

from roost.actors.runtime.process import LogFile
from roost.actors.state import integrity
from roost.actors.state.storage import NEARLY_FULL, Storage
from roost.actors.supervisor.outbox import Outbox, pending
from roost.actors.supervisor.terminal import Transcript
from roost.wire.errors import RoostError
from roost.wire.messages import OutboxEntry

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")


def _fill(fd: int) -> None:
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, fd)
    os.close(full)


def _free_space(fd: int, path: Path) -> None:
    """Point ``fd`` at a real (empty) file: the disk has room again."""
    real = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(real, fd)
    os.close(real)


def test_a_log_line_the_disk_refuses_waits_and_never_raises(tmp_path: Path) -> None:
    log = LogFile(tmp_path / "state.log")
    _fill(log.fileno())
    print('{"event": "storage-failed", "errno": "ENOSPC"}', file=log, flush=True)
    print('{"event": "second"}', file=log, flush=True)
    _free_space(log.fileno(), tmp_path / "state.log")
    print('{"event": "storage-recovered"}', file=log, flush=True)
    lines = (tmp_path / "state.log").read_text().splitlines()
    assert lines == [
        '{"event": "storage-failed", "errno": "ENOSPC"}',
        '{"event": "second"}',
        '{"event": "storage-recovered"}',
    ]


def test_the_spool_refused_keeps_entries_in_memory_and_delivers_them(tmp_path: Path) -> None:
    delivered: list[OutboxEntry] = []
    refusals = [RoostError("storage-full", "the disk is full", {"errno": "ENOSPC"})] * 3

    async def deliver(entry: OutboxEntry) -> None:
        if refusals:  # the state store's disk is full for the first three tries
            raise refusals.pop()
        delivered.append(entry)

    async def scenario() -> Outbox:
        box = Outbox(tmp_path, deliver, retry=0.01)
        _fill(box._fh.fileno())
        box.put({"t": "events", "events": [{"kind": "session.output"}]})
        box.put({"t": "events", "events": [{"kind": "session.output", "i": 2}]})
        assert box.size == 2 and pending(tmp_path) == []  # nothing reached the disk
        assert box.undelivered().code == "unavailable"  # nothing tried yet
        task = asyncio.create_task(box.run())
        try:
            assert await box.drained(5.0)
        finally:
            task.cancel()
        return box

    box = asyncio.run(scenario())
    assert [e["n"] for e in delivered] == [1, 2]  # retried on storage-full, never dropped
    assert box.stalled is None
    box.close()


def test_the_spool_catches_up_on_disk_once_there_is_room(tmp_path: Path) -> None:
    async def never(entry: OutboxEntry) -> None:
        raise RoostError("storage-full", "the disk is full", {"errno": "ENOSPC"})

    async def scenario() -> None:
        box = Outbox(tmp_path, never, retry=0.01)
        _fill(box._fh.fileno())
        box.put({"t": "events", "events": []})
        task = asyncio.create_task(box.run())
        deadline = asyncio.get_running_loop().time() + 5.0
        while box.stalled is None:  # the flusher tries and is refused
            assert asyncio.get_running_loop().time() < deadline, "never tried"
            await asyncio.sleep(0.01)
        assert box.undelivered().code == "storage-full"
        _free_space(box._fh.fileno(), tmp_path / "spool.bin")
        box.put({"t": "events", "events": [{"kind": "session.output"}]})
        task.cancel()
        unpacker = msgpack.Unpacker(raw=False)
        unpacker.feed((tmp_path / "spool.bin").read_bytes())
        entries = list(unpacker)
        assert [e["n"] for e in entries] == [1, 2]  # in order, whole
        box.close()

    asyncio.run(scenario())


def test_a_transcript_the_disk_refuses_loses_bytes_not_the_supervisor(tmp_path: Path) -> None:
    transcript = Transcript(tmp_path)
    _fill(transcript._fh.fileno())
    assert transcript.append(b"lost") == 0
    assert transcript.offset == 0 and transcript.lost == 4
    _free_space(transcript._fh.fileno(), tmp_path / "transcript.bin")
    assert transcript.append(b"kept") == 0
    assert transcript.offset == 4 and transcript.lost == 0
    assert (tmp_path / "transcript.bin").read_bytes() == b"kept"
    transcript.close()


def _error(code: int, name: str) -> sqlite3.OperationalError:
    err = sqlite3.OperationalError(name)
    err.sqlite_errorcode = code
    err.sqlite_errorname = name
    return err


def test_sqlite_failures_map_to_stable_codes() -> None:
    full = integrity.storage_error(_error(sqlite3.SQLITE_FULL, "SQLITE_FULL"))
    assert full is not None and full.code == "storage-full" and full.detail["errno"] == "ENOSPC"
    io = integrity.storage_error(_error(sqlite3.SQLITE_IOERR | (3 << 8), "SQLITE_IOERR_WRITE"))
    assert io is not None and io.code == "storage-failed"
    bad = integrity.storage_error(_error(sqlite3.SQLITE_CORRUPT, "SQLITE_CORRUPT"))
    assert bad is not None and bad.code == "durable-state-damaged"
    assert integrity.storage_error(_error(sqlite3.SQLITE_ERROR, "SQLITE_ERROR")) is None


def test_a_spell_of_refusals_is_logged_once_and_ends_with_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = Storage(tmp_path, clock=lambda: 100.0)
    room = {"free": 0}
    monkeypatch.setattr(storage, "free", lambda: room["free"])
    full = _error(sqlite3.SQLITE_IOERR, "SQLITE_IOERR_WRITE")  # an I/O error on a full disk
    assert storage.failed(full).code == "storage-full"
    storage.committed()  # a small commit squeezed in: still the same spell
    assert storage.failed(full).code == "storage-full"
    assert storage.status()["health"] == "full" and storage.status()["refused"] == 2
    room["free"] = NEARLY_FULL
    storage.committed()
    assert storage.status() == {"health": "ok"}
