"""roost.actors.runtime.keyed: one holder per key at a time, and no lock kept once nobody holds
or waits for it (a cancelled waiter included)."""

from __future__ import annotations

import asyncio

import pytest

from roost.actors.runtime.keyed import KeyedLocks


def test_one_holder_per_key_and_other_keys_run_alongside() -> None:
    async def scenario() -> list[str]:
        locks, order = KeyedLocks(), []
        release = asyncio.Event()

        async def first() -> None:
            async with locks.hold("a"):
                order.append("a1 in")
                await release.wait()
                order.append("a1 out")

        async def second() -> None:
            async with locks.hold("a"):
                order.append("a2 in")

        async def other() -> None:
            async with locks.hold("b"):
                order.append("b in")

        tasks = [asyncio.ensure_future(c()) for c in (first, second, other)]
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(locks) == 1  # "b" came and went; "a" is held and waited for
        release.set()
        await asyncio.gather(*tasks)
        assert len(locks) == 0
        return order

    assert asyncio.run(scenario()) == ["a1 in", "b in", "a1 out", "a2 in"]


def test_a_cancelled_waiter_or_a_failing_holder_leaves_nothing_behind() -> None:
    async def scenario() -> int:
        locks = KeyedLocks()
        release = asyncio.Event()

        async def holder() -> None:
            async with locks.hold("a"):
                await release.wait()
                raise ValueError("the block failed")

        async def waiter() -> None:
            async with locks.hold("a"):
                raise AssertionError("never runs: cancelled while waiting")

        held = asyncio.ensure_future(holder())
        waiting = asyncio.ensure_future(waiter())
        for _ in range(5):
            await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        release.set()
        with pytest.raises(ValueError):
            await held
        return len(locks)

    assert asyncio.run(scenario()) == 0
