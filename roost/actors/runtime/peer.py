"""The actor runtime: one broker peer with a mailbox loop, request/reply and liveness.

An actor registers an address with ``hello``, serves requests through named handlers (each
started at once, and given a task of its own only when it has to wait, so a handler may await
other actors), calls other actors with deadlines, and publishes events. The socket is read
straight from the loop (``roost.broker.loopsock``): no Future per message.

Liveness is libzmq's: the broker's ROUTER sends ZMTP heartbeats, so a broker that dies or stalls
drops the connection here within its heartbeat TTL, and the socket monitor says so. Then the
peer marks itself unregistered, libzmq reconnects the same socket (its routing id is its own, so
the broker knows it again and a late reply still finds its way), and on the new handshake the
peer says hello again; ``on_registered`` callbacks re-announce the actor. Python-level pings
(every second) are sent only while a hello waits for its answer, and to a broker that asks for
them (one that predates the ZMTP heartbeats, or a hub that re-checks a link's key at each
message): a peer that hears no pong for 3 beats, or hears ``registered: false`` or a new broker
incarnation, reconnects with a fresh socket and says hello again.

Those 3 beats count from the handshake: while the connection is being made (TCP connect, the
ZMTP greeting, the CURVE handshake: several round trips, each lost packet one more TCP
retransmission) the peer keeps its socket and leaves it to libzmq, which gives a connect up
after CONNECT_TIMEOUT and a handshake after HANDSHAKE_IVL (``runtime.dealer``) and tries again.
A fresh socket would only start the same connection over from the beginning; on a link slow
enough that it needs more than 3 s, every try would be cut short, and the peer never register.
Only when libzmq has given the socket up (a connection closed with no retry to follow: a
handshake the broker refused, such as a CURVE key it does not allow) does the peer start over
with a fresh one after those 3 beats.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
import zmq
import zmq.asyncio

from roost.actors.runtime import dealer, eager
from roost.broker.local import LocalLink, data
from roost.broker.loopsock import LoopSocket
from roost.broker.registry import DEAD_AFTER_BEATS, HEARTBEAT_S, Seen
from roost.wire import protocol as p
from roost.wire.errors import RoostError

log = structlog.get_logger("roost.peer")

Handler = Callable[[p.Header, dict[str, Any]], Awaitable[dict[str, Any]]]
# What a peer serves: a handler may also answer with a body already encoded (p.Packed).
Serving = Callable[[p.Header, dict[str, Any]], Awaitable[dict[str, Any] | p.Packed]]
NotifyHandler = Callable[[p.Header, dict[str, Any]], Awaitable[None]]


MAX_QUEUED_SENDS = 20_000
RETRY_MAX_S = 30.0  # a refused hello is tried again after 1, 2, 4 ... up to this many seconds


def restartable(address: str) -> bool:
    """Actors the node restarts on crash: their absence is a moment, not a missing target."""
    return address == "state" or address.startswith("adapter/")


class Peer:
    """A broker peer hosting one actor address."""

    def __init__(
        self,
        ctx: zmq.asyncio.Context,
        endpoint: str,
        address: str,
        token: str,
        *,
        incarnation: str,
        meta: dict[str, Any] | None = None,
        heartbeat: float = HEARTBEAT_S,
        sockopts: dict[int, Any] | None = None,
        link: LocalLink | None = None,
    ) -> None:
        self.address = address
        self.incarnation = incarnation
        self.meta = meta or {}
        self.handlers: dict[str, Serving] = {}
        self.fallback: Serving | None = None  # serves the methods no handler names
        self._sockopts = sockopts or {}  # e.g. CURVE keys for a link over the network
        self.on_notify: NotifyHandler | None = None
        self.on_registered: list[Callable[[], Awaitable[None]]] = []
        self.registered = asyncio.Event()
        self.broker_incarnation = ""
        # the broker's last refusal of our hello, until a hello is accepted: {code, message, at,
        # attempts, retry_in_s} (node.status shows a hub link's)
        self.refused: dict[str, Any] | None = None
        self._ctx, self._endpoint, self._token = ctx, endpoint, token
        self._beat = heartbeat
        self._ids = itertools.count(1)
        self._prefix = f"{address}:{os.getpid()}:"
        self._pending: dict[str, asyncio.Future[tuple[p.Header, Any]]] = {}
        self._targets: dict[str, str] = {}  # request id -> the address a pending call went to
        self._packed: set[str] = set()  # request ids whose reply body is wanted as it came
        self._tasks: set[asyncio.Task[Any]] = set()
        self._link = link  # a broker in this process: no socket at all (roost.broker.local)
        self._sock: LoopSocket | LocalLink | None = None
        self._monitor: LoopSocket | None = None
        self._warned = Seen()
        self._last_pong = 0.0
        self._closing = False
        self._reconnect = asyncio.Event()  # set: this socket is done, open a fresh one
        self._pinging = asyncio.Event()  # set while pings are due (see the module docstring)
        self._handshakes = 0  # on this socket; after the first, each one says hello again
        self._ready = False  # the connection completed its handshake (a local link always has)
        self._retrying = False  # libzmq is making a connection, or will try again

    # -- lifecycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until cancelled; reconnects whenever the broker stops answering."""
        loop = asyncio.get_running_loop()
        try:
            while not self._closing:
                self._reconnect = asyncio.Event()
                self._open()
                self._last_pong = loop.time()
                beat = asyncio.create_task(self._beat_loop())
                lost = asyncio.create_task(self._reconnect.wait())
                await asyncio.wait({beat, lost}, return_when=asyncio.FIRST_COMPLETED)
                for task in (beat, lost):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
                self._close_socket()
                self.registered.clear()
                if self.refused is not None:  # back off, so a refusal is no loop every second
                    await asyncio.sleep(self.refused["retry_in_s"])
        finally:  # cancelled, or crashed (a supervisor starts its link again: not registered)
            self._close_socket()
            self.registered.clear()
            for task in list(self._tasks):
                task.cancel()

    def close(self) -> None:
        self._closing = True

    @property
    def queued_sends(self) -> int:
        """Messages waiting in the socket for the broker to drain the pipe."""
        return self._sock.queued if self._sock is not None else 0

    def _open(self) -> None:
        self._close_socket()
        self._handshakes = 0
        self._ready = self._link is not None
        self._retrying = True
        self._pinging.set()
        if self._link is not None:
            self._sock = self._link.attach(self._on_frames)
        else:
            self._sock = self._connect()
            self._sock.start()
        self._hello()

    def _connect(self) -> LoopSocket:
        sock, monitor = dealer.connect(self._ctx, self._endpoint, self._sockopts)
        self._monitor = LoopSocket(monitor, self._on_event)
        self._monitor.start()
        return LoopSocket(sock, self._on_frames, queue=MAX_QUEUED_SENDS, name=self.address)

    def _hello(self) -> None:
        self._send(
            p.Header(kind=p.HELLO, rid="hello"),
            {
                "address": self.address,
                "incarnation": self.incarnation,
                "token": self._token,
                "meta": self.meta,
            },
        )

    def _close_socket(self) -> None:
        if isinstance(self._sock, LoopSocket):
            with contextlib.suppress(zmq.ZMQError):
                self._sock.sock.disable_monitor()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._monitor is not None:
            self._monitor.close()
            self._monitor = None

    async def _beat_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._pinging.is_set():  # registered, and libzmq keeps the link
                await self._pinging.wait()
                self._last_pong = loop.time()  # the silence counts from when pings are due
                continue
            await asyncio.sleep(self._beat)
            if not self._pinging.is_set():
                continue
            silent = loop.time() - self._last_pong > self._beat * DEAD_AFTER_BEATS
            if not self._ready:  # no connection made (yet)
                if silent:
                    log.info("broker-silent", address=self.address, handshake=False)
                    if not self._retrying:  # libzmq gave this socket up: start over
                        return
                    self._last_pong = loop.time()  # connecting: said again every 3 beats
                continue
            if silent:
                log.info("broker-silent", address=self.address)
                return
            self._send(p.Header(kind=p.PING), {})

    def _on_event(self, frames: list[zmq.Frame]) -> None:
        """The socket monitor: the connection dropped (ZMTP heartbeats, the broker's end closed,
        or its handshake failed), libzmq will connect again, or a new connection completed its
        handshake."""
        event = dealer.event(frames)
        if event == zmq.EVENT_DISCONNECTED:
            if self.registered.is_set():
                log.info("broker-disconnected", address=self.address)
            self._ready = self._retrying = False  # until libzmq says it tries again
            self.registered.clear()
            self._pinging.set()
        elif event == zmq.EVENT_CONNECT_RETRIED:
            self._retrying = True
        elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self._ready = True
            self._last_pong = asyncio.get_running_loop().time()  # the hello's 3 beats start now
            self._handshakes += 1
            if self._handshakes > 1:  # a reconnect: the broker may be a new one, or forgot us
                self._hello()

    def _on_frames(self, frames: list[Any], built: p.Header | None = None) -> None:
        """A message; ``built``: its header as a broker in this process made it (a local link)."""
        if len(frames) != 2 or self._reconnect.is_set():
            return
        try:
            header = built if built is not None else p.Header.decode(data(frames[0]))
        except RoostError as err:
            log.warning("undecodable-header", address=self.address, code=err.code)
            return
        if header.kind == p.RESPONSE and header.rid in self._packed:
            # Relayed as it is (call_packed): the caller's own client decodes it.
            future = self._pending.pop(header.rid, None)
            if future is not None and not future.done():
                future.set_result((header, p.Packed(data(frames[1]))))
            return
        try:
            raw = frames[1]
            body = p.unpack(raw if isinstance(raw, bytes) else raw.buffer, limit=p.HARD_FRAME_LIMIT)
        except RoostError as err:
            if self._warned.first(header.sender):  # once per peer, not once per message
                log.warning(
                    "undecodable-body",
                    address=self.address,
                    sender=header.sender,
                    code=err.code,
                )
            if header.kind == p.REQUEST:
                self._send(p.reply_header(header, error=True), err.to_body())
            return
        if self._on_message(header, body):
            self._reconnect.set()

    def _on_message(self, header: p.Header, body: dict[str, Any]) -> bool:
        """Handle one message; True asks for a reconnect."""
        kind = header.kind
        if kind == p.REQUEST:
            eager.start(self._serve(header, body), self._tasks)
        elif kind in (p.RESPONSE, p.ERROR):
            if header.rid == "hello":
                return self._on_hello(kind, body)
            future = self._pending.pop(header.rid, None)
            if future is None or future.done():
                return False
            future.set_result((header, body))
            if kind == p.ERROR and body.get("code") == "not-initialized":
                self._forgotten()
        elif kind == p.PONG:
            if not body.get("registered") and not self.registered.is_set():
                return False  # our hello is on its way; that is no answer (silence counts on)
            self._last_pong = asyncio.get_running_loop().time()
            changed = body.get("incarnation") != self.broker_incarnation
            return not body.get("registered") or (changed and self.registered.is_set())
        elif kind == p.NOTIFY and self.on_notify is not None:
            eager.start(self._notified(self.on_notify, header, body), self._tasks)
        return False

    def _forgotten(self) -> None:
        """The broker answered one of our calls as from a connection it does not know: say
        hello again on this socket (a pinging peer learns it from ``registered: false``)."""
        if self.registered.is_set():
            log.info("broker-forgot", address=self.address)
            self.registered.clear()
            self._pinging.set()
            self._hello()

    def _on_hello(self, kind: str, body: dict[str, Any]) -> bool:
        self._last_pong = asyncio.get_running_loop().time()
        if kind == p.ERROR:
            self._refused(body)
            return True
        self.broker_incarnation = str(body.get("incarnation", ""))
        self.refused = None
        if body.get("pings") is False:  # the broker keeps the link with ZMTP heartbeats
            self._pinging.clear()
        self.registered.set()
        for callback in self.on_registered:
            self._spawn(callback())
        return False

    @staticmethod
    async def _notified(handler: NotifyHandler, header: p.Header, body: dict[str, Any]) -> None:
        await handler(header, body)

    def _refused(self, body: dict[str, Any]) -> None:
        """Remember and log the broker's refusal of our hello; the next try waits longer."""
        attempts = (self.refused or {}).get("attempts", 0) + 1
        self.refused = {
            "code": str(body.get("code", "internal")),
            "message": str(body.get("message", "")),
            "at": time.time(),
            "attempts": attempts,
            "retry_in_s": min(RETRY_MAX_S, 2.0 ** (attempts - 1)),
        }
        log.error(
            "hello-refused",
            address=self.address,
            code=self.refused["code"],
            reason=self.refused["message"],
            attempts=attempts,
            retry_in_s=self.refused["retry_in_s"],
        )

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- serving -------------------------------------------------------------------------------

    async def _serve(self, header: p.Header, body: dict[str, Any]) -> None:
        handler = self.handlers.get(header.method) or self.fallback
        try:
            if handler is None:
                raise RoostError(
                    "unknown-method",
                    f"{self.address} does not serve {header.method!r}",
                    {"method": header.method},
                )
            reply = await handler(header, body)
            if isinstance(reply, p.Packed):
                self._send_packed(self._reply_header(header), reply)
            else:
                self._send(self._reply_header(header), reply)
        except RoostError as err:
            self._send(self._reply_header(header, error=True), err.to_body())
        except Exception:
            log.exception("handler-failed", address=self.address, method=header.method)
            failure = RoostError("internal", f"{header.method} failed inside {self.address}")
            self._send(self._reply_header(header, error=True), failure.to_body())

    def _reply_header(self, request: p.Header, *, error: bool = False) -> p.Header:
        reply = p.reply_header(request, error=error)
        reply.sender = self.address  # what the broker stamps: so it can pass the frame on as is
        return reply

    def _send(self, header: p.Header, body: dict[str, Any]) -> None:
        self._send_packed(header, p.pack(body))

    def _send_packed(self, header: p.Header, payload: bytes) -> None:
        # Never blocks: a message that meets the high-water mark waits in the socket's queue, in
        # order, until the broker drains the pipe. So a reply is delayed under load, never
        # dropped. The queue is bounded: past MAX_QUEUED_SENDS the broker has stopped reading,
        # and the peer sheds and says so once (its liveness checks will see to the rest).
        sock = self._sock
        if isinstance(sock, LocalLink):
            sock.send([header.encode(), payload], header)
        elif sock is not None:
            sock.send([header.encode(), payload])

    # -- calling -------------------------------------------------------------------------------

    async def call(
        self,
        target: str,
        method: str,
        body: dict[str, Any] | None = None,
        *,
        timeout: float = 10.0,
        session: dict[str, Any] | None = None,
        op: str = "",
    ) -> dict[str, Any]:
        """Send a request and await its reply; raise RoostError for an error reply or deadline."""
        reply = await self._call(target, method, body, timeout, session, op, packed=False)
        assert isinstance(reply, dict)
        return reply

    async def call_packed(
        self,
        target: str,
        method: str,
        body: dict[str, Any] | None = None,
        *,
        timeout: float = 10.0,
    ) -> p.Packed:
        """``call``, with the reply's body left encoded, for a handler that answers with it as
        it is (a large reply relayed without decoding and encoding it again). An error reply
        is decoded and raised as ``call`` raises it."""
        reply = await self._call(target, method, body, timeout, None, "", packed=True)
        assert isinstance(reply, p.Packed)
        return reply

    async def _call(
        self,
        target: str,
        method: str,
        body: dict[str, Any] | None,
        timeout: float,
        session: dict[str, Any] | None,
        op: str,
        *,
        packed: bool,
    ) -> dict[str, Any] | p.Packed:
        try:
            await asyncio.wait_for(self.registered.wait(), timeout)
        except TimeoutError:
            raise RoostError("unavailable", "the broker is not reachable") from None
        rid = self._prefix + str(next(self._ids))
        future: asyncio.Future[tuple[p.Header, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        self._targets[rid] = target
        if packed:
            self._packed.add(rid)
        header = p.Header(
            kind=p.REQUEST,
            rid=rid,
            method=method,
            target=target,
            sender=self.address,
            session=session,
            op=op,
        )
        self._send(header, body or {})
        # the deadline as a timer on the reply's future (wait_for would add a waiter and a
        # callback of its own to every call)
        deadline = asyncio.get_running_loop().call_later(timeout, _expire, future)
        try:
            reply_header, reply = await future
        except TimeoutError:
            raise RoostError(
                "unavailable" if restartable(target) else "timeout",
                f"{target} did not answer {method} in time",
                {"target": target, "method": method},
            ) from None
        finally:
            deadline.cancel()
            self._pending.pop(rid, None)
            self._targets.pop(rid, None)
            self._packed.discard(rid)
        if reply_header.kind == p.ERROR:
            err = RoostError.from_body(reply)
            if err.code == "unreachable" and restartable(target):
                raise RoostError(
                    "unavailable", f"{target} is restarting; retry shortly", {"target": target}
                )
            raise err
        result: dict[str, Any] | p.Packed = reply
        return result

    def abandon(self, *prefixes: str) -> None:
        """Answer now the pending calls to addresses whose process is known to have exited,
        instead of letting them wait for their deadline; they fail like an unreachable target."""
        for rid, target in list(self._targets.items()):
            future = self._pending.get(rid)
            if target.startswith(prefixes) and future is not None and not future.done():
                gone = RoostError("unreachable", f"{target} exited", {"target": target})
                future.set_result((p.Header(kind=p.ERROR, rid=rid), gone.to_body()))

    def notify(self, target: str, body: dict[str, Any]) -> None:
        self._send(p.Header(kind=p.NOTIFY, target=target, sender=self.address), body)

    def publish(self, topic: str, body: dict[str, Any]) -> None:
        self._send(p.Header(kind=p.PUBLISH, extra={"topic": topic}), body)

    def publish_packed(self, topic: str, payload: bytes) -> None:
        """Publish a body that is already msgpack (relaying another broker's events)."""
        self._send_packed(p.Header(kind=p.PUBLISH, extra={"topic": topic}), payload)


def _expire(future: asyncio.Future[Any]) -> None:
    """A call's deadline: its reply has not come."""
    if not future.done():
        future.set_exception(TimeoutError())
