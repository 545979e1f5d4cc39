"""Coroutines started at once, given a Task only when they wait (roost.actors.runtime.eager)."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from roost.actors.runtime import eager

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="outside")


def run(main: Any) -> None:
    asyncio.run(asyncio.wait_for(main(), 10))


def test_a_coroutine_that_never_waits_completes_at_once_without_a_task() -> None:
    async def main() -> None:
        seen: list[str] = []

        async def handler() -> None:
            seen.append("ran")

        tasks: set[asyncio.Task[Any]] = set()
        eager.start(handler(), tasks)
        assert seen == ["ran"] and not tasks

    run(main)


def test_one_that_waits_goes_on_in_a_task_from_where_it_stopped() -> None:
    async def main() -> None:
        seen: list[Any] = []
        waited: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def handler() -> None:
            seen.append("first step")
            seen.append(await waited)
            await asyncio.sleep(0)
            seen.append("done")

        tasks: set[asyncio.Task[Any]] = set()
        eager.start(handler(), tasks)
        assert seen == ["first step"] and len(tasks) == 1
        waited.set_result(5)
        await asyncio.wait_for(asyncio.gather(*tasks), 5)
        assert seen == ["first step", 5, "done"] and not tasks

    run(main)


def test_first_steps_run_in_the_order_they_are_started() -> None:
    async def main() -> None:
        order: list[int] = []
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def handler(n: int) -> None:
            order.append(n)
            if n % 2:
                await gate
            order.append(n * 10)

        tasks: set[asyncio.Task[Any]] = set()
        for n in range(4):
            eager.start(handler(n), tasks)
        assert order == [0, 0, 1, 2, 20, 3]
        gate.set_result(None)
        await asyncio.gather(*tasks)
        assert order[6:] == [10, 30]

    run(main)


def test_cancelling_the_task_cancels_what_it_waits_on_inside_the_coroutine() -> None:
    async def main() -> None:
        seen: list[str] = []
        waited: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def handler() -> None:
            try:
                await waited
            except asyncio.CancelledError:
                seen.append("cancelled inside")
                raise

        tasks: set[asyncio.Task[Any]] = set()
        eager.start(handler(), tasks)
        task = next(iter(tasks))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert seen == ["cancelled inside"] and waited.cancelled()

    run(main)


def test_exceptions_and_timeouts_reach_the_coroutine_as_in_a_task() -> None:
    async def main() -> None:
        seen: list[str] = []
        waited: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def handler() -> None:
            try:
                await asyncio.wait_for(asyncio.sleep(5), 0.01)
            except TimeoutError:
                seen.append("timed out")
            try:
                await waited
            except ValueError:
                seen.append("raised")

        tasks: set[asyncio.Task[Any]] = set()
        eager.start(handler(), tasks)
        await asyncio.sleep(0.1)
        waited.set_exception(ValueError("x"))
        await asyncio.gather(*tasks)
        assert seen == ["timed out", "raised"]

    run(main)


def test_each_coroutine_runs_in_a_copy_of_the_context() -> None:
    async def main() -> None:
        seen: list[str] = []
        waited: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def handler() -> None:
            VAR.set("inside")
            await waited
            seen.append(VAR.get())

        tasks: set[asyncio.Task[Any]] = set()
        eager.start(handler(), tasks)
        assert VAR.get() == "outside"  # the first step's change stayed in its own context
        waited.set_result(None)
        await asyncio.gather(*tasks)
        assert seen == ["inside"]

    run(main)
