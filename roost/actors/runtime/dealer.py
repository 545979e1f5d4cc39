"""An actor's socket to its broker: a DEALER with its own routing id, and a monitor of it.

The routing id is the peer's own (16 bytes, the first 0x01, so never one libzmq makes up) and
stays across the socket's reconnects: the broker's ROUTER (ROUTER_HANDOVER) knows the peer again
at once, and a reply written while the connection was down still reaches its asker. The
monitor reports the events the peer acts on: the connection dropped, libzmq will connect again
(after a drop it does, unless the drop was a handshake the broker refused), and a new connection
completed its handshake (then the peer says hello again).

Making a connection is libzmq's, bounded here: a TCP connect not made within CONNECT_TIMEOUT_MS
(the SYN and its retransmissions, 1 s apart at first) and a ZMTP handshake (greeting, and CURVE
over the network: about four round trips) not done within HANDSHAKE_MS are given up, and libzmq
connects again after RECONNECT_IVL (0.1 s, doubling to 1 s).
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import zmq
from zmq.utils.monitor import parse_monitor_message

from roost.wire import protocol as p

WATCHED = zmq.EVENT_DISCONNECTED | zmq.EVENT_CONNECT_RETRIED | zmq.EVENT_HANDSHAKE_SUCCEEDED
CONNECT_TIMEOUT_MS = 10_000
HANDSHAKE_MS = 10_000
_monitors = itertools.count(1)


def connect(
    ctx: zmq.Context[Any], endpoint: str, sockopts: dict[int, Any]
) -> tuple[zmq.Socket[Any], zmq.Socket[Any]]:
    """The DEALER connected to ``endpoint``, and the PAIR its monitor events arrive on."""
    sock: zmq.Socket[Any] = zmq.Socket(ctx, zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, p.HARD_FRAME_LIMIT)
    sock.setsockopt(zmq.RECONNECT_IVL, 100)
    sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
    sock.setsockopt(zmq.CONNECT_TIMEOUT, CONNECT_TIMEOUT_MS)
    sock.setsockopt(zmq.HANDSHAKE_IVL, HANDSHAKE_MS)
    sock.setsockopt(zmq.ROUTING_ID, b"\x01" + os.urandom(15))
    for option, value in sockopts.items():
        sock.setsockopt(option, value)
    watch = f"inproc://roost-peer-monitor-{os.getpid()}-{next(_monitors)}"
    sock.monitor(watch, WATCHED)
    monitor: zmq.Socket[Any] = zmq.Socket(ctx, zmq.PAIR)
    monitor.setsockopt(zmq.LINGER, 0)
    monitor.connect(watch)
    sock.connect(endpoint)
    return sock, monitor


def event(frames: list[zmq.Frame]) -> int:
    """The event a monitor message reports (zmq.EVENT_*)."""
    return int(parse_monitor_message([f.bytes for f in frames])["event"])
