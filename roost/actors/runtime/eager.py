"""Start a coroutine at once, and give it a Task only when it has to wait.

Most requests an actor serves are answered from memory (a claim renewed, a lease checked) and
complete without ever suspending; an ``asyncio.Task`` per message then costs more than the
handler. So the first step runs here and now, in a fresh copy of the context as a Task would run
it, and only a coroutine that suspends gets a Task, which drives it on from where it stopped:
the future it waits on, cancellation and the context are the Task's as usual. This is Python
3.12's eager task start, for 3.11.

Where it differs from a Task: during its first step the coroutine runs inside the caller, where
``asyncio.current_task()`` is the caller's (None in a loop callback), and an exception that step
raises reaches the caller. Coroutines started this way begin in the order they are started, as
Tasks created in that order would.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine, Generator
from typing import Any


def start(coro: Coroutine[Any, Any, Any], tasks: set[asyncio.Task[Any]]) -> None:
    """Run ``coro`` up to its first suspension; if it suspends, a Task (kept in ``tasks`` until
    it is done, so its owner can cancel it) carries it on."""
    context = contextvars.copy_context()
    try:
        waited = context.run(coro.send, None)
    except StopIteration:
        return
    if getattr(waited, "_asyncio_future_blocking", None):
        # taken as a Task takes it: the flag is also how a future tells a second awaiter from
        # the first, so it must not stay set while the future waits for our Task
        waited._asyncio_future_blocking = False
    task = asyncio.get_running_loop().create_task(_resume(coro, waited), context=context)
    tasks.add(task)
    task.add_done_callback(tasks.discard)


async def _resume(coro: Coroutine[Any, Any, Any], waited: Any) -> Any:
    return await _Resumed(coro, waited)


class _Resumed:
    """A started coroutine as an awaitable: what it waits on goes up to the Task driving us, and
    what the Task sends (a result, CancelledError) goes down to it, as ``yield from`` would."""

    def __init__(self, coro: Coroutine[Any, Any, Any], waited: Any) -> None:
        self._coro, self._waited = coro, waited

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, waited = self._coro, self._waited
        if getattr(waited, "_asyncio_future_blocking", None) is not None:
            waited._asyncio_future_blocking = True  # handed to the Task as Future.__await__ would
        while True:
            try:
                sent = yield waited
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                try:
                    waited = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    waited = coro.send(sent)
                except StopIteration as stop:
                    return stop.value
