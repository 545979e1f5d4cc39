"""What a component needs of its process's broker peer: to call it, mostly.

The node's and the supervisor's parts (sessions, inputs, reports, the sweep, the restorer, the
outbox's deliverer, a turn runner...) take a ``Caller`` rather than the concrete ``Peer``, so a
test hands them a recording fake, and the type says what they use. ``Peer`` is one.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol


class Caller(Protocol):
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
        """Send a request and await its reply; raise RoostError for an error reply or deadline."""
        ...


class Link(Caller, Protocol):
    """A ``Caller`` that also says whether it is registered with the broker, and sends a
    notification (no answer): what a supervisor's parts use of its peer."""

    @property
    def registered(self) -> asyncio.Event: ...

    def notify(self, target: str, body: dict[str, Any]) -> None: ...
