"""An in-process link between the broker and an actor that lives in the same process.

The node actor runs in the daemon beside its broker (and the hub's actor beside the hub's
broker). Over ``inproc://`` every message between them would still cost a send, a receive and
a pass of the event loop each way: most of a request the node answers from memory. A
``LocalLink`` stands in for the actor's DEALER and its connection to the ROUTER: the broker gets
``[routing_id, header, body]`` as from its ROUTER, the actor ``[header, body]`` as from its
DEALER, handed over at once, in order. It carries exactly the frames a socket would (the broker
still routes on the header frame, the actor's peer still decodes the body), and beside them the
header as the sender built it, so neither side decodes a header the other has just encoded.

A message is handed over synchronously, so a handler that answers at once sends its reply from
inside the broker's handling of the request; the broker keeps no state of a message across a
send for that reason. The link never fills (no high-water mark: the actor takes every message
it is given) and never disconnects; ``close`` detaches the actor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog

from roost.wire.protocol import Header

log = structlog.get_logger("roost.local")

LOCAL = 255  # the broker's "socket index" of its local links (routers are 0, 1)

# frames, and the header they carry as its sender built it (None: decode the frame)
Receiver = Callable[[list[Any], Header | None], None]


class LocalLink:
    """One actor's link; the actor's side looks like a ``LoopSocket`` (send, queued, close)."""

    queued = 0  # nothing ever waits

    def __init__(self, routing_id: bytes, to_broker: Receiver, name: str = "") -> None:
        self.routing_id = routing_id  # as the broker's registry knows it, after its index byte
        self.name = name
        self._to_broker = to_broker
        self._to_actor: Receiver | None = None

    # -- the actor's side ----------------------------------------------------------------------

    def attach(self, on_message: Receiver) -> LocalLink:
        self._to_actor = on_message
        return self

    def start(self) -> None:
        """Nothing to start: here for the socket's interface."""

    def close(self) -> None:
        self._to_actor = None

    def send(self, frames: Sequence[Any], header: Header | None = None) -> bool | None:
        """Actor -> broker: always taken. ``header`` is the one ``frames[0]`` encodes, if known."""
        _hand(self._to_broker, [self.routing_id, *frames], header, self.name)
        return True

    # -- the broker's side ---------------------------------------------------------------------

    def deliver(self, frames: Sequence[Any], header: Header | None = None) -> bool | None:
        """Broker -> actor, without the routing id; False when no actor is attached (gone).
        The actor may keep ``header``: the broker no longer uses it."""
        receiver = self._to_actor
        if receiver is None:
            return False
        _hand(receiver, list(frames), header, self.name)
        return True


def _hand(receiver: Receiver, frames: list[Any], header: Header | None, name: str) -> None:
    try:
        receiver(frames, header)
    except Exception:  # the edge of the message loop, as in LoopSocket: one message never stops it
        log.exception("message-handler-failed", address=name)


def data(frame: Any) -> bytes:
    """A frame's bytes, from a zmq.Frame (sockets) or bytes (local links)."""
    return frame if type(frame) is bytes else frame.bytes
