"""What the supervisor's helpers see of it: the checks, the classifier and the keyboard are built
by the supervisor and handed it as a ``Session``, a protocol, so none of them imports the actor.
"""

from __future__ import annotations

from typing import Any, Protocol

from roost.actors.runtime.caller import Link
from roost.actors.supervisor.outbox import Outbox
from roost.actors.supervisor.pty_agent import PtyAgent
from roost.actors.supervisor.pty_backend import ExitStatus
from roost.actors.supervisor.terminal import Terminal
from roost.actors.supervisor.turns import TurnRunner
from roost.wire import protocol as p
from roost.wire.messages import LaunchSpec


class Checks(Protocol):
    """The identity and resume checks (``checks.IdentityAndResume``), as the others use them."""

    def view(self) -> dict[str, Any]: ...

    async def discover(self) -> None: ...

    async def settled_verdict(self) -> None: ...

    @property
    def pending(self) -> bool: ...


class Session(Protocol):
    spec: LaunchSpec
    record_id: str
    generation: int
    instance_id: str
    provider: str
    term: Terminal
    outbox: Outbox
    agent: PtyAgent | None
    turns: TurnRunner | None
    exit: ExitStatus | None
    identity: str | None
    launched_at: float
    classification: dict[str, Any]  # the adapter's last verdict on the screen ({} before one)

    @property
    def peer(self) -> Link: ...

    @property
    def checks(self) -> Checks: ...

    @property
    def typing(self) -> bool:
        """An input is being typed into the agent now."""
        ...

    def pty(self, header: p.Header) -> PtyAgent:
        """The PTY agent a request for this generation may type into (else a stable error)."""
        ...

    def report(self, method: str, body: dict[str, Any]) -> None: ...

    def learn(self, provider_session: str) -> None: ...

    def cleared(self, provider_session: str) -> None:
        """The CLI itself moved to a new conversation (claude's ``/clear``): its new id."""
        ...

    def evidence(self) -> dict[str, Any] | None: ...

    def classified(
        self,
        result: dict[str, Any],
        *,
        via: str = "screen",
        ended: int = 0,
        screen: str | None = None,
    ) -> None:
        """The adapter's verdict, the evidence it stands on, the turns it ends, and the screen
        it read."""
        ...

    def prompted(self) -> None:
        """A prompt was typed (its screen's next verdict is reported, changed or not)."""
        ...
