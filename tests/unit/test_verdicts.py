"""A pty session's turns (supervisor.verdicts.Ledger): every turn has a start and an end."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from roost.actors.supervisor.verdicts import DISAGREE_AFTER_S, QUIET_END_S, Ledger, Verdicts

QUIET = QUIET_END_S + 0.1


def test_a_turn_too_short_to_show_busy_ends_once_its_ready_screen_is_quiet() -> None:
    ledger = Ledger()
    ledger.begin(4, typed=True)
    assert ledger.judge("ready", 4, QUIET, False) == 0  # a round begun before the prompt
    assert ledger.judge("ready", 5, 0.2, False) is None  # ready, but maybe not started yet
    assert ledger.judge("ready", 6, QUIET, False) == 1
    assert ledger.judge("ready", 7, QUIET, False) == 0  # told once


def test_a_turn_seen_busy_ends_on_the_first_ready_screen() -> None:
    ledger = Ledger()
    ledger.begin(0, typed=True)
    assert ledger.judge("busy", 1, 0.0, False) == 0
    assert ledger.judge("attention", 2, 0.0, False) == 0  # a permission prompt mid-turn
    assert ledger.judge("busy", 3, 0.0, False) == 0
    assert ledger.judge("ready", 4, 0.0, False) == 1


def test_an_interrupted_turn_ends() -> None:
    ledger = Ledger()
    ledger.begin(0, typed=True)
    assert ledger.judge("busy", 1, 0.0, False) == 0
    assert ledger.judge("ready", 2, 0.05, False) == 1  # escape: the composer is back at once


def test_a_turn_end_signal_ends_a_turn_never_seen_busy_at_once() -> None:
    ledger = Ledger()
    ledger.begin(0, typed=True)
    assert ledger.judge("ready", 1, 0.01, True) == 1


def test_a_turn_end_signal_after_the_screen_ended_the_turn_ends_nothing_more() -> None:
    ledger = Ledger()
    ledger.begin(0, typed=True)
    assert ledger.judge("busy", 1, 0.0, False) == 0
    assert ledger.judge("ready", 2, 0.0, False) == 1
    assert ledger.judge("ready", 3, 0.0, True) == 0  # that turn's own signal, late
    assert ledger.judge("ready", 4, 0.0, True) == 1  # another: a turn nobody saw start


def test_a_turn_typed_elsewhere_starts_when_the_screen_reads_busy() -> None:
    ledger = Ledger()
    assert ledger.judge("ready", 1, QUIET, False) == 0
    assert ledger.judge("busy", 2, 0.0, False) == 0
    assert ledger.judge("ready", 3, 0.0, False) == 1


def test_two_prompts_typed_quickly_are_two_turns_ending_together() -> None:
    ledger = Ledger()
    ledger.begin(3, typed=True)
    ledger.begin(3, typed=True)
    assert ledger.judge("ready", 4, 0.1, False) is None
    assert ledger.judge("ready", 5, QUIET, False) == 2


def test_a_turn_start_signal_is_the_open_turn_s_own() -> None:
    ledger = Ledger()
    ledger.begin(0, typed=True)
    ledger.begin(0, typed=False)  # the hook of the prompt just typed
    assert ledger.judge("busy", 1, 0.0, False) == 0
    assert ledger.judge("ready", 2, 0.0, False) == 1
    ledger.begin(2, typed=False)  # a prompt typed through attach, told by its hook
    assert ledger.judge("ready", 3, 0.0, True) == 1


def test_an_exit_drops_the_open_turns() -> None:
    ledger = Ledger()
    ledger.begin(0, typed=True)
    assert ledger.judge("exited", 1, 0.0, False) == 0
    assert ledger.judge("ready", 2, QUIET, False) == 0


class Sup:
    identity = None

    def __init__(self) -> None:
        self.verdicts: list[tuple[str, str, int]] = []

    def classified(self, result: dict[str, Any], *, via: str, ended: int, screen: Any) -> None:
        self.verdicts.append((str(result["state"]), via, ended))


def test_a_turn_start_signal_a_turn_end_signal_settles_is_no_disagreement() -> None:
    """A turn too short for any screen to read busy: its turn-start signal (UserPromptSubmit)
    and its turn-end signal (Stop) both come, and every screen reads ready. The turn-start is
    borne out by the turn-end that followed it, not contradicted by the ready screens."""

    async def main() -> int:
        verdicts = Verdicts(cast(Any, Sup()), lambda delay: None)
        loop = asyncio.get_running_loop()
        verdicts.prompted(1)
        verdicts.signal(signal("turn-start"), 1)
        verdicts.signal(signal("turn-end"), 1)
        for number in range(2, 6):  # rounds on a ready screen, past DISAGREE_AFTER_S
            verdicts.take({"state": "ready"}, number, False, 1.0, loop.time() + 1.0)
            await asyncio.sleep(DISAGREE_AFTER_S / 3)
        return verdicts.disagreements

    assert asyncio.run(main()) == 0


def test_a_turn_start_signal_the_screen_never_bears_out_is_a_disagreement() -> None:
    async def main() -> int:
        verdicts = Verdicts(cast(Any, Sup()), lambda delay: None)
        loop = asyncio.get_running_loop()
        verdicts.signal(signal("turn-start"), 1)
        for number in range(2, 6):
            verdicts.take({"state": "ready"}, number, False, 1.0, loop.time() + 1.0)
            await asyncio.sleep(DISAGREE_AFTER_S / 3)
        return verdicts.disagreements

    assert asyncio.run(main()) == 1


def signal(kind: str) -> Any:
    return {"kind": kind, "source": "hook", "event": "", "data": {}}


def test_a_screen_read_busy_while_a_prompt_is_typed_begins_no_turn_of_its_own() -> None:
    """codex flashes its title's spinner as a prompt's text is typed, before the submit key:
    a round that reads it is the TUI answering the keys, not a turn typed elsewhere; the prompt
    is one turn, ended once by its signal."""
    ledger = Ledger()
    assert ledger.judge("busy", 3, 0.0, False, typing=True) == 0
    ledger.begin(3, typed=True)  # the submit key, then the prompt's turn
    assert ledger.judge("ready", 4, 0.0, True) == 1
    assert ledger.judge("ready", 5, QUIET, False) == 0


def test_a_busy_screen_read_before_a_prompt_is_not_its_turn_s_busy() -> None:
    ledger = Ledger()
    ledger.begin(3, typed=True)
    assert ledger.judge("busy", 3, 0.0, False) == 0  # that round read the screen before
    assert ledger.judge("ready", 4, 0.0, False) is None  # not ended: never seen busy since
    assert ledger.judge("busy", 5, 0.0, False) == 0
    assert ledger.judge("ready", 6, 0.0, False) == 1
