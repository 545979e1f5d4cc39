"""The supervisor's classification rounds (supervisor.classifying), against a stub supervisor
whose adapter calls the test answers, fails or holds."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from roost.actors.supervisor import classifying
from roost.actors.supervisor.classifying import ScreenClassifier
from roost.actors.supervisor.host import Session
from roost.wire.errors import RoostError
from tests import kit


class Screen:
    def __init__(self) -> None:
        self.shown = "starting"

    def text(self) -> str:
        return self.shown


class Peer(kit.FakePeer):
    """``adapter.classify`` answers with the screen it was given, after ``gate`` opens; the
    first ``fail`` calls raise ``unavailable`` instead. ``screens``: each call's screen."""

    def __init__(self, fail: int = 0) -> None:
        super().__init__()
        self.fail = fail
        self.screens: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def answer(
        self, target: str, method: str, body: dict[str, Any], kw: dict[str, Any]
    ) -> Any:
        self.screens.append(body["screen"])
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
        self.screens: list[str | None] = []  # the screen each verdict read
        self.classification: dict[str, Any] = {}
        self.reports: list[str] = []  # node.session.classified, as the supervisor reports
        self.samples = 0  # process probes taken (one per call, never one per output)

    def evidence(self) -> None:
        self.samples += 1
        return None

    def classified(self, result: dict[str, Any], screen: str | None = None) -> None:
        self.screens.append(screen)
        self.verdicts.append(result["detail"])
        if result != self.classification:
            self.classification = result
            self.report("node.session.classified", {"classification": result})

    def report(self, method: str, body: dict[str, Any]) -> None:
        self.reports.append(body["classification"]["detail"])


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
    while not peer.screens:
        await asyncio.sleep(0.001)
    sup.term.shown = "Do you want to proceed?"  # drawn while the first call is in flight
    classifier.changed()
    peer.gate.set()
    await settle(classifier)
    assert peer.screens == ["starting", "Do you want to proceed?"]
    assert sup.verdicts[-1] == "Do you want to proceed?"


async def _a_failed_call_is_tried_again_until_there_is_a_verdict() -> None:
    peer = Peer(fail=5)
    sup, classifier = make(peer)
    sup.term.shown = "Do you want to proceed?"
    classifier.changed()
    await settle(classifier)
    assert len(peer.screens) == 6 and sup.verdicts == ["Do you want to proceed?"]
    assert classifier.failures == 0


async def _a_burst_of_output_is_one_round() -> None:
    peer = Peer()
    sup, classifier = make(peer)
    for _ in range(50):
        classifier.changed()
    await settle(classifier)
    assert peer.screens == ["starting"]
    # the verdict names the screen it read (the node's usage-limit policy compares it)
    assert sup.screens == [sup.term.text()]


async def flood(sup: Sup, classifier: ScreenClassifier, seconds: float) -> int:
    """Output every millisecond for ``seconds``, each changing the screen. Returns how many
    quiet spells of ``SETTLE_S`` a loaded host put into it (the loop stalled between two
    writes): each is a pause in the output, which may rightly get its round."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    spells, last = 0, loop.time()
    while (now := loop.time()) < end:
        spells += now - last >= classifying.SETTLE_S
        last = now
        sup.term.shown = f"line {now}"
        classifier.changed()
        await asyncio.sleep(0.001)
    return spells


async def _a_flood_is_classified_once_a_flowing_spell(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output every millisecond for 0.3 s: a round (one screen read, one process probe) at most
    every FLOWING_S, and still rounds during the flood, not only after it."""
    monkeypatch.setattr(classifying, "SETTLE_S", 0.02)
    monkeypatch.setattr(classifying, "FLOWING_S", 0.06)
    peer = Peer()
    sup, classifier = make(peer)
    await flood(sup, classifier, 0.3)
    during = len(peer.screens)
    await settle(classifier)
    assert 2 <= during <= 0.3 / 0.06 + 1
    assert sup.samples == len(peer.screens) <= during + 1


async def _a_stream_is_not_read_every_settle_and_its_end_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While output keeps coming, rounds are FLOWING_S apart, not SETTLE_S (the first round
    still comes SETTLE_S after the first output); the screen the output ends on gets its
    verdict once the output has been quiet for SETTLE_S, without waiting out FLOWING_S."""
    monkeypatch.setattr(classifying, "SETTLE_S", 0.02)
    monkeypatch.setattr(classifying, "FLOWING_S", 60.0)
    peer = Peer()
    sup, classifier = make(peer)
    spells = await flood(sup, classifier, 0.4)
    during = len(peer.screens)
    await asyncio.wait_for(settle(classifier), 5)  # well before FLOWING_S
    assert 1 <= during <= 3 + spells  # one round every SETTLE_S would have been about 20
    assert sup.verdicts[-1] == sup.term.shown


async def _output_after_a_quiet_spell_is_classified_as_it_begins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A quiet screen has its verdict; a moment later output begins and keeps flowing (an
    answer streaming after its prompt). Its first round comes SETTLE_S after it began, not
    FLOWING_S after the quiet screen's round; the rounds after that are paced again."""
    monkeypatch.setattr(classifying, "SETTLE_S", 0.02)
    monkeypatch.setattr(classifying, "FLOWING_S", 60.0)
    peer = Peer()
    sup, classifier = make(peer)
    classifier.changed()
    await settle(classifier)
    assert peer.screens == ["starting"]
    await asyncio.sleep(0.05)  # the screen stays quiet past SETTLE_S: part of the scenario
    spells = await flood(sup, classifier, 0.4)
    during = peer.screens[1:]
    await asyncio.wait_for(settle(classifier), 5)
    assert 1 <= len(during) <= 1 + spells  # not one per SETTLE_S either
    assert during[0].startswith("line ")
    assert sup.verdicts[-1] == sup.term.shown


