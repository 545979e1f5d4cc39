"""A supervisor's usage reports (supervisor.usage): claude's statusline signal handled by
``Supervisor.on_usage`` (called directly, as the signal channel's dispatch calls it), and the
CLI's files read through ``adapter.usage``; each report goes to the outbox once per change."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from roost.actors.runtime.peer import Peer
from roost.actors.supervisor import usage
from roost.actors.supervisor.actor import Supervisor
from roost.wire import usage as u
from roost.wire.signals import Signal
from tests import kit


@pytest.fixture(autouse=True)
def no_later_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usage, "LATER_S", ())


class FakePeer(kit.FakePeer):
    def __init__(self, replies: dict[str, Any]) -> None:
        super().__init__(replies)
        self.on_registered: list[Any] = []


def statusline(cost: float, seq: int = 1) -> Signal:
    return {
        "v": 1,
        "record": "r1",
        "generation": 1,
        "seq": seq,
        "source": "statusline",
        "kind": "usage",
        "at": 0.0,
        "data": {"cost_usd": cost, "input_tokens": 3042, "output_tokens": 10},
    }


def reports(sup: Supervisor) -> list[dict[str, Any]]:
    """What the outbox delivered to the node (``node.session.usage``), in order."""
    calls = cast(FakePeer, sup.peer).calls
    return [c.body for c in calls if c.method == "node.session.usage"]


def supervisor(tmp_path: Path, files: list[dict[str, Any]], **spec: Any) -> Supervisor:
    peer = FakePeer({"adapter.usage": files})
    fields = {"provider": "claude", "provider_session": "s-1", "session_dir": str(tmp_path)}
    return Supervisor(kit.launch_spec(**{**fields, **spec}), cast(Peer, peer), asyncio.Event())


async def settled(sup: Supervisor) -> None:
    """The reads asked for are done and the outbox delivered what they reported."""
    flusher = asyncio.get_running_loop().create_task(sup.outbox.run())
    task = sup.usage._task
    if task is not None:
        await asyncio.wait_for(task, 5)
    assert await sup.outbox.drained(5)
    flusher.cancel()


def test_a_statusline_signal_reports_its_cost_and_reads_the_transcript(tmp_path: Path) -> None:
    transcript = {"source": "files", "totals": u.make(3030, 10, 7, 5)}

    async def scenario() -> list[dict[str, Any]]:
        sup = supervisor(tmp_path, [transcript])
        sup.on_usage(statusline(0.0249))
        await settled(sup)
        sup.on_usage(statusline(0.0249, seq=2))  # nothing new: nothing reported
        await settled(sup)
        sup.on_usage(statusline(0.0379, seq=3))
        await settled(sup)
        sup.outbox.close()
        return reports(sup)

    sent = asyncio.run(scenario())
    assert [(r["source"], r["totals"]) for r in sent] == [
        ("statusline", u.make(cost=0.0249)),  # the cost only: its tokens are the context's
        ("files", u.make(3030, 10, 7, 5)),
        ("statusline", u.make(cost=0.0379)),
    ]
    assert all(r["provider_session"] == "s-1" and r["record"] == "r1" for r in sent)


def test_a_verdict_that_is_not_busy_reads_the_files(tmp_path: Path) -> None:
    rollout = [
        {"source": "files", "totals": u.make(100, 10, 7)},
        {"source": "files", "totals": u.make(250, 20, 14)},
    ]

    async def scenario() -> Supervisor:
        sup = supervisor(tmp_path, rollout, provider="codex")
        sup.classified({"state": "busy", "reason": None, "detail": ""})
        await settled(sup)
        sup.classified({"state": "ready", "reason": None, "detail": ""})
        await settled(sup)
        sup.classified({"state": "busy", "reason": None, "detail": "again"})
        sup.classified({"state": "ready", "reason": None, "detail": "again"})
        await settled(sup)
        sup.outbox.close()
        return sup

    sup = asyncio.run(scenario())
    calls = [c.method for c in cast(FakePeer, sup.peer).calls]
    assert calls.count("adapter.usage") == 2  # after each ready, never while busy
    assert [r["totals"] for r in reports(sup)] == [u.make(100, 10, 7), u.make(250, 20, 14)]


def test_nothing_is_read_before_the_provider_session_is_known(tmp_path: Path) -> None:
    async def scenario() -> Supervisor:
        sup = supervisor(tmp_path, [{"source": None, "totals": None}], provider_session=None)
        sup.classified({"state": "ready", "reason": None, "detail": ""})
        await settled(sup)
        sup.outbox.close()
        return sup

    sup = asyncio.run(scenario())
    assert "adapter.usage" not in [c.method for c in cast(FakePeer, sup.peer).calls]
    assert reports(sup) == []


def test_a_stream_turns_end_reads_the_files_for_that_turn(tmp_path: Path) -> None:
    wire = {"source": "files", "totals": u.make(4700, 20, 14)}

    async def scenario() -> Supervisor:
        sup = supervisor(tmp_path, [wire], provider="kimi", mode="stream")
        sup.usage.soon("t1")
        await settled(sup)
        sup.outbox.close()
        return sup

    sup = asyncio.run(scenario())
    assert [(r["turn"], r["totals"]) for r in reports(sup)] == [("t1", wire["totals"])]


def test_the_files_are_read_again_later(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """codex draws its answer before its rollout has the request's token_count."""
    monkeypatch.setattr(usage, "LATER_S", (0.01, 0.01))
    early = {"source": None, "totals": None}  # no token_count yet
    written = {"source": "files", "totals": u.make(100, 10, 7)}

    async def scenario() -> Supervisor:
        sup = supervisor(tmp_path, [early, written], provider="codex")
        sup.classified({"state": "ready", "reason": None, "detail": ""})
        await settled(sup)
        sup.outbox.close()
        return sup

    sup = asyncio.run(scenario())
    assert [c.method for c in cast(FakePeer, sup.peer).calls].count("adapter.usage") == 3
    assert [r["totals"] for r in reports(sup)] == [u.make(100, 10, 7)]
