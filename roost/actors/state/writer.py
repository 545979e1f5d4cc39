"""The state store's write path as its method groups see it (``journal``): a ``Mutation`` runs in
the writer task's transaction and returns its reply and the events it appended.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, Protocol

from roost.wire.messages import Event

Mutation = Callable[[], tuple[dict[str, Any], list[Event]]]


class Writer(Protocol):
    conn: sqlite3.Connection

    async def write(self, mutation: Mutation) -> dict[str, Any]:
        """Queue ``mutation`` for the next committed batch; its reply once it is durable."""
        ...

    def append(self, events: list[Event]) -> list[Event]:
        """Inside a mutation: append events; only those newly written come back."""
        ...
