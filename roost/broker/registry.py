"""The broker's peer registry: address -> routing id, incarnation, last message, descriptor.

Pure bookkeeping with an injected clock, so its rules are unit-tested without sockets. Whether an
actor is alive is libzmq's to say (``roost.broker.liveness``); the registry remembers what the
broker learns.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HEARTBEAT_S = 1.0  # a peer's ping interval, where pings are still sent (runtime.peer)
DEAD_AFTER_BEATS = 3
MAX_CLIENTS = 4096
GHOST_S = 60.0  # how long the replies of an actor whose connection dropped are still routed


class Seen:
    """A bounded set of recent peers, for logging something once per peer: past ``limit`` the
    longest-unseen are forgotten, so a stream of new connections cannot grow it without end."""

    def __init__(self, limit: int = MAX_CLIENTS) -> None:
        self._limit = limit
        self._keys: OrderedDict[Any, None] = OrderedDict()

    def first(self, key: Any) -> bool:
        """True the first time ``key`` is seen (or once it has been forgotten)."""
        if key in self._keys:
            self._keys.move_to_end(key)
            return False
        self._keys[key] = None
        while len(self._keys) > self._limit:
            self._keys.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._keys)


@dataclass
class PeerEntry:
    address: str
    routing_id: bytes
    incarnation: str
    last_seen: float
    meta: dict[str, Any] = field(default_factory=dict)
    actor: bool = True
    fd: int | None = None  # the descriptor its hello came on (None: not known)


class Registry:
    """Actors (registered by hello) and clients (registered by initialize) by address."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._by_address: dict[str, PeerEntry] = {}
        self._by_routing: dict[bytes, str] = {}
        self._clients: OrderedDict[str, PeerEntry] = OrderedDict()
        self._ghosts: dict[bytes, tuple[str, float]] = {}  # routing id -> (address, expired at)

    def now(self) -> float:
        return self._clock()

    def register(self, entry: PeerEntry) -> PeerEntry | None:
        """Add or replace ``entry``; returns the entry it displaced, if another peer held it."""
        table = self._by_address if entry.actor else self._clients
        old = table.get(entry.address)
        if old is not None:
            self._by_routing.pop(old.routing_id, None)
        former = self._by_routing.get(entry.routing_id)
        if former is not None and former != entry.address:
            self.remove(former)
        table[entry.address] = entry
        self._by_routing[entry.routing_id] = entry.address
        if not entry.actor:
            self._clients.move_to_end(entry.address)
            while len(self._clients) > MAX_CLIENTS:
                _, evicted = self._clients.popitem(last=False)
                self._by_routing.pop(evicted.routing_id, None)
        displaced = old if old is not None and old.routing_id != entry.routing_id else None
        return displaced

    def live_holder(self, address: str, routing_id: bytes, incarnation: str) -> PeerEntry | None:
        """The actor a hello for ``address`` would displace, when that is another process.

        The rule (PROTOCOL.md, ``hello``): the holder is displaced when it is the same peer
        (the same routing id, or the same incarnation on a new connection, as after a reconnect)
        or when it is gone. A holder whose connection libzmq dropped (heartbeats) is removed
        from the registry; otherwise it is returned here, and the broker still asks whether its
        connection is open before it refuses the hello ``node-id-conflict``."""
        holder = self._by_address.get(address)
        if holder is None or holder.routing_id == routing_id:
            return None
        if holder.incarnation == incarnation:
            return None
        return holder

    def remove(self, address: str) -> PeerEntry | None:
        entry = self._by_address.pop(address, None) or self._clients.pop(address, None)
        if entry is not None:
            self._by_routing.pop(entry.routing_id, None)
        return entry

    def lookup(self, address: str) -> PeerEntry | None:
        return self._by_address.get(address) or self._clients.get(address)

    def address_of(self, routing_id: bytes) -> str | None:
        return self._by_routing.get(routing_id)

    def touch(self, routing_id: bytes) -> PeerEntry | None:
        address = self._by_routing.get(routing_id)
        if address is None:
            return None
        entry = self.lookup(address)
        if entry is not None:
            entry.last_seen = self._clock()
            if not entry.actor:  # the least recently active client is the one evicted
                self._clients.move_to_end(address)
        return entry

    def expire(self, address: str) -> PeerEntry | None:
        """Remove an actor whose connection dropped, remembering it briefly: a stalled actor (a
        stopped process, a long pause) may still answer what it was asked before it stalled,
        from the same routing id once its socket has reconnected."""
        entry = self.remove(address)
        if entry is not None:
            now = self._clock()
            self._ghosts = {k: v for k, v in self._ghosts.items() if now - v[1] < GHOST_S}
            self._ghosts[entry.routing_id] = (address, now)
        return entry

    def ghost(self, routing_id: bytes) -> str | None:
        """The address an expired actor had, while its replies may still be routed."""
        found = self._ghosts.get(routing_id)
        if found is None or self._clock() - found[1] >= GHOST_S:
            return None
        return found[0]

    def actors(self) -> list[PeerEntry]:
        return list(self._by_address.values())
