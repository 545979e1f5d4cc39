"""``node.usage``: the tokens and cost the providers reported, summed by session, provider and day.

The node reads ``--since`` (a span back from now or an ISO date; anything else ``bad-request``)
and asks the state store, which holds every figure (``roost.actors.state.ledger``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from roost.actors.runtime.caller import Caller
from roost.actors.runtime.peer import Handler
from roost.wire import fields as f
from roost.wire import protocol as p
from roost.wire.usage import parse_since


def handler(peer: Caller, clock: Callable[[], float] = time.time) -> Handler:
    """``{since?}`` -> ``{since, total, session: [...], provider: [...], day: [...]}``."""

    async def usage(h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        when = f.opt_str(body, "since", max_len=64)
        query = {} if when is None else {"since": parse_since(when, clock())}
        return await peer.call("state", "state.usage.sum", query)

    return usage
