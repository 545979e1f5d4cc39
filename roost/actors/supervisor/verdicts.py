"""What a pty session's screen verdicts and its signals add up to: which evidence a verdict
stands on (``via``), and where each turn starts and ends.

The screen is the authority. A signal (``signals``) asks for a round at once, without the settle
wait, and is weighed against the verdict that round gives: a verdict it bears out is reported
``via`` ``"signal"`` (the screen had not changed since the last verdict: the signal is what called
for it) or ``"both"`` (the screen changed too). A CLI may signal a little before it draws what
it signals (codex's approval notification comes before its approval screen), so a signal the
screen does not bear out yet is weighed again every ``RECHECK_S``; one still contradicted
``DISAGREE_AFTER_S`` after it was taken (a ``turn-end`` on a screen that reads busy, an
``attention`` on a ready screen) leaves the screen's verdict standing, ``via`` ``"screen"``, and
the disagreement is logged (``signal-disagrees``, with both sides). A ``turn-start`` that a
``turn-end`` signal follows is settled by it (a turn too short for any screen to read busy).
``session`` signals settle the provider session id: one teaches it while it is not known (a
fresh launch whose id the CLI chooses), and one of a ``clear`` (claude's ``/clear``: a new
conversation, a new id, in the same CLI) moves it; a signal naming another id than the one known
never gets here (``signals`` drops it).

Every pty turn has a start and an end (``Ledger``), with signals or without. A turn starts when
a prompt is typed, on a ``turn-start`` signal, or when the screen reads busy with no turn open (a
prompt typed through ``roost attach``; not a screen read while roost types an input: that is the
TUI answering the keys, and a prompt begins its own turn). It ends on the first ready verdict of a
round begun after it started, once a round begun after it started read the screen busy, or a
``turn-end`` signal bears the end out, or the ready screen has been quiet for ``QUIET_END_S`` (an
agent that answered before its screen ever read busy). A ``turn-end`` signal with no turn open
ends the turn the screen ended already (it is reported ``via`` ``"both"``) or, when that one had
its signal, a turn nobody saw start.
Prompts typed before the screen shows their turn's end are one turn each, all ending together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from roost.actors.supervisor.signals import CLEARED
from roost.adapters.base import ATTENTION, BUSY, EXITED, READY, SHELL
from roost.wire import signals as ws

if TYPE_CHECKING:
    from roost.actors.supervisor.host import Session

log = structlog.get_logger("roost.verdicts")

QUIET_END_S = 1.0  # a prompt's ready screen, never seen busy, ends its turn once this quiet
RECHECK_S = 0.25  # a signal the screen does not bear out yet is weighed again this often
DISAGREE_AFTER_S = 2.0  # and judged contradicted this long after it was taken
# What each kind of signal expects the screen to read (kinds absent here expect nothing of it).
EXPECTS: dict[str, tuple[str, ...]] = {
    "turn-start": (BUSY,),
    "turn-end": (READY, ATTENTION, SHELL, EXITED),
    "attention": (ATTENTION,),
}


@dataclass
class Ledger:
    """The turns of a pty session, from typed prompts, signals and verdicts. Pure."""

    open: int = 0  # turns begun and not ended
    begun_round: int = -1  # the classifier's count of rounds begun when the last one began
    busy_seen: bool = False  # the screen read busy since the open turns began
    claimable: bool = False  # the last turn ended on the screen alone; its turn-end may follow

    def begin(self, rounds: int, *, typed: bool) -> None:
        """A prompt typed (each is a turn) or a ``turn-start`` signal (the open turn's, if one
        is open)."""
        if self.open and not typed:
            return
        if not self.open:
            self.busy_seen = False
        self.open += 1
        self.begun_round, self.claimable = rounds, False

    def judge(
        self, state: str, number: int, quiet_s: float, signal_end: bool, *, typing: bool = False
    ) -> int | None:
        """How many turns the verdict of round ``number`` ends (None: ask again once the screen
        has been quiet for ``QUIET_END_S``). ``typing``: the round read the screen while roost
        was typing an input into the agent."""
        if state == BUSY:
            if not self.open:
                if typing:  # the TUI's answer to the keys (codex flashes its title's spinner
                    return 0  # as a prompt is typed): the prompt's own turn begins when it is
                self.begin(number - 1, typed=False)
            if number > self.begun_round:  # a screen read before the open turns began says
                self.busy_seen = True  # nothing of them
            return 0
        if state in (EXITED, SHELL):
            self.open, self.busy_seen = 0, False  # the exit is told on its own
            return 0
        if state != READY:
            return 0
        if not self.open:
            if not signal_end:
                return 0
            if self.claimable:  # the end the screen told already: now borne out
                self.claimable = False
                return 0
            return 1
        if number <= self.begun_round:
            return 0  # that round read the screen from before the turn began
        if not (self.busy_seen or signal_end or quiet_s >= QUIET_END_S):
            return None
        ended, self.open, self.busy_seen = self.open, 0, False
        self.claimable = not signal_end
        return ended


@dataclass
class Pending:
    sig: ws.Signal
    taken: float  # the loop's time it was taken


@dataclass
class Verdicts:
    """Weighs each round's verdict (``take``) against the signals taken since (``signal``)."""

    sup: Session
    ask: Callable[[float], None]  # the classifier's ``signalled``: a round in ``delay`` seconds
    ledger: Ledger = field(default_factory=Ledger)
    pending: list[Pending] = field(default_factory=list)
    disagreements: int = 0

    def prompted(self, rounds: int) -> None:
        self.ledger.begin(rounds, typed=True)

    def signal(self, sig: ws.Signal, rounds: int) -> None:
        """A taken signal of a kind the screen can bear out, or a ``session``."""
        kind = sig["kind"]
        if kind == "session":
            self._session(sig)
        if kind == "turn-start":
            self.ledger.begin(rounds, typed=False)
        if kind == "turn-end":  # the turns it ends were borne out: no screen need read them busy
            self.pending = [item for item in self.pending if item.sig["kind"] != "turn-start"]
        if kind in EXPECTS:
            self.pending.append(Pending(sig, asyncio.get_running_loop().time()))
        self.ask(0.0)

    def _session(self, sig: ws.Signal) -> None:
        """The CLI's session id, exactly (logged: one per start, resume, clear or compact); an
        id other than the one known is logged, not taken (the channel drops another session's
        signals before they get here; the screen's and the files' checks judge a resume that
        went elsewhere)."""
        found = sig["data"].get("provider_session")
        if not isinstance(found, str) or not found:
            return
        known, how = self.sup.identity, sig["data"].get("how")
        log.info("signal-session", provider_session=found, how=how, known=known)
        if known is not None and found != known and how == CLEARED:
            self.sup.cleared(found)
            return
        if known is not None and found != known:
            log.warning(
                "signal-identity-mismatch",
                known=known,
                signalled=found,
                source=sig["source"],
                how=sig["data"].get("how"),
            )
            return
        self.sup.learn(found)

    def take(
        self,
        result: dict[str, Any],
        number: int,
        output: bool,
        quiet_s: float,
        started: float,
        *,
        screen: str | None = None,
        typing: bool = False,
    ) -> None:
        """The verdict of round ``number``, begun at loop time ``started`` (``output``: the
        screen changed since the round before; ``quiet_s``: how long it had been quiet;
        ``screen``: the text it was read from; ``typing``: read while an input was typed)."""
        state = str(result.get("state"))
        agreed, signal_end = self._weigh(state, result, started)
        ended = self.ledger.judge(state, number, quiet_s, signal_end, typing=typing)
        if ended is None:
            self.ask(max(QUIET_END_S - quiet_s, 0.0) + 0.01)
        via = ("both" if output else "signal") if agreed else "screen"
        if agreed and signal_end and not ended and state == READY:
            via = "both"  # the end the screen told, borne out by its signal
        self.sup.classified(result, via=via, ended=ended or 0, screen=screen)

    def _weigh(self, state: str, result: dict[str, Any], started: float) -> tuple[bool, bool]:
        """Whether signals bore this verdict out, and whether one of them was a turn's end;
        one that did not is weighed again, until ``DISAGREE_AFTER_S`` have passed since it was
        taken: then it is logged as disagreeing, and dropped. A verdict on a screen read before
        a signal was taken says nothing of it."""
        agreed = signal_end = False
        keep: list[Pending] = []
        now = asyncio.get_running_loop().time()
        for item in self.pending:
            kind = item.sig["kind"]
            if item.taken > started:
                keep.append(item)
            elif state in EXPECTS[kind]:
                agreed = True
                signal_end = signal_end or kind == "turn-end"
            elif now - item.taken < DISAGREE_AFTER_S:
                keep.append(item)
            else:
                self._disagrees(item, state, result)
        self.pending = keep
        if keep:
            left = min(item.taken for item in keep) + DISAGREE_AFTER_S - now
            self.ask(min(RECHECK_S, max(left, 0.0)) + 0.01)
        return agreed, signal_end

    def _disagrees(self, item: Pending, state: str, result: dict[str, Any]) -> None:
        self.disagreements += 1
        log.info(
            "signal-disagrees",
            signal=item.sig["kind"],
            source=item.sig["source"],
            provider_event=item.sig.get("event"),
            data=item.sig["data"],
            screen=state,
            reason=result.get("reason"),
        )
