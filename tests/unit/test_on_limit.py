"""The usage-limit policy (roost.actors.node.limits): when the node types a continue, and when
never."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from roost.actors.node.limits import MARGIN_S, Limit, Limits, armed, decide
from roost.actors.state import records as r

RESET = 1_796_322_660.0
SCREEN = "d1" * 16
LIMITED = {"state": "attention", "reason": "rate-limit", "detail": "■ ...", "reset_at": RESET}


def record(**changes: Any) -> r.Record:
    base = r.Record(
        id="r0123456789",
        name="a",
        provider="codex",
        mode="pty",
        cwd="/srv",
        state=r.ATTENTION,
        generation=2,
        attention="rate-limit",
        on_limit="continue",
        reset_at=RESET,
    )
    return replace(base, **changes)


LIMIT = Limit("r0123456789", 2, RESET, SCREEN)


def test_a_usage_limit_with_a_reset_arms_a_continue_under_the_policy_continue() -> None:
    assert armed(record(), LIMITED, SCREEN) == LIMIT
    assert LIMIT.op == f"limit-continue:r0123456789:2:{int(RESET)}"  # record, generation, reset


@pytest.mark.parametrize(
    ("rec", "result", "screen"),
    [
        (record(on_limit="wait"), LIMITED, SCREEN),  # the default: report only
        (record(mode="stream"), LIMITED, SCREEN),
        (record(), {**LIMITED, "reason": "login"}, SCREEN),  # any other screen: never
        (record(), {**LIMITED, "state": "ready", "reason": None}, SCREEN),
        (record(), {k: v for k, v in LIMITED.items() if k != "reset_at"}, SCREEN),  # no reset
        (record(), {**LIMITED, "self_continues": True}, SCREEN),  # claude continues by itself
        (record(), LIMITED, None),  # a supervisor that does not report its screen
    ],
)
def test_nothing_else_arms_one(rec: r.Record, result: dict[str, Any], screen: str | None) -> None:
    assert armed(rec, result, screen) is None


def test_the_decision_at_the_reset() -> None:
    after = RESET + MARGIN_S
    assert decide(LIMIT, record(), SCREEN, after) == "type"
    assert decide(LIMIT, record(), SCREEN, after - 0.5) == "early"
    assert decide(LIMIT, record(), "0" * 32, after) == "screen-changed"
    assert decide(LIMIT, record(), None, after) == "screen-changed"  # no live screen to compare
    assert decide(LIMIT, record(on_limit="wait"), SCREEN, after) == "policy"  # changed since
    assert decide(LIMIT, record(generation=3), SCREEN, after) == "moved"  # resumed since
    assert decide(LIMIT, record(state=r.LIVE, attention=None), SCREEN, after) == "moved"
    assert decide(LIMIT, record(reset_at=RESET + 3600), SCREEN, after) == "moved"  # a new limit


class Node:
    """The node as ``Limits`` sees it: a record, its live screen, and what was typed."""

    def __init__(self, rec: r.Record, screen: str | None = SCREEN) -> None:
        self.rec, self.screen = rec, screen
        self.typed: list[str] = []
        self.now = RESET + MARGIN_S + 1

    async def read(self, record_id: str) -> tuple[r.Record, str | None]:
        return self.rec, self.screen

    async def type(self, limit: Limit) -> dict[str, Any]:
        self.typed.append(limit.op)
        return {"seq": len(self.typed)}

    def limits(self) -> Limits:
        return Limits(self.read, self.type, clock=lambda: self.now)


async def settle(limits: Limits) -> None:
    async def done() -> None:
        while limits._timers:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(done(), 5)


def test_a_passed_reset_is_continued_once_however_often_it_is_seen() -> None:
    asyncio.run(_test_a_passed_reset_is_continued_once_however_often_it_is_seen())


async def _test_a_passed_reset_is_continued_once_however_often_it_is_seen() -> None:
    node = Node(record())
    limits = node.limits()
    limits.seen(node.rec, LIMITED, SCREEN)
    limits.seen(node.rec, LIMITED, SCREEN)  # the same verdict again: the same timer
    await settle(limits)
    assert node.typed == [LIMIT.op]


def test_a_changed_screen_is_never_answered() -> None:
    asyncio.run(_test_a_changed_screen_is_never_answered())


async def _test_a_changed_screen_is_never_answered() -> None:
    node = Node(record(), screen="0" * 32)
    limits = node.limits()
    limits.seen(node.rec, LIMITED, SCREEN)
    await settle(limits)
    assert node.typed == []


def test_a_new_verdict_disarms_the_continue_before_its_reset() -> None:
    asyncio.run(_test_a_new_verdict_disarms_the_continue_before_its_reset())


async def _test_a_new_verdict_disarms_the_continue_before_its_reset() -> None:
    node = Node(record())
    node.now = RESET - 30  # the reset is half a minute away
    limits = node.limits()
    limits.seen(node.rec, LIMITED, SCREEN)
    assert limits._timers
    limits.seen(node.rec, {"state": "busy", "reason": None, "detail": ""}, "f" * 32)
    assert not limits._timers
    await asyncio.sleep(0)
    assert node.typed == []


def test_the_policy_wait_types_nothing() -> None:
    asyncio.run(_test_the_policy_wait_types_nothing())


async def _test_the_policy_wait_types_nothing() -> None:
    node = Node(record(on_limit="wait"))
    limits = node.limits()
    limits.seen(node.rec, LIMITED, SCREEN)
    await settle(limits)
    assert node.typed == [] and not limits._timers
