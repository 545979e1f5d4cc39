"""What the unit tests share: a broker peer that records what a component says and answers as the
test scripts it, a clock the test moves, and one way to wait for a condition.

``FakePeer`` is a ``roost.actors.runtime.caller.Caller`` (and has what a supervisor's parts use
besides: ``registered``, ``notify``; what the state store uses: ``handlers``, ``publish``), so a
component takes it where it takes the node's or a supervisor's peer, with no cast.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple, cast

from roost.wire.messages import LaunchSpec

# A scripted answer to a method: a body; an exception, raised; a list of those, one per call (the
# last one stays); or a function of the request's body that returns (or awaits) one.
Reply = (
    dict[str, Any]
    | BaseException
    | list[Any]
    | Callable[[dict[str, Any]], dict[str, Any] | Awaitable[dict[str, Any]]]
)


class Call(NamedTuple):
    """One request a component made: its target, method, body and keyword arguments."""

    target: str
    method: str
    body: dict[str, Any]
    kw: dict[str, Any]


class FakePeer:
    """Records every call (``calls``), notification (``notes``) and publication (``published``);
    answers a call from ``replies`` by method (see ``Reply``), else with ``answer``, which a
    test's subclass overrides for a component with more to say (the default answers ``{}``)."""

    def __init__(
        self, replies: Mapping[str, Reply] | None = None, *, registered: bool = True
    ) -> None:
        self.replies: dict[str, Reply] = dict(replies or {})
        self.calls: list[Call] = []
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.published: list[tuple[str, dict[str, Any]]] = []
        self.handlers: dict[str, Any] = {}  # what a component registers, for the test to call
        self.registered = asyncio.Event()
        if registered:
            self.registered.set()

    async def call(
        self,
        target: str,
        method: str,
        body: dict[str, Any] | None = None,
        *,
        timeout: float = 10.0,
        session: dict[str, Any] | None = None,
        op: str = "",
    ) -> dict[str, Any]:
        kw: dict[str, Any] = {"timeout": timeout}
        if session is not None:
            kw["session"] = session
        if op:
            kw["op"] = op
        body = body if body is not None else {}
        self.calls.append(Call(target, method, body, kw))
        if method in self.replies:
            return await self._scripted(method, body)
        answer: dict[str, Any] = await self.answer(target, method, body, kw)
        return answer

    async def _scripted(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        reply = self.replies[method]
        if isinstance(reply, list):
            reply = reply.pop(0) if len(reply) > 1 else reply[0]
        answer: object = reply(body) if callable(reply) else reply
        if isinstance(answer, Awaitable):
            answer = await answer
        if isinstance(answer, BaseException):
            raise answer
        assert isinstance(answer, dict), f"no body scripted for {method}: {answer!r}"
        return answer

    async def answer(
        self, target: str, method: str, body: dict[str, Any], kw: dict[str, Any]
    ) -> Any:
        """The answer to a call ``replies`` does not script."""
        return {}

    def methods(self) -> list[str]:
        """The methods called, in order."""
        return [c.method for c in self.calls]

    def notify(self, target: str, body: dict[str, Any]) -> None:
        self.notes.append((target, body))

    def publish(self, topic: str, body: dict[str, Any]) -> None:
        self.published.append((topic, body))


class FakeClock:
    """A clock for a component that takes one (``clock: Callable[[], float]``): it says ``now``,
    which only the test moves (``advance``)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def until(
    cond: Callable[[], object], what: str = "a condition", timeout: float = 10.0, step: float = 0.01
) -> None:
    """Wait (in the running loop) until ``cond()`` is true; fail after ``timeout`` seconds. A
    ``step`` of 0 only yields to the loop between looks."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(step)


def wait_until(
    cond: Callable[[], object], what: str = "a condition", timeout: float = 10.0, step: float = 0.01
) -> None:
    """``until``, blocking, outside an event loop."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(step)


def launch_spec(**fields: Any) -> LaunchSpec:
    """A supervisor's launch spec for a test: ``fields`` over defaults that read as the keys'
    absence does (no resume, no turn limits, the default submit key)."""
    spec: dict[str, Any] = {
        "record_id": "r1",
        "generation": 1,
        "instance_id": "i1",
        "provider": "echo",
        "mode": "pty",
        "argv": ["true"],
        "cwd": "/",
        "env": {},
        "rows": 24,
        "cols": 80,
        "submit": b"\r",
        "submit_delay_s": 0.0,
        "endpoint": "",
        "token": "",
        "session_dir": "",
        "provider_session": None,
        "data_dir": "",
        "resume": False,
        "turn_silence_s": None,
        "turn_deadline_s": None,
    }
    return cast(LaunchSpec, {**spec, **fields})
