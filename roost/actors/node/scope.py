"""What a scoped token may do on the node: its own records, and nothing node-wide.

The broker marks every request of a connection made with a scoped token (``roost token new
--scope own``) with the token's id in the header's ``o``; a request without it is any other
client's, served as it always was. For a scoped one, the table of methods says (``Method.scoped``):

* ``record``: the record the body's ``id`` names must be one of the token's (spawned under it, or
  forked from one that was), else ``forbidden``;
* ``own``: answered with the token's records only (``session.list``; ``events.since``, whose
  reply then also says ``scanned_to``, the last sequence number it looked at, for the next
  ``after``);
* ``open``: as for any operator; ``session.spawn`` records the token as the new record's owner
  and is ``forbidden`` once the token's ``max_live`` records are live; ``node.status`` is the
  observer's (no host paths, no process ids);
* anything else is ``forbidden``.

A token revoked while its connection is open is refused by the broker from the next request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgpack

from roost.actors.node.sessions import Sessions
from roost.actors.runtime.peer import Serving
from roost.actors.state import records as r
from roost.client.scoped import ScopedTokens
from roost.wire import fields as f
from roost.wire import protocol as p
from roost.wire.errors import RoostError

SCOPE = "o"  # the header key the broker sets from a scoped connection's token
PAGES = 50  # events.since: pages of other records' events skipped at most before answering


def of(h: p.Header) -> str | None:
    """The scoped token a request came with (its id), or None."""
    scope = h.extra.get(SCOPE)
    return scope if isinstance(scope, str) and scope else None


def forbidden(h: p.Header, why: str, **detail: Any) -> RoostError:
    return RoostError(
        "forbidden",
        f"a scoped token {why}",
        {"method": h.method, "scope": of(h), **detail},
    )


class Scope:
    def __init__(self, sessions: Sessions, tokens: ScopedTokens) -> None:
        self.sessions, self.tokens = sessions, tokens

    def guarded(self, handlers: Mapping[str, Serving]) -> dict[str, Serving]:
        """Each handler, served to a scoped request only as its method's ``scoped`` says."""
        return {name: self._guard(name, handler) for name, handler in handlers.items()}

    def _guard(self, name: str, handler: Serving) -> Serving:
        method = p.METHODS[name]
        if not method.client:
            return handler  # the supervisors' reports: no client's, so never scoped

        async def guarded(h: p.Header, body: dict[str, Any]) -> Any:
            scope = of(h)
            if scope is None:
                return await handler(h, body)
            if method.scoped == "record":
                await self.own(h, f.req_str(body, "id"))
                return await handler(h, body)
            if method.scoped == "own":
                return await self._own_only(h, body, handler)
            if method.scoped == "open":
                if name == "session.spawn":
                    await self._room(h, scope)
                reply = await handler(h, body)
                if name == "node.status":
                    status = _map(reply)
                    reply = {k: v for k, v in status.items() if k not in ("state_dir", "pid")}
                    reply["actors"] = {}
                return reply
            raise forbidden(h, f"may not call {name} (only its own sessions')")

        return guarded

    async def own(self, h: p.Header, ref: str) -> None:
        record = await self.sessions.find(ref)
        if record.owner != of(h):
            raise forbidden(
                h, f"may use only the sessions it spawned: not {record.id}", record=record.id
            )

    async def _room(self, h: p.Header, scope: str) -> None:
        token = self.tokens.get(scope)
        if token is None:
            raise RoostError("unauthorized", "the scoped token was revoked")
        if token.max_live is None:
            return
        listing = await self.sessions.peer.call("state", "state.record.list", {})
        live = [
            rec
            for rec in listing["records"]
            if rec.get("owner") == scope and rec["state"] in r.ACTIVE_STATES
        ]
        if len(live) >= token.max_live:
            raise forbidden(
                h,
                f"may have {token.max_live} live sessions at once: stop one first",
                max_live=token.max_live,
                live=[rec["id"] for rec in live],
            )

    async def _own_only(self, h: p.Header, body: dict[str, Any], handler: Serving) -> Any:
        scope = of(h)
        if h.method == "session.list":
            listing = _map(await handler(h, body))
            listing["records"] = [rec for rec in listing["records"] if rec.get("owner") == scope]
            return listing
        if f.opt_str(body, "id"):  # one record's events: that record must be its own
            await self.own(h, str(body["id"]))
            return await handler(h, body)
        owned = {
            rec["id"]
            for rec in (await self.sessions.peer.call("state", "state.record.list", {}))["records"]
            if rec.get("owner") == scope
        }
        query = dict(body)
        for _ in range(PAGES):  # pages of other records' events are skipped, up to PAGES
            page = _map(await handler(h, query))
            events = [e for e in page["events"] if e.get("record") in owned]
            scanned = max((int(e["seq"]) for e in page["events"]), default=None)
            page["scanned_to"] = scanned if scanned is not None else int(query.get("after") or 0)
            page["events"] = events
            if events or not page.get("more") or scanned is None:
                return page
            query["after"] = scanned
        return page


def _map(reply: dict[str, Any] | p.Packed) -> dict[str, Any]:
    """A reply as a map, whether the handler built it or relayed stored bytes."""
    if isinstance(reply, p.Packed):
        unpacked: dict[str, Any] = msgpack.unpackb(reply, raw=False)
        return unpacked
    return reply
