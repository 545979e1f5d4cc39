"""The supervisor's classification rounds (supervisor.classifying), against a stub supervisor
whose adapter calls the test answers, fails or holds."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
import structlog.testing

from roost.actors.supervisor import classifying, verdicts
from roost.actors.supervisor.classifying import ScreenClassifier
from roost.actors.supervisor.host import Session
from roost.wire import signals as ws
from roost.wire.errors import RoostError
from tests import kit


class Screen:
    def __init__(self) -> None:
        self.shown = "starting"

    def text(self) -> str:
        return self.shown

    def before_read(self) -> None:
        """What the agent wrote meanwhile is all in ``shown`` already."""


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
        self.identity: str | None = "known"
        self.typing = False  # an input being typed
        self.agent: Any = None  # the PTY agent (None: no paced reads)
        self.checks = Checks()
        self.verdicts: list[str] = []
        self.screens: list[str | None] = []  # the screen each verdict read
        self.vias: list[str] = []
        self.ended = 0  # turns the verdicts ended
        self.classification: dict[str, Any] = {}
        self.reports: list[str] = []  # node.session.classified, as the supervisor reports
        self.samples = 0  # process probes taken (one per call, never one per output)

    def evidence(self) -> None:
        self.samples += 1
        return None

    def classified(
        self,
        result: dict[str, Any],
        *,
        via: str = "screen",
        ended: int = 0,
        screen: str | None = None,
    ) -> None:
        self.screens.append(screen)
        self.verdicts.append(result["detail"])
        self.vias.append(via)
        self.ended += ended
        if result != self.classification:
            self.classification = result
            self.report("node.session.classified", {"classification": result})

    def learn(self, provider_session: str) -> None:
        self.identity = provider_session

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


class Agent:
    pacing = True  # its reads are paced


async def _paced_reads_are_no_pauses_and_their_end_is_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Output read at a pace longer than the settle time (an unwatched session's paced reads):
    the wait between two reads is no pause in the output (a round after each would have been
    one per read); the end of the pacing is, and gets its round at once."""
    monkeypatch.setattr(classifying, "SETTLE_S", 0.02)
    monkeypatch.setattr(classifying, "FLOWING_S", 60.0)
    peer = Peer()
    sup, classifier = make(peer)
    sup.agent = agent = Agent()
    loop = asyncio.get_running_loop()
    end = loop.time() + 0.5
    while loop.time() < end:
        sup.term.shown = f"line {loop.time()}"
        classifier.changed()
        await asyncio.sleep(0.04)  # the pace: twice the settle time
    during = len(peer.screens)
    assert 1 <= during <= 2, peer.screens  # the first, SETTLE_S after the output began
    agent.pacing = False  # a paced read found nothing
    classifier.unpaced()
    await asyncio.wait_for(settle(classifier), 1)  # not FLOWING_S
    assert sup.verdicts[-1] == sup.term.shown


def test_paced_reads_are_no_pauses_and_their_end_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    asyncio.run(_paced_reads_are_no_pauses_and_their_end_is_one(monkeypatch))


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


class Judged(Peer):
    """The screen's words decide: ``busy`` on it reads busy, ``asks`` attention, else ready."""

    async def answer(
        self, target: str, method: str, body: dict[str, Any], kw: dict[str, Any]
    ) -> Any:
        await super().answer(target, method, body, kw)
        screen = body["screen"]
        state = "busy" if "busy" in screen else "attention" if "asks" in screen else "ready"
        return {"state": state, "detail": screen}


def signal(kind: ws.SignalKind, seq: int = 1, **data: Any) -> ws.Signal:
    return {
        "v": ws.VERSION,
        "record": "r1",
        "generation": 1,
        "seq": seq,
        "source": "hook",
        "kind": kind,
        "at": 0.0,
        "data": data,
    }


@pytest.fixture
def slow_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output waits long for its round, so only a signal's round can come soon."""
    monkeypatch.setattr(classifying, "SETTLE_S", 30.0)
    monkeypatch.setattr(verdicts, "QUIET_END_S", 0.2)
    monkeypatch.setattr(verdicts, "RECHECK_S", 0.05)
    monkeypatch.setattr(verdicts, "DISAGREE_AFTER_S", 0.3)


async def _a_prompt_answered_before_its_screen_read_busy_ends_its_turn_once_quiet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(verdicts, "QUIET_END_S", 0.2)
    peer = Judged()
    sup, classifier = make(peer)
    sup.term.shown = "> "
    classifier.changed()
    await settle(classifier)
    assert sup.ended == 0 and sup.reports == ["> "]
    sup.term.shown = "> hi\necho: hi\n> "
    classifier.prompted()  # the agent answered at once: its screen never read busy
    await kit.until(lambda: sup.ended == 1, "the turn's end")
    await asyncio.sleep(0.3)
    assert sup.ended == 1 and set(sup.vias) == {"screen"}


