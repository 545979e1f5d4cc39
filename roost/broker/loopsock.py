"""A ZeroMQ socket served straight from the asyncio loop, without a Future per message.

``zmq.asyncio`` hands out a Future for every receive and send and polls through them; at the
broker's rates that machinery costs more than the routing itself. Here the loop watches the
socket's descriptor (``add_reader`` on ``zmq.FD``) and one callback drains every message there is
(until EAGAIN), handing each on as its list of frames.

libzmq's descriptor is edge-triggered: it signals that something changed, and any call on the
socket (a send too) may consume that signal. So a drain always reads until EAGAIN, and a send
made outside a drain schedules one more drain on the next pass of the loop, which finds what
that send may have let in without a signal.

Sends never block. On a socket made with ``queue=0`` (the broker's), ``send`` says whether the
message went (True), the peer has gone (False: EHOSTUNREACH from a ROUTER_MANDATORY socket) or
its pipe is full (None). With ``queue=N`` (an actor's), a message that meets a full pipe waits,
in order with those after it, up to N of them, and goes out as the pipe drains; past N, messages
are shed and ``shedding`` says so until the queue is half empty again. The pipe's "room again"
is a signal on the same descriptor, which the drain's receives may consume: so a drain that
leaves a queue behind asks the socket (``ZMQ_EVENTS``) whether it can send (or receive) now,
and goes on if it can.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Sequence
from typing import Any

import structlog
import zmq
import zmq.backend
from zmq.backend import zmq_poll

log = structlog.get_logger("roost.loopsock")

# Plain ints: pyzmq's flag enums cost a Python-level __or__ on every call.
NOBLOCK = int(zmq.NOBLOCK)
SNDMORE = int(zmq.SNDMORE)
MORE_NOBLOCK = NOBLOCK | SNDMORE
# pyzmq's Socket.send adds a Python layer (routing ids and groups of draft sockets) per frame
_send = zmq.backend.Socket.send
BATCH = 256  # messages per drain before the loop runs its other work
# A receive that meets EAGAIN raises, and pyzmq's exception costs ~9 us; a zero-timeout poll,
# ~2 us. So the first few receives of a drain are asked first; a long run ends on EAGAIN.
POLL_FIRST = 4
POLLIN = int(zmq.POLLIN)
POLLOUT = int(zmq.POLLOUT)

Frames = Sequence[bytes | zmq.Frame]
OnMessage = Callable[[list[zmq.Frame]], None]


def send_now(sock: zmq.Socket[Any], frames: Frames) -> bool | None:
    """Send one message without blocking: True sent, False the peer has gone (EHOSTUNREACH, or
    the socket is closed), None its pipe is full (EAGAIN)."""
    last = len(frames) - 1
    try:  # only the first frame can meet a full pipe or a peer that has gone
        _send(sock, frames[0], MORE_NOBLOCK if last else NOBLOCK)
    except zmq.Again:
        return None
    except zmq.ZMQError:
        return False
    for i in range(1, last + 1):
        _send(sock, frames[i], MORE_NOBLOCK if i < last else NOBLOCK)
    return True


class LoopSocket:
    """One plain zmq socket, read by a loop callback; see the module docstring."""

    def __init__(
        self, sock: zmq.Socket[Any], on_message: OnMessage, *, queue: int = 0, name: str = ""
    ) -> None:
        self.sock = sock
        self.name = name  # for the logs: whose socket it is
        self.shedding = False
        self._on_message = on_message
        self._limit = queue
        self._queue: collections.deque[Frames] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd = -1
        self._draining = False
        self._scheduled = False

    @property
    def queued(self) -> int:
        """Messages waiting for the pipe to drain."""
        return len(self._queue)

    def start(self) -> None:
        """Serve the socket from the running loop (and read what arrived before)."""
        self._loop = asyncio.get_running_loop()
        self._fd = int(self.sock.getsockopt(zmq.FD))
        self._loop.add_reader(self._fd, self._ready)
        self._schedule()

    def stop(self) -> None:
        """Stop serving (the socket stays open)."""
        if self._loop is not None and self._fd >= 0:
            self._loop.remove_reader(self._fd)
        self._loop = None

    def close(self) -> None:
        """Stop serving and close the socket (LINGER 0: what waits in it is dropped)."""
        self.stop()
        self._queue = collections.deque()
        self.sock.close(0)

    def _schedule(self) -> None:
        if not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._ready)

    def _ready(self) -> None:
        self._scheduled = False
        if self._loop is None:
            return
        self._draining = True
        try:
            if self._queue:
                self._flush()
            more = self._drain()
            if not more and self._queue and self._loop is not None:
                # the drain may have taken the signal that the pipe has room again: ask (which
                # takes any signal left too, so a message just in counts as well)
                more = bool(self._events() & (POLLIN | POLLOUT))
            if more and self._loop is not None:
                self._schedule()  # more may be waiting: let the loop run other work first
        finally:
            self._draining = False

    def _events(self) -> int:
        """What the socket can do now (``ZMQ_EVENTS``: ``POLLIN``, ``POLLOUT``)."""
        try:
            events = self.sock.getsockopt(zmq.EVENTS)
        except zmq.ZMQError:  # closed under us (shutdown)
            return 0
        return events if isinstance(events, int) else 0

    def _drain(self) -> bool:
        """Receive up to BATCH messages; True when the batch ran out before the socket did."""
        recv, asked = self.sock.recv, [(self.sock, POLLIN)]
        for n in range(BATCH):
            if n < POLL_FIRST and not zmq_poll(asked, 0):
                return False
            try:
                frame = recv(NOBLOCK, copy=False)
                frames = [frame]
                while frame.more:
                    frame = recv(NOBLOCK, copy=False)
                    frames.append(frame)
            except zmq.Again:
                return False
            except zmq.ZMQError:  # closed under us (shutdown)
                return False
            try:
                self._on_message(frames)
            except Exception:  # the edge of the message loop: one bad message never stalls it
                log.exception("message-handler-failed", address=self.name)
            if self._loop is None:  # closed by the handler
                return False
        return True

    # -- sending -------------------------------------------------------------------------------

    def send(self, frames: Frames) -> bool | None:
        """Send one message now: True sent, False the peer has gone, None its pipe is full (a
        queueing socket then keeps it and says True, or sheds it past its limit and says None)."""
        if self._queue:
            return self._enqueue(frames)
        sent = self._send_now(frames)
        if not self._draining:
            self._schedule()
        if sent is None and self._limit:
            return self._enqueue(frames)
        return sent

    def _send_now(self, frames: Frames) -> bool | None:
        return send_now(self.sock, frames)

    def _enqueue(self, frames: Frames) -> bool | None:
        if len(self._queue) >= self._limit:
            if not self.shedding:
                self.shedding = True
                log.warning("send-queue-full", address=self.name, queued=len(self._queue))
            return None
        self._queue.append(frames)
        return True

    def _flush(self) -> None:
        while self._queue:
            if self._send_now(self._queue[0]) is None:
                return  # still full: the descriptor signals when the pipe drains
            self._queue.popleft()
            if self.shedding and len(self._queue) < self._limit // 2:
                self.shedding = False
