"""How the broker learns that an actor has gone without a ping from each: from libzmq's events.

A process that dies closes its connections at once (the kernel does), and the ROUTER's monitor
reports each closed connection with its descriptor. Every ROUTER also sends ZMTP heartbeats (a
PING answered by the peer's libzmq, no Python on either side) and closes a connection that
answers none in time: on the network ROUTER (TCP: a hub's links, remote clients) a PING each
second, closed after 3 s of silence, and a TTL of 3 s in each PING, so a peer's libzmq drops
its end too when the broker goes silent (a hung host, a cut network: half-open TCP). On the
local ROUTER (ipc, where a dead process is seen at once) only a frozen process (SIGSTOP) is left
to find: a PING each 10 s, closed after 30 s. A short timeout there would gain little and cost
the replies a stopped actor writes as it resumes just when its connection is being closed;
with 30 s a stall of any shorter length loses nothing (its late replies come on the same
connection, or, once it was closed, on the reconnected one under the same routing id).

When a connection closed, the broker looks for the actors that said hello on its descriptor
(ZMQ_SRCFD of the hello) and asks the ROUTER, by sending each a harmless ``pong``, whether its
routing id is still there: EHOSTUNREACH means gone. An actor that reconnected at once under
its own routing id (the runtime's peers set one), or whose descriptor number another connection
has taken since, still answers and stays. So nothing wakes per actor per second.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import zmq
from zmq.utils.monitor import parse_monitor_message

from roost.broker.loopsock import LoopSocket
from roost.broker.registry import PeerEntry, Registry

NETWORK_HEARTBEATS: dict[int, int] = {
    zmq.HEARTBEAT_IVL: 1000,
    zmq.HEARTBEAT_TIMEOUT: 3000,
    zmq.HEARTBEAT_TTL: 3000,
}
LOCAL_HEARTBEATS: dict[int, int] = {zmq.HEARTBEAT_IVL: 10_000, zmq.HEARTBEAT_TIMEOUT: 30_000}
SETTLE_S = 0.05  # lets libzmq finish closing the pipe before the probe asks about it


def heartbeats(*, network: bool) -> dict[int, int]:
    """The ZMTP heartbeat options of a ROUTER (see the module docstring)."""
    return NETWORK_HEARTBEATS if network else LOCAL_HEARTBEATS


def watch(
    ctx: zmq.Context[Any], router: zmq.Socket[Any], name: str, on_dropped: Callable[[int], None]
) -> LoopSocket:
    """A monitor of ``router`` that calls ``on_dropped(descriptor)`` for each connection that
    closed (start it once the loop runs)."""
    router.monitor(name, zmq.EVENT_DISCONNECTED)
    monitor: zmq.Socket[Any] = zmq.Socket(ctx, zmq.PAIR)
    monitor.setsockopt(zmq.LINGER, 0)
    monitor.connect(name)

    def on_event(frames: list[zmq.Frame]) -> None:
        event = parse_monitor_message([f.bytes for f in frames])
        if event["event"] == zmq.EVENT_DISCONNECTED:
            on_dropped(int(event["value"]))

    return LoopSocket(monitor, on_event, name=name)


def source_fd(frame: zmq.Frame) -> int | None:
    """The descriptor a message arrived on; None where libzmq cannot say (then every drop asks)."""
    try:
        return int(frame.get(zmq.SRCFD))
    except (zmq.ZMQError, AttributeError, TypeError, ValueError):
        return None


def suspects(registry: Registry, via: int, fd: int) -> list[PeerEntry]:
    """The actors that may have been on the connection that closed: those that said hello on
    descriptor ``fd`` of socket ``via``, and those whose descriptor is not known."""
    return [
        e
        for e in registry.actors()
        if e.routing_id[:1] == bytes([via]) and (e.fd is None or e.fd == fd)
    ]


class Drops:
    """The closed connections not yet probed: each (socket, descriptor) once libzmq has settled,
    its suspects asked with ``there(entry)``, and those no longer there handed to ``gone``."""

    def __init__(
        self,
        registry: Registry,
        there: Callable[[PeerEntry], bool],
        gone: Callable[[PeerEntry], None],
    ) -> None:
        self._registry, self._there, self._gone = registry, there, gone
        self._closed: set[tuple[int, int]] = set()

    def closed(self, via: int, fd: int) -> None:
        """A connection of router ``via`` closed (its monitor said so)."""
        if not self._closed:
            asyncio.get_running_loop().call_later(SETTLE_S, self._probe)
        self._closed.add((via, fd))

    def _probe(self) -> None:
        closed, self._closed = self._closed, set()
        for via, fd in closed:
            for entry in suspects(self._registry, via, fd):
                if not self._there(entry):
                    self._gone(entry)
