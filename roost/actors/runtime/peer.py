"""The actor runtime: one broker peer with a mailbox loop, request/reply and heartbeats.

An actor registers an address with ``hello``, serves requests through named handlers (each in its
own task, so a handler may await other actors), calls other actors with deadlines, and publishes
events. When the broker goes away (a node restart) the peer notices missing pongs, reconnects with
a fresh socket and says hello again; ``on_registered`` callbacks then re-announce the actor.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

import structlog
import zmq
import zmq.asyncio

from roost.broker import protocol as p
from roost.broker.errors import RoostError
from roost.broker.registry import DEAD_AFTER_BEATS, HEARTBEAT_S, Seen

log = structlog.get_logger("roost.peer")

Handler = Callable[[p.Header, dict[str, Any]], Awaitable[dict[str, Any]]]
# What a peer serves: a handler may also answer with a body already encoded (p.Packed).
Serving = Callable[[p.Header, dict[str, Any]], Awaitable[dict[str, Any] | p.Packed]]
NotifyHandler = Callable[[p.Header, dict[str, Any]], Awaitable[None]]


MAX_QUEUED_SENDS = 20_000
RETRY_MAX_S = 30.0  # a refused hello is tried again after 1, 2, 4 ... up to this many seconds


def _settle(future: asyncio.Future[Any]) -> None:
    """Retrieve a finished send's outcome so no failure is left unobserved in a Future."""
    if not future.cancelled():
        future.exception()


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
        self._sock: zmq.asyncio.Socket | None = None
        self._warned = Seen()
        self._last_pong = 0.0
        self._closing = False
        self._queued = 0  # sends waiting in the socket for the pipe to drain
        self._shedding = False

    # -- lifecycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until cancelled; reconnects whenever the broker stops answering."""
        loop = asyncio.get_running_loop()
        try:
            while not self._closing:
                self._open()
                self._last_pong = loop.time()
                recv = asyncio.create_task(self._recv_loop())
                beat = asyncio.create_task(self._beat_loop())
                _done, _ = await asyncio.wait({recv, beat}, return_when=asyncio.FIRST_COMPLETED)
                for task in (recv, beat):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
                self.registered.clear()
                if self.refused is not None:  # back off, so a refusal is no loop every second
                    await asyncio.sleep(self.refused["retry_in_s"])
        finally:
            self._close_socket()
            for task in list(self._tasks):
                task.cancel()

    def close(self) -> None:
        self._closing = True

    @property
    def queued_sends(self) -> int:
        """Messages waiting in the socket for the broker to drain the pipe."""
        return self._queued

    def _open(self) -> None:
        self._close_socket()
        sock = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, p.HARD_FRAME_LIMIT)
        sock.setsockopt(zmq.RECONNECT_IVL, 100)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
        for option, value in self._sockopts.items():
            sock.setsockopt(option, value)
        sock.connect(self._endpoint)
        self._sock = sock
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
        if self._sock is not None:
            self._sock.close(0)
            self._sock = None

    async def _beat_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._beat)
            if loop.time() - self._last_pong > self._beat * DEAD_AFTER_BEATS:
                log.info("broker-silent", address=self.address)
                return
            self._send(p.Header(kind=p.PING), {})

    async def _recv_loop(self) -> None:
        assert self._sock is not None
        while True:
            frames = await self._sock.recv_multipart()
            if len(frames) != 2:
                continue
            try:
                header = p.Header.decode(frames[0])
            except RoostError as err:
                log.warning("undecodable-header", address=self.address, code=err.code)
                continue
            if header.kind == p.RESPONSE and header.rid in self._packed:
                # Relayed as it is (call_packed): the caller's own client decodes it.
                future = self._pending.pop(header.rid, None)
                if future is not None and not future.done():
                    future.set_result((header, p.Packed(frames[1])))
                continue
            try:
                body = p.unpack(frames[1], limit=p.HARD_FRAME_LIMIT)
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
                continue
            if self._on_message(header, body):
                return

    def _on_message(self, header: p.Header, body: dict[str, Any]) -> bool:
        """Handle one message; True asks for a reconnect."""
        loop = asyncio.get_running_loop()
        if header.kind == p.PONG:
            self._last_pong = loop.time()
            changed = body.get("incarnation") != self.broker_incarnation
            return not body.get("registered") or (changed and self.registered.is_set())
        if header.kind in (p.RESPONSE, p.ERROR) and header.rid == "hello":
            self._last_pong = loop.time()
            if header.kind == p.ERROR:
                self._refused(body)
                return True
            self.broker_incarnation = str(body.get("incarnation", ""))
            self.refused = None
            self.registered.set()
            for callback in self.on_registered:
                self._spawn(callback())
            return False
        if header.kind in (p.RESPONSE, p.ERROR):
            future = self._pending.pop(header.rid, None)
            if future is not None and not future.done():
                future.set_result((header, body))
        elif header.kind == p.REQUEST:
            self._spawn(self._serve(header, body))
        elif header.kind == p.NOTIFY and self.on_notify is not None:
            self._spawn(self.on_notify(header, body))
        return False

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
                self._send_packed(p.reply_header(header), reply)
            else:
                self._send(p.reply_header(header), reply)
        except RoostError as err:
            self._send(p.reply_header(header, error=True), err.to_body())
        except Exception:
            log.exception("handler-failed", address=self.address, method=header.method)
            failure = RoostError("internal", f"{header.method} failed inside {self.address}")
            self._send(p.reply_header(header, error=True), failure.to_body())

    def _send(self, header: p.Header, body: dict[str, Any]) -> None:
        self._send_packed(header, p.pack(body))

    def _send_packed(self, header: p.Header, payload: bytes) -> None:
        # Through the asyncio socket itself, never a synchronous shadow (that changes the socket's
        # edge-triggered state behind asyncio's back and stalls its receives). A blocking-mode
        # send goes out at once when it can; at the high-water mark pyzmq queues it, in order,
        # until the broker drains the pipe. So a reply is delayed under load, never dropped. The
        # queue is bounded: past MAX_QUEUED_SENDS the broker has stopped reading, and the peer
        # sheds and says so once (its heartbeats will notice the silence and reconnect).
        sock = self._sock
        if sock is None:
            return
        if self._queued >= MAX_QUEUED_SENDS:
            if not self._shedding:
                self._shedding = True
                log.warning("send-queue-full", address=self.address, queued=self._queued)
            return
        try:
            sent = sock.send_multipart([header.encode(), payload])
        except zmq.ZMQError:
            return
        future = cast("asyncio.Future[Any]", sent)  # zmq.asyncio hands back an asyncio Future
        if future.done():
            _settle(future)
            return
        self._queued += 1
        future.add_done_callback(self._sent)

    def _sent(self, future: asyncio.Future[Any]) -> None:
        self._queued -= 1
        if self._queued < MAX_QUEUED_SENDS // 2:
            self._shedding = False
        _settle(future)

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
            kind=p.REQUEST, rid=rid, method=method, target=target, session=session, op=op
        )
        self._send(header, body or {})
        try:
            reply_header, reply = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise RoostError(
                "unavailable" if restartable(target) else "timeout",
                f"{target} did not answer {method} in time",
                {"target": target, "method": method},
            ) from None
        finally:
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
        self._send(p.Header(kind=p.NOTIFY, target=target), body)

    def publish(self, topic: str, body: dict[str, Any]) -> None:
        self._send(p.Header(kind=p.PUBLISH, extra={"topic": topic}), body)

    def publish_packed(self, topic: str, payload: bytes) -> None:
        """Publish a body that is already msgpack (relaying another broker's events)."""
        self._send_packed(p.Header(kind=p.PUBLISH, extra={"topic": topic}), payload)
