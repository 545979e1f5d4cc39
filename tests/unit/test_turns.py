"""A stream turn's acceptance when the state store does not answer its begin in time
(roost.actors.turns): the begin is repeated with the same turn id until the store answers; a turn
answered only after the session was stopped does not run and ends ``stopped``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from roost.actors import turns
from roost.actors.outbox import Outbox
from roost.actors.terminal import Terminal, Transcript
from roost.actors.turns import TurnRunner
from roost.broker.errors import RoostError


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns, "BEGIN_RETRY_S", 0.01)


class StalledStore:
    """``state.turn.begin`` fails ``unavailable`` until ``answer`` is set; the adapter's turn
    command is a process that would leave a mark if it ran."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark
        self.begins: list[dict[str, Any]] = []
        self.answer = asyncio.Event()

    async def call(self, target: str, method: str, body: dict[str, Any], **_: Any) -> Any:
        if method == "adapter.turn":
            code = f"open({str(self.mark)!r}, 'w').write('ran')"
            return {"argv": [sys.executable, "-c", code], "env": {}}
        assert method == "state.turn.begin"
        self.begins.append(body)
        if not self.answer.is_set():
            raise RoostError("unavailable", "state did not answer state.turn.begin in time")
        return {"turn": body["turn"]["id"], "seq": 7}


def _runner(tmp_path: Path, store: StalledStore) -> tuple[TurnRunner, Outbox]:
    async def nowhere(entry: dict[str, Any]) -> None:  # entries stay in the queue
        raise RoostError("unavailable", "not delivered in this test")

    outbox = Outbox(tmp_path, nowhere)
    spec = {
        "record_id": "r1",
        "generation": 1,
        "instance_id": "i1",
        "provider": "echo",
        "provider_session": "s1",
        "cwd": str(tmp_path),
        "env": {},
        "data_dir": str(tmp_path),
    }
    runner = TurnRunner(store, outbox, spec, Terminal(24, 80), Transcript(tmp_path))  # type: ignore[arg-type]
    return runner, outbox


async def _until(cond: Any) -> None:
    async with asyncio.timeout(10):
        while not cond():
            await asyncio.sleep(0.01)


def test_a_begin_is_repeated_with_the_same_turn_id_until_answered(tmp_path: Path) -> None:
    async def scenario() -> tuple[dict[str, Any], StalledStore]:
        store = StalledStore(tmp_path / "mark")
        runner, _ = _runner(tmp_path, store)
        started = asyncio.ensure_future(runner.start("hi", "op-1"))
        await _until(lambda: len(store.begins) >= 3)
        assert runner.accepting and runner.running is None and not started.done()
        store.answer.set()
        reply = await started
        assert runner._task is not None
        await runner._task
        return reply, store

    reply, store = asyncio.run(scenario())
    assert {b["turn"]["id"] for b in store.begins} == {reply["turn"]}
    assert {b["events"][0]["eid"] for b in store.begins} == {f"i1:turn:{reply['turn']}"}
    assert reply["accepted"] and reply["seq"] == 7
    assert (tmp_path / "mark").read_text() == "ran"


def test_a_turn_answered_after_stop_does_not_run(tmp_path: Path) -> None:
    async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        store = StalledStore(tmp_path / "mark")
        runner, outbox = _runner(tmp_path, store)
        started = asyncio.ensure_future(runner.start("hi", ""))
        await _until(lambda: len(store.begins) >= 2)
        await runner.stop()
        settled = asyncio.ensure_future(runner.settled())
        await asyncio.sleep(0)
        assert not settled.done()  # the supervisor may not leave yet
        store.answer.set()
        reply = await started
        await settled
        return reply, list(outbox._queue)

    reply, queued = asyncio.run(scenario())
    ends = [e for e in queued if e["t"] == "turn-end"]
    assert ends and ends[0]["turn"] == reply["turn"]
    assert ends[0]["reason"] == "stopped" and ends[0]["exit"] is None
    assert not (tmp_path / "mark").exists()