async def _a_turn_end_signal_ends_a_turn_never_seen_busy_at_once() -> None:
    peer = Judged()
    sup, classifier = make(peer)
    sup.term.shown = "> "
    classifier.signalled()
    await until_rounds(peer, 1)
    classifier.prompted()  # its round is due in SETTLE_S (30 s)
    classifier.signal(signal("turn-end"))  # long before the quiet spell would end it
    await kit.until(lambda: sup.ended == 1, "the turn's end", timeout=2)
    assert sup.vias[-1] == "both"  # the prompt counts as a change of the screen


async def until_rounds(peer: Peer, n: int) -> None:
    await kit.until(lambda: len(peer.screens) >= n, f"{n} calls")


async def _a_signal_gets_a_round_at_once_and_is_named_as_its_evidence() -> None:
    peer = Judged()
    sup, classifier = make(peer)
    classifier.signalled()
    await until_rounds(peer, 1)
    sup.term.shown = "the agent asks: may I?"
    classifier.changed()  # due in SETTLE_S (30 s)
    classifier.signal(signal("attention", reason="permission"))
    await kit.until(lambda: len(sup.verdicts) == 2, "the signal's round", timeout=2)
    assert sup.verdicts[-1] == "the agent asks: may I?" and sup.vias[-1] == "both"
    classifier.signal(signal("attention", seq=2))  # the same screen: asked again all the same
    await kit.until(lambda: len(peer.screens) == 3, "a call for the unchanged screen")
    assert sup.vias[-1] == "signal"


async def _the_screen_wins_when_a_signal_disagrees_and_it_is_logged() -> None:
    peer = Judged()
    sup, classifier = make(peer)
    sup.term.shown = "busy: thinking"
    classifier.signalled()
    await until_rounds(peer, 1)
    with structlog.testing.capture_logs() as logs:
        classifier.signal(signal("turn-end", status="ok"))
        await kit.until(lambda: classifier.verdicts.disagreements == 1, "the disagreement")
    assert sup.ended == 0 and set(sup.vias) == {"screen"}
    assert len(peer.screens) >= 3  # the signal's round, and more looks before it is judged
    (said,) = [e for e in logs if e["event"] == "signal-disagrees"]
    assert said["signal"] == "turn-end" and said["screen"] == "busy"
    assert said["source"] == "hook" and said["data"] == {"status": "ok"}
    sup.term.shown = "done\n> "  # the turn ends on the screen later: that end is told
    classifier.signalled()
    await kit.until(lambda: sup.ended == 1, "the end the screen shows")


async def _a_signal_the_screen_draws_a_moment_later_is_borne_out() -> None:
    peer = Judged()
    sup, classifier = make(peer)
    sup.term.shown = "busy: working"
    classifier.signalled()
    await until_rounds(peer, 1)
    classifier.signal(signal("attention", reason="permission"))  # before its screen is drawn
    await until_rounds(peer, 3)
    sup.term.shown = "the agent asks: run ls?"
    await kit.until(lambda: sup.verdicts[-1] == "the agent asks: run ls?", "the approval screen")
    assert sup.vias[-1] == "signal" and classifier.verdicts.disagreements == 0
    await asyncio.sleep(0.4)  # past DISAGREE_AFTER_S: nothing is left to disagree
    assert classifier.verdicts.disagreements == 0 and classifier.verdicts.pending == []


async def _a_verdict_on_a_screen_read_before_a_signal_says_nothing_of_it() -> None:
    peer = Judged()
    sup, classifier = make(peer)
    sup.term.shown = "> "
    peer.gate.clear()
    classifier.signalled()
    await until_rounds(peer, 1)  # this call read the screen before the signal came
    classifier.signal(signal("turn-end"))
    peer.gate.set()
    await kit.until(lambda: len(sup.vias) == 2, "the signal's own round")
    assert sup.vias == ["screen", "signal"] and sup.ended == 1


async def _a_session_signal_settles_the_id_and_a_different_one_is_not_taken() -> None:
    peer = Judged()
    sup, classifier = make(peer)
    sup.identity = None
    classifier.signal(signal("session", provider_session="abc", how="startup"))
    assert sup.identity == "abc"
    with structlog.testing.capture_logs() as logs:
        classifier.signal(signal("session", seq=2, provider_session="other", how="resume"))
    assert sup.identity == "abc"
    assert [e["signalled"] for e in logs if e["event"] == "signal-identity-mismatch"] == ["other"]
    await settle(classifier)


