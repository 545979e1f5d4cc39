"""Keeping a hub's node links honest.

A link (an actor registered with a node's CURVE key) answers the requests routed to it and
relays its own node's events, nothing more. It may not make requests, publish under another
node's topics, or answer a request it was never sent: the hub remembers which requests each link
owes an answer to, and a reply that answers none of them is refused, so a node cannot answer in
another node's name or reach a client that never asked it.
"""

from __future__ import annotations

from collections import OrderedDict

from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.policy import node_of

MAX_OWED = 65_536  # requests in flight to links; past it the oldest is forgotten (it times out)


class Links:
    def __init__(self, limit: int = MAX_OWED) -> None:
        self._limit = limit
        self._owed: OrderedDict[tuple[str, str], str] = OrderedDict()  # (link, rid) -> asker

    def sent(self, link: str, header: p.Header) -> None:
        """A request from ``header.sender`` was routed to ``link``: an answer is owed."""
        self._owed[(link, header.rid)] = header.sender
        while len(self._owed) > self._limit:
            self._owed.popitem(last=False)

    def check(self, link: str, header: p.Header) -> None:
        """Refuse what a link may not send; a reply is let through once, to whoever asked."""
        if header.kind in (p.REQUEST, p.NOTIFY):
            raise RoostError("forbidden", "a node's link answers requests; it does not make them")
        if header.kind in (p.RESPONSE, p.ERROR):
            asker = self._owed.pop((link, header.rid), None)
            if asker is None or asker != header.target:
                raise RoostError("forbidden", "a node's link answers only what it was asked")
            return
        topic = header.extra.get("topic")
        mine = f"{node_of(link)}/"
        if header.kind == p.PUBLISH and not (isinstance(topic, str) and topic.startswith(mine)):
            raise RoostError("forbidden", f"a node's link publishes only under {mine!r}")

    def __len__(self) -> int:
        return len(self._owed)
