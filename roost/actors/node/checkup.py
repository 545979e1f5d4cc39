"""``node.doctor``: the provider checks of ``roost doctor`` in the node's own environment.

The node asks each vendor adapter (``adapter.doctor``, answered by the adapter host) at once and
gathers the answers; a provider whose adapter does not answer is reported with its error.
"""

from __future__ import annotations

import asyncio
from typing import Any

from roost.actors.runtime.caller import Caller
from roost.actors.runtime.peer import Handler
from roost.providers import defined, vendors
from roost.wire import protocol as p
from roost.wire.errors import RoostError

DOCTOR_TIMEOUT_S = 55.0


async def _one(peer: Caller, provider: str) -> dict[str, Any]:
    try:
        return await peer.call(
            f"adapter/{provider}", "adapter.doctor", {}, timeout=DOCTOR_TIMEOUT_S
        )
    except RoostError as err:
        return {"provider": provider, "error": err.to_body(), "findings": []}


def handler(peer: Caller) -> Handler:
    """The request handler: ``{"providers": [report, ...]}`` in ``vendors()`` order, then the
    providers the configuration file defines."""

    async def doctor(h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        found = await asyncio.gather(*(_one(peer, prov) for prov in (*vendors(), *defined())))
        return {"providers": list(found)}

    return doctor