def test_a_prompt_answered_before_its_screen_read_busy_ends_its_turn_once_quiet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asyncio.run(
        _a_prompt_answered_before_its_screen_read_busy_ends_its_turn_once_quiet(monkeypatch)
    )


@pytest.mark.usefixtures("slow_settle")
def test_a_turn_end_signal_ends_a_turn_never_seen_busy_at_once() -> None:
    asyncio.run(_a_turn_end_signal_ends_a_turn_never_seen_busy_at_once())


@pytest.mark.usefixtures("slow_settle")
def test_a_signal_gets_a_round_at_once_and_is_named_as_its_evidence() -> None:
    asyncio.run(_a_signal_gets_a_round_at_once_and_is_named_as_its_evidence())


@pytest.mark.usefixtures("slow_settle")
def test_the_screen_wins_when_a_signal_disagrees_and_it_is_logged() -> None:
    asyncio.run(_the_screen_wins_when_a_signal_disagrees_and_it_is_logged())


@pytest.mark.usefixtures("slow_settle")
def test_a_signal_the_screen_draws_a_moment_later_is_borne_out() -> None:
    asyncio.run(_a_signal_the_screen_draws_a_moment_later_is_borne_out())


@pytest.mark.usefixtures("slow_settle")
def test_a_verdict_on_a_screen_read_before_a_signal_says_nothing_of_it() -> None:
    asyncio.run(_a_verdict_on_a_screen_read_before_a_signal_says_nothing_of_it())


def test_a_session_signal_settles_the_id_and_a_different_one_is_not_taken() -> None:
    asyncio.run(_a_session_signal_settles_the_id_and_a_different_one_is_not_taken())


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


async def spinner(
    sup: Sup, classifier: ScreenClassifier, seconds: float, gap: float, text: str = "busy"
) -> None:
    """A working agent's screen: redrawn every ``gap`` seconds for ``seconds``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while (now := loop.time()) < end:
        sup.term.shown = f"{text} {now}"
        classifier.changed()
        await asyncio.sleep(gap)


@pytest.fixture
def paced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(classifying, "SETTLE_S", 0.02)
    monkeypatch.setattr(classifying, "BUSY_SETTLE_S", 0.08)
    monkeypatch.setattr(classifying, "FLOWING_S", 0.05)
    monkeypatch.setattr(classifying, "FLOWING_MAX_S", 0.4)


async def _a_busy_screen_is_read_ever_less_often_while_it_keeps_flowing() -> None:
    """A spinner whose pauses pass SETTLE_S but not BUSY_SETTLE_S, for 1.6 s: each pause is
    no round of its own (one per SETTLE_S pause would be about 40), and rounds that find it
    busy again come ever further apart, up to FLOWING_MAX_S (one a FLOWING_S would be 32).
    The screen it ends on has its verdict once it has been quiet."""
    peer = Judged()
    sup, classifier = make(peer)
    await spinner(sup, classifier, 1.6, 0.04)
    during = len(peer.screens)
    await asyncio.wait_for(settle(classifier), 5)
    assert 2 <= during <= 9, peer.screens
    assert sup.verdicts[-1] == sup.term.shown


async def _a_changed_verdict_or_a_prompt_paces_the_rounds_as_before() -> None:
    """Once the rounds of a busy flow are far apart, a verdict other than busy brings the pace
    back to FLOWING_S, and so does a prompt."""
    peer = Judged()
    sup, classifier = make(peer)
    await spinner(sup, classifier, 1.0, 0.04)
    assert classifier._flowing > classifying.FLOWING_S
    classifier.prompted()
    assert classifier._flowing == classifying.FLOWING_S
    await spinner(sup, classifier, 1.0, 0.04)
    before = len(peer.screens)
    await spinner(sup, classifier, 0.6, 0.04, text="asks")  # a question drawn as it goes on
    assert classifier._flowing == classifying.FLOWING_S
    assert len(peer.screens) - before >= 2  # at the old pace again once it asked
    await asyncio.wait_for(settle(classifier), 5)
    assert sup.verdicts[-1] == sup.term.shown


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


@pytest.mark.usefixtures("paced")
def test_a_busy_screen_is_read_ever_less_often_while_it_keeps_flowing() -> None:
    asyncio.run(_a_busy_screen_is_read_ever_less_often_while_it_keeps_flowing())


@pytest.mark.usefixtures("paced")
def test_a_changed_verdict_or_a_prompt_paces_the_rounds_as_before() -> None:
    asyncio.run(_a_changed_verdict_or_a_prompt_paces_the_rounds_as_before())
