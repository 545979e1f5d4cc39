"""Long-lived subscribers (``events --follow``, ``attach``) notice a node or hub that went away.

A SUB socket says nothing when its publisher is gone, and after a restart the publisher may be on
another endpoint. So a subscriber that has heard nothing for ``CHECK_S`` asks again: it calls
``initialize`` on its connection, which answers the incarnation of the node (or hub) and the
events endpoint. A new incarnation or endpoint means: subscribe again, then read what was missed
(``events.since``, or a redraw). A node or hub that does not answer is tried again every
``CHECK_S`` and said so on stderr once; after ``retry_for`` seconds without an answer the
command fails ``unavailable`` instead of waiting on silence for good.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import click

from roost.client.client import Client
from roost.wire.errors import RoostError

CHECK_S = 3.0  # silence after which a subscriber asks whether its node or hub is still there
CALL_S = 5.0  # the deadline of each such question
RETRY_FOR_S = 120.0  # how long a node or hub may be gone before the command gives up
TRANSIENT = ("timeout", "unreachable", "unavailable", "not-initialized")


class Liveness:
    """When to ask, and what the answer means: nothing changed, subscribe again, or give up."""

    def __init__(
        self,
        client: Client,
        retry_for: float = RETRY_FOR_S,
        clock: Callable[[], float] = time.monotonic,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.client, self.retry_for, self._clock = client, retry_for, clock
        self.note = note or _stderr  # a full-screen client (roost tui) shows it its own way
        self.incarnation = client.info.get("incarnation")
        self.endpoint = client.events_endpoint
        self.heard_at = clock()
        self.lost_at: float | None = None

    def heard(self) -> None:
        """Something arrived from the node (an event, an answer): no need to ask for a while."""
        self.heard_at = self._clock()

    def due(self) -> bool:
        return self._clock() - self.heard_at >= CHECK_S

    def check(self) -> bool | None:
        """Ask with ``initialize``; True when the events must be subscribed again (another
        incarnation or endpoint), None without an answer. Raises ``unavailable`` once
        ``retry_for`` has passed without an answer (see ``lost``)."""
        try:
            info = self.client.initialize(timeout=CALL_S)
        except RoostError as err:
            self.lost(err)
            return None
        self.heard()
        changed = (info.get("incarnation"), self.client.events_endpoint) != (
            self.incarnation,
            self.endpoint,
        )
        self.incarnation, self.endpoint = info.get("incarnation"), self.client.events_endpoint
        return changed

    def lost(self, err: RoostError) -> None:
        """A question went unanswered (or was answered ``unreachable``): wait, or give up."""
        if err.code not in TRANSIENT:
            raise err
        now = self._clock()
        self.heard_at = now  # the next question after CHECK_S
        if self.lost_at is None:
            self.lost_at = now
            self.note(f"note: no answer ({err.code}); trying again every {CHECK_S:g} s")
        elif now - self.lost_at >= self.retry_for:
            raise RoostError(
                "unavailable",
                f"the node (or hub) has not answered for {self.retry_for:g} s ({err.code})",
                {"cause": err.code},
            )

    def found(self) -> None:
        """The node answered what was asked of it (the log read): no longer lost."""
        self.heard()
        if self.lost_at is not None:
            self.lost_at = None
            self.note("note: answered again; reading what was missed")


def _stderr(text: str) -> None:
    click.echo(text, err=True)
