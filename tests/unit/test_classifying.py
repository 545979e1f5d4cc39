"""The supervisor's classification rounds (supervisor.classifying), against a stub supervisor
whose adapter calls the test answers, fails or holds (issue 9.8)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from roost.actors.supervisor import classifying
from roost.actors.supervisor.classifying import ScreenClassifier
from roost.actors.supervisor.host import Session
from roost.broker.errors import RoostError


class Screen:
    def __init__(self) -> None:
        self.shown = "starting"

    def text(self) -> str:
        return self.shown


class Peer:
    """``adapter.classify`` answers with the screen it was given, after ``gate`` opens; the
    first ``fail`` calls raise ``unavailable`` instead."""

    def __init__(self, fail: int = 0) -> None:
        self.fail = fail
        self.calls: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def call(self, target: str, method: str, body: dict[str, Any], **_: Any) -> Any:
        self.calls.append(body["screen"])
        await self.gate.wait()
        if self.fail:
            self.fail -= 1
            raise RoostError("unavailable", "adapter/claude did not answer in time")
        return {"state": "seen", "detail": body["screen"]}


class Checks:
    """The view a classification carries besides the screen (title, identity, ...)."""

    def view(self) -> dict[str, Any]:
        return {"title": ""}


class Sup:
    def __init__(self, peer: Peer) -> None:
        self.peer, self.term, self.provider, self.exit = peer, Screen(), "claude", None
        self.identity = "known"
        self.checks = Checks()
        self.verdicts: list[str] = []
        self.samples = 0  # process probes taken (one per call, never one per output)

    def evidence(self) -> None:
        self.samples += 1
        return None

    def classified(self, result: dict[str, Any]) -> None:
        self.verdicts.append(result["detail"])


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(classifying, "SETTLE_S", 0.001)
    monkeypatch.setattr(classifying, "RETRY_S", (0.001, 0.004))


async def settle(classifier: ScreenClassifier) -> None:
    while classifier._task is not None and not classifier._task.done():
        await asyncio.wait_for(asyncio.shield(classifier._task), 5)


def make(peer: Peer) -> tuple[Sup, ScreenClassifier]:
    sup = Sup(peer)
    return sup, ScreenClassifier(cast(Session, sup))


async def _output_during_a_call_gets_a_round_of_its_own() -> None:
    peer = Peer()
    sup, classifier = make(peer)
    peer.gate.clear()
    classifier.changed()
    while not peer.calls:
        await asyncio.sleep(0.001)
    sup.term.shown = "Do you want to proceed?"  # drawn while the first call is in flight
    classifier.changed()
    peer.gate.set()
    await settle(classifier)
    assert peer.calls == ["starting", "Do you want to proceed?"]
    assert sup.verdicts[-1] == "Do you want to proceed?"


async def _a_failed_call_is_tried_again_until_there_is_a_verdict() -> None:
    peer = Peer(fail=5)
    sup, classifier = make(peer)
    sup.term.shown = "Do you want to proceed?"
    classifier.changed()
    await settle(classifier)
    assert len(peer.calls) == 6 and sup.verdicts == ["Do you want to proceed?"]
    assert classifier.failures == 0


async def _a_burst_of_output_is_one_round() -> None:
    peer = Peer()
    _, classifier = make(peer)
    for _ in range(50):
        classifier.changed()
    await settle(classifier)
    assert peer.calls == ["starting"]


async def _a_flood_is_classified_once_a_settle_at_most(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output every millisecond for 0.3 s: a round (one screen read, one process probe) at most
    every SETTLE_S, and still rounds during the flood, not only after it."""
    monkeypatch.setattr(classifying, "SETTLE_S", 0.02)
    peer = Peer()
    sup, classifier = make(peer)
    loop = asyncio.get_running_loop()
    end = loop.time() + 0.3
    while loop.time() < end:
        sup.term.shown = f"line {loop.time()}"
        classifier.changed()
        await asyncio.sleep(0.001)
    during = len(peer.calls)
    await settle(classifier)
    assert 2 <= during <= 0.3 / 0.02 + 1
    assert sup.samples == len(peer.calls) <= during + 1


async def _close_ends_the_rounds() -> None:
    peer = Peer(fail=10**6)
    _, classifier = make(peer)
    classifier.changed()
    while len(peer.calls) < 3:
        await asyncio.sleep(0.001)
    classifier.close()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(classifier._task, 5)  # type: ignore[arg-type]


def test_output_during_a_call_gets_a_round_of_its_own() -> None:
    asyncio.run(_output_during_a_call_gets_a_round_of_its_own())


def test_a_failed_call_is_tried_again_until_there_is_a_verdict() -> None:
    asyncio.run(_a_failed_call_is_tried_again_until_there_is_a_verdict())


def test_a_burst_of_output_is_one_round() -> None:
    asyncio.run(_a_burst_of_output_is_one_round())


def test_a_flood_is_classified_once_a_settle_at_most(monkeypatch: pytest.MonkeyPatch) -> None:
    asyncio.run(_a_flood_is_classified_once_a_settle_at_most(monkeypatch))


def test_close_ends_the_rounds() -> None:
    asyncio.run(_close_ends_the_rounds())
