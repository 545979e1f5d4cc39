"""The shared test kit (tests/kit.py): its fake peer answers as scripted and records what it was
told; its clock moves only when told; ``until`` waits for a condition or fails."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from roost.actors.runtime.caller import Caller, Link
from roost.wire.errors import RoostError
from tests import kit


def test_a_fake_peer_answers_as_scripted_and_records_each_call() -> None:
    async def later(body: dict[str, Any]) -> dict[str, Any]:
        return {"echo": body["x"]}

    gone = RoostError("unavailable", "away")
    peer = kit.FakePeer(
        {
            "a.one": {"ok": True},
            "a.turns": [{"n": 1}, gone, {"n": 3}],  # one a call; the last one stays
            "a.echo": later,
        }
    )
    caller: Caller = peer
    link: Link = peer

    async def scenario() -> list[Any]:
        answers: list[Any] = [await caller.call("t", "a.one")]
        for _ in range(4):
            try:
                answers.append(await caller.call("t", "a.turns", {}, timeout=1.0))
            except RoostError as err:
                answers.append(err.code)
        answers.append(await caller.call("t", "a.echo", {"x": 5}, session={"generation": 2}))
        answers.append(await caller.call("t", "unscripted", op="op-1"))
        link.notify("node", {"said": 1})
        return answers

    answers = asyncio.run(scenario())
    assert answers == [{"ok": True}, {"n": 1}, "unavailable", {"n": 3}, {"n": 3}, {"echo": 5}, {}]
    assert peer.methods() == ["a.one", *["a.turns"] * 4, "a.echo", "unscripted"]
    assert peer.calls[5].kw == {"timeout": 10.0, "session": {"generation": 2}}
    assert peer.calls[6].kw == {"timeout": 10.0, "op": "op-1"}
    assert peer.notes == [("node", {"said": 1})] and peer.registered.is_set()


def test_the_clock_moves_only_when_told() -> None:
    clock = kit.FakeClock(5.0)
    assert clock() == 5.0
    clock.advance(2.5)
    assert clock() == clock.now == 7.5


def test_until_waits_for_the_condition_and_fails_when_it_never_holds() -> None:
    async def scenario() -> None:
        ready = asyncio.Event()
        asyncio.get_running_loop().call_later(0.05, ready.set)
        await kit.until(ready.is_set, "the event")
        with pytest.raises(AssertionError, match="timed out waiting for never"):
            await kit.until(lambda: False, "never", timeout=0.05)

    asyncio.run(scenario())
    kit.wait_until(lambda: True)
    with pytest.raises(AssertionError, match="timed out"):
        kit.wait_until(lambda: False, timeout=0.05)


def test_a_launch_spec_has_every_key_and_takes_what_is_given() -> None:
    spec = kit.launch_spec(record_id="r9", rows=10)
    assert spec["record_id"] == "r9" and spec["rows"] == 10 and spec["resume"] is False
