"""The client library: what the CLI and the tests use to talk to a node over the wire.

Synchronous on purpose (a CLI command is one conversation). It finds the node from its state
directory, calls ``initialize`` with the token, then sends requests to the node and waits for the
reply with a deadline. ``subscribe`` opens a SUB socket on the event endpoint.
"""

from __future__ import annotations

import gc
import itertools
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import zmq

from roost.client.locate import live_node_info, read_token
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.policy import node_of

WAIT_TICK_S = 0.25


@dataclass(frozen=True)
class Curve:
    """A CURVE client identity: the node's public key and this client's key pair (z85)."""

    server_key: str
    public: str
    secret: str

    def apply(self, sock: zmq.Socket[Any]) -> None:
        sock.setsockopt(zmq.CURVE_SERVERKEY, self.server_key.encode())
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.public.encode())
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.secret.encode())


class Client:
    """One connection (DEALER) to a node's ROUTER."""

    def __init__(
        self,
        router: str,
        token: str,
        *,
        events: str = "",
        timeout: float = 15.0,
        ctx: zmq.Context[Any] | None = None,
        curve: Curve | None = None,
    ) -> None:
        self.router, self.events_endpoint = router, events
        self.timeout = timeout
        self.info: dict[str, Any] = {}
        # Whom requests go to, and the prefix of its topics: the node, or through a hub a node
        # ("<node-id>/node", topics under "<node-id>/") or the hub itself ("hub").
        self.target = "node"
        self.topic_prefix = ""
        self._via = ""
        self._token = token
        self._ctx = ctx or zmq.Context.instance()
        self._sock: zmq.Socket[Any] = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self.curve = curve
        if curve is not None:
            curve.apply(self._sock)
        self._sock.connect(router)
        self._ids = itertools.count(1)
        self._prefix = os.urandom(4).hex() + ":"  # not uuid: its import costs each CLI start

    @classmethod
    def for_state_dir(cls, state_dir: Path, *, timeout: float = 15.0) -> Client:
        info = live_node_info(state_dir)
        client = cls(info.router, read_token(state_dir), events=info.events, timeout=timeout)
        client.initialize()
        return client

    def initialize(self, timeout: float | None = None) -> dict[str, Any]:
        self.info = self.call(
            "initialize",
            {
                "versions": list(p.SUPPORTED_VERSIONS),
                "token": self._token,
                "client": "roost-py",
            },
            target="broker",
            timeout=timeout,
        )
        self.target = self._via or str(self.info.get("target") or "node")
        events = self.info.get("events") or self.events_endpoint
        host = self.router.rsplit(":", 1)[0]
        if events.startswith(("tcp://0.0.0.0:", "tcp://*:")):  # bound to all: reach it our way
            events = f"{host}:{events.rsplit(':', 1)[1]}"
        self.events_endpoint = events
        return self.info

    def close(self) -> None:
        self._sock.close(0)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, frames: list[bytes]) -> None:
        """Send frames as they are (tests of malformed input use this)."""
        self._sock.send_multipart(frames)

    def recv_raw(self, timeout: float) -> list[bytes] | None:
        if self._sock.poll(int(timeout * 1000)):
            return self._sock.recv_multipart()
        return None

    def call(
        self,
        method: str,
        body: dict[str, Any] | None = None,
        *,
        target: str = "",
        timeout: float | None = None,
        session: dict[str, Any] | None = None,
        grant: str = "",
        op: str = "",
        on_wait: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """One request; returns the reply body or raises RoostError with the error's code.
        ``on_wait`` is called about every ``WAIT_TICK_S`` while no answer has come (progress)."""
        rid = self._send(method, body, target, session=session, grant=grant, op=op)
        return _decoded(*self._receive(rid, method, timeout, on_wait))

    def event_pages(
        self, query: dict[str, Any], *, target: str = "", timeout: float | None = None
    ) -> Iterator[dict[str, Any]]:
        """The log after ``query["after"]`` (``limit``, ``id`` as ``events.since`` takes them),
        one ``events.since`` reply at a time, until one says there is no ``more``. Pipelined: the
        request for the next page goes out before this one is decoded (its cursor, the page's
        last seq, is read with the other events skipped in C), so the node builds the next page
        while the caller decodes and handles this one. An error reply is raised where its page
        would be; stopping early leaves one reply in flight, which the next call discards."""
        after, limit = int(query.get("after") or 0), int(query.get("limit") or 1000)
        rid = self._send("events.since", {**query, "after": after}, target)
        while rid:
            header, body = self._receive(rid, "events.since", timeout, None)
            rid = ""
            if header.kind == p.RESPONSE and len(body) <= p.HARD_FRAME_LIMIT:
                count, last, more = page_end(body) or (0, 0, False)
                # on while the log says more, and only forward (never the same page again)
                if count and last > after and (more if more is not None else count >= limit):
                    after = last
                    rid = self._send("events.since", {**query, "after": after}, target)
            yield _decoded(header, body)

    def _send(
        self,
        method: str,
        body: dict[str, Any] | None,
        target: str,
        *,
        session: dict[str, Any] | None = None,
        grant: str = "",
        op: str = "",
    ) -> str:
        """Send one request; returns its request id."""
        rid = self._prefix + str(next(self._ids))
        header = p.Header(
            kind=p.REQUEST,
            rid=rid,
            method=method,
            target=target or self.target,
            session=session,
            grant=grant,
            op=op,
        )
        self._sock.send_multipart([header.encode(), p.pack(body or {})])
        return rid

    def _receive(
        self,
        rid: str,
        method: str,
        timeout: float | None,
        on_wait: Callable[[], None] | None,
    ) -> tuple[p.Header, bytes]:
        """The reply to request ``rid``, not decoded yet; any other reply is a late answer to
        an earlier request that timed out (or a page no one read on), dropped."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RoostError("timeout", f"no answer to {method} in time")
            if not self._sock.poll(
                int(min(remaining, WAIT_TICK_S if on_wait else remaining) * 1000)
            ):
                if on_wait is None:
                    raise RoostError("timeout", f"no answer to {method} in time")
                on_wait()
                continue
            frames = self._sock.recv_multipart()
            if len(frames) != 2:
                continue
            reply = p.Header.decode(frames[0])
            if reply.rid in (rid, ""):
                return reply, frames[1]

    def via(self, target: str) -> None:
        """Address ``target`` from now on: a node through a hub (``<node-id>/node``), whose
        topics the hub publishes under ``<node-id>/``, or the hub itself."""
        self.target = self._via = target
        node_id = node_of(target)
        self.topic_prefix = f"{node_id}/" if node_id else ""

    def subscribe(self, *prefixes: str) -> EventStream:
        return EventStream(
            self._ctx, self.events_endpoint, prefixes or ("",), self.curve, self.topic_prefix
        )


GC_PAUSE_BYTES = 64 * 1024  # a reply this large is decoded with the cyclic GC paused


def _decoded(header: p.Header, body: bytes) -> dict[str, Any]:
    """A reply's body, or its error raised. A reply from the node (or hub) it asked: the size
    and type limits hold, the per-value shape walk is left out (a page of 5,000 events is
    10,000 maps). A large one is decoded with the cyclic GC paused: each map it builds counts
    towards a collection, which would walk the young maps a dozen times a page for nothing
    (msgpack's own advice; 7-8 % of decoding a page of events, bench figure 5)."""
    if len(body) < GC_PAUSE_BYTES or not gc.isenabled():
        doc = p.unpack(body, limit=p.HARD_FRAME_LIMIT, shape=False)
    else:
        gc.disable()
        try:
            doc = p.unpack(body, limit=p.HARD_FRAME_LIMIT, shape=False)
        finally:
            gc.enable()
    if header.kind == p.ERROR:
        raise RoostError.from_body(doc)
    return doc


def page_end(body: bytes) -> tuple[int, int, bool | None] | None:
    """``(events, last seq, more)`` of an ``events.since`` reply (``more`` None when it has
    none: an older node), its events but the last skipped, not decoded; None when the body is
    not such a reply (decoding it then says why)."""
    unpacker = msgpack.Unpacker(max_buffer_size=len(body) or 1, raw=False)
    unpacker.feed(body)
    count, last, more = 0, 0, None
    try:
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()
            if key == "events":
                count = unpacker.read_array_header()
                for _ in range(count - 1):
                    unpacker.skip()
                last = unpacker.unpack()["seq"] if count else 0
            elif key == "more":
                more = unpacker.unpack()
            else:
                unpacker.skip()
    except (ValueError, TypeError, KeyError, msgpack.UnpackException):
        return None
    if type(last) is not int or (more is not None and type(more) is not bool):
        return None
    return count, last, more


# Messages a subscriber holds in its own memory while it falls behind (ZeroMQ's default is
# 1,000): a burst of output (an agent flooding its terminal) that the reader prints more slowly
# than the node publishes is kept rather than dropped; past this, what is lost is a hole in the
# offsets, which attach fills from the transcript (or by drawing the screen again).
SUB_HWM = 10_000


class EventStream:
    """A SUB socket on the node's PUB endpoint; subscribe first, then fill gaps (events.since)."""

    def __init__(
        self,
        ctx: zmq.Context[Any],
        endpoint: str,
        prefixes: tuple[str, ...],
        curve: Curve | None = None,
        topic_prefix: str = "",
    ) -> None:
        self._sock: zmq.Socket[Any] = ctx.socket(zmq.SUB)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.RCVHWM, SUB_HWM)
        if curve is not None:
            curve.apply(self._sock)
        self._strip = topic_prefix  # a hub's <node-id>/: topics read as the node names them
        for prefix in prefixes:
            self._sock.setsockopt(zmq.SUBSCRIBE, (topic_prefix + prefix).encode())
        self._sock.connect(endpoint)

    @property
    def socket(self) -> zmq.Socket[Any]:
        """The SUB socket, to wait on together with other sockets or descriptors (zmq.Poller)."""
        return self._sock

    def recv(self, timeout: float) -> tuple[str, dict[str, Any]] | None:
        if not self._sock.poll(int(timeout * 1000)):
            return None
        frames = self._sock.recv_multipart()
        if len(frames) != 3:
            return None
        topic = frames[0].decode(errors="replace").removeprefix(self._strip)
        return topic, p.unpack(frames[2], limit=p.HARD_FRAME_LIMIT)

    def close(self) -> None:
        self._sock.close(0)