async def _an_unchanged_request_keeps_its_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output that leaves the screen and the rest of the request as the last verdict saw them
    makes no call; one that changes the screen does; so does the same request once the verdict
    is older than REUSE_S."""
    peer = Peer()
    sup, classifier = make(peer)
    classifier.changed()
    await settle(classifier)
    classifier.changed()  # e.g. a cursor blink: the same screen
    await settle(classifier)
    assert peer.screens == ["starting"] and classifier.skipped == 1
    sup.term.shown = "Do you want to proceed?"
    classifier.changed()
    await settle(classifier)
    assert peer.screens == ["starting", "Do you want to proceed?"]
    monkeypatch.setattr(classifying, "REUSE_S", 0.0)
    classifier.changed()
    await settle(classifier)
    assert peer.screens[-1] == "Do you want to proceed?" and len(peer.screens) == 3


class Ready(Peer):
    """Every screen is ``ready`` (the echo agent's prompt line, whatever was typed on it)."""

    async def answer(
        self, target: str, method: str, body: dict[str, Any], kw: dict[str, Any]
    ) -> Any:
        await super().answer(target, method, body, kw)
        return {"state": "ready", "detail": "ready"}


async def _the_verdict_after_a_typed_prompt_is_reported_unchanged() -> None:
    peer = Ready()
    sup, classifier = make(peer)
    sup.term.shown = "echo-ready> "
    classifier.changed()
    await settle(classifier)
    sup.term.shown = "echo-ready> typed"
    classifier.changed()
    await settle(classifier)
    assert len(sup.verdicts) == 2 and sup.reports == ["ready"]  # a verdict unchanged: not told
    peer.gate.clear()
    sup.term.shown = "echo-ready> typed and sent"
    classifier.changed()
    while len(peer.calls) < 3:
        await asyncio.sleep(0.001)
    classifier.prompted()  # while a round that began before it is under way
    sup.term.shown = "echo: typed and sent\necho-ready> "
    peer.gate.set()
    await settle(classifier)
    # the round under way when the prompt was typed is not told; the next one is
    assert len(sup.verdicts) == 4 and sup.reports == ["ready", "ready"]
    classifier.changed()
    sup.term.shown = "echo: typed and sent\necho-ready> more"
    await settle(classifier)
    assert len(sup.verdicts) == 5 and sup.reports == ["ready", "ready"]


def test_same_request_leaves_out_the_time_of_the_probe() -> None:
    a = {"screen": "x", "evidence": {"agent": None, "taken": 1.0}, "title": ""}
    assert classifying.same_request(a, {**a, "evidence": {"agent": None, "taken": 2.0}})
    assert not classifying.same_request(a, {**a, "evidence": {"agent": 7, "taken": 1.0}})
    assert not classifying.same_request(a, {**a, "title": "* working"})
    assert not classifying.same_request(None, a)
    assert classifying.same_request({**a, "evidence": None}, {**a, "evidence": None})


async def _close_ends_the_rounds() -> None:
    peer = Peer(fail=10**6)
    _, classifier = make(peer)
    classifier.changed()
    while len(peer.screens) < 3:
        await asyncio.sleep(0.001)
    classifier.close()
    with pytest.raises(asyncio.CancelledError):
        assert classifier._task is not None
        await asyncio.wait_for(classifier._task, 5)


def test_output_during_a_call_gets_a_round_of_its_own() -> None:
    asyncio.run(_output_during_a_call_gets_a_round_of_its_own())


def test_a_failed_call_is_tried_again_until_there_is_a_verdict() -> None:
    asyncio.run(_a_failed_call_is_tried_again_until_there_is_a_verdict())


def test_a_burst_of_output_is_one_round() -> None:
    asyncio.run(_a_burst_of_output_is_one_round())


def test_a_flood_is_classified_once_a_flowing_spell(monkeypatch: pytest.MonkeyPatch) -> None:
    asyncio.run(_a_flood_is_classified_once_a_flowing_spell(monkeypatch))


def test_a_stream_is_not_read_every_settle_and_its_end_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asyncio.run(_a_stream_is_not_read_every_settle_and_its_end_at_once(monkeypatch))


def test_output_after_a_quiet_spell_is_classified_as_it_begins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asyncio.run(_output_after_a_quiet_spell_is_classified_as_it_begins(monkeypatch))


def test_an_unchanged_request_keeps_its_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    asyncio.run(_an_unchanged_request_keeps_its_verdict(monkeypatch))


def test_close_ends_the_rounds() -> None:
    asyncio.run(_close_ends_the_rounds())


def test_the_verdict_after_a_typed_prompt_is_reported_unchanged() -> None:
    asyncio.run(_the_verdict_after_a_typed_prompt_is_reported_unchanged())
