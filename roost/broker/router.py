"""The broker: a ROUTER for requests and a PUB for events, routing by header only.

Every inbound message is ``[routing_id, header, body]``. The broker decodes the small header,
never the body (except ``hello`` and ``initialize``, which it serves itself), and forwards to the
registered peer named by the header's target. It answers ``unreachable`` rather than dropping a
request, and every malformed input gets an error reply where one can be sent.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
import zmq
import zmq.asyncio

from roost.broker import protocol as p
from roost.broker.admission import Gate, negotiate
from roost.broker.errors import RoostError
from roost.broker.keys import AllowedKeys
from roost.broker.links import Links
from roost.broker.policy import Policy, node_of
from roost.broker.registry import HEARTBEAT_S, PeerEntry, Registry, Seen

log = structlog.get_logger("roost.broker")


@dataclass
class NetworkEndpoint:
    """A TCP endpoint for clients; ``curve_secret`` empty only for a loopback address."""

    endpoint: str
    curve_secret: str = ""
    keys: AllowedKeys | None = None
    events_port: int | None = None  # the PUB's port on the same host; None: one of its choosing


@dataclass
class BrokerConfig:
    router_endpoints: list[str]
    pub_endpoints: list[str]
    token: str
    actor_token: str
    incarnation: str
    node_id: str = ""
    observer_token: str = ""  # a second token, for read-only clients (role observer)
    policy: Policy = field(default_factory=Policy)


class Broker:
    """Routes between clients and actors; holds no durable state."""

    def __init__(
        self,
        ctx: zmq.asyncio.Context,
        config: BrokerConfig,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.registry = Registry(clock)
        self._ctx = ctx
        # One ROUTER and one PUB per kind of endpoint: [0] local (ipc, inproc), [1] network.
        # A peer's key in the registry is its socket's index byte + its ZeroMQ routing id.
        self._routers: list[zmq.asyncio.Socket] = []
        self._pubs: list[zmq.asyncio.Socket] = []
        # zmq.asyncio sends hand errors to a Future; a synchronous shadow of the same socket
        # raises them at once, so a send to a peer that has gone is noticed (EHOSTUNREACH)
        self._router_now: list[zmq.Socket[Any]] = []
        self._pub_now: list[zmq.Socket[Any]] = []
        self._add_sockets({})
        self.events_endpoints = list(config.pub_endpoints)
        self.network: NetworkEndpoint | None = None
        self._key_now: str | None = None  # the CURVE public key of the message being handled
        self._warned = Seen()
        self.gate = Gate(config.token, config.actor_token, config.observer_token, config.policy)
        self.links = Links()  # a hub's node links: what they may send, which replies they owe
        self.stats = {"routed": 0, "errors": 0, "published": 0}

    def drop(self, *prefixes: str) -> None:
        """Forget actors known to be dead (their process exited) without waiting for beats."""
        for entry in self.registry.actors():
            if entry.address.startswith(prefixes):
                self.registry.remove(entry.address)
                log.info("peer-down", address=entry.address, reason="process exited")

    def _add_sockets(
        self, options: dict[int, Any]
    ) -> tuple[zmq.asyncio.Socket, zmq.asyncio.Socket]:
        router = self._ctx.socket(zmq.ROUTER)
        pub = self._ctx.socket(zmq.PUB)
        for sock in (router, pub):
            sock.setsockopt(zmq.LINGER, 0)
            for option, value in options.items():
                sock.setsockopt(option, value)
        router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        router.setsockopt(zmq.MAXMSGSIZE, p.HARD_FRAME_LIMIT)
        self._routers.append(router)
        self._pubs.append(pub)
        self._router_now.append(zmq.Socket.shadow(router.underlying))
        self._pub_now.append(zmq.Socket.shadow(pub.underlying))
        return router, pub

    def bind(self) -> None:
        for ep in self.config.router_endpoints:
            self._routers[0].bind(ep)
        for ep in self.config.pub_endpoints:
            self._pubs[0].bind(ep)

    def listen(self, network: NetworkEndpoint) -> None:
        """Serve clients on a TCP endpoint too; with CURVE unless it is loopback-only."""
        options: dict[int, Any] = {}
        if network.curve_secret:
            options = {
                zmq.CURVE_SERVER: 1,
                zmq.CURVE_SECRETKEY: network.curve_secret.encode(),
                zmq.ZAP_DOMAIN: b"roost",
            }
        router, pub = self._add_sockets(options)
        host = network.endpoint.rsplit(":", 1)[0]
        port = "*" if network.events_port is None else str(network.events_port)
        for sock, endpoint, field_ in (
            (router, network.endpoint, "listen"),
            (pub, f"{host}:{port}", "events-port"),
        ):
            try:
                sock.bind(endpoint)
            except zmq.ZMQError as err:
                raise RoostError(
                    "bad-request", f"cannot serve {endpoint}: {err.strerror}", {"field": field_}
                ) from None
        self.events_endpoints.append(str(pub.getsockopt_string(zmq.LAST_ENDPOINT)))
        self.network = network
        self.gate.keys = network.keys

    def close(self) -> None:
        for sock in (*self._routers, *self._pubs):
            sock.close(0)

    async def run(self) -> None:
        reaper = asyncio.create_task(self._reap_loop())
        poller = zmq.asyncio.Poller()
        for router in self._routers:
            poller.register(router, zmq.POLLIN)
        try:
            while True:
                for sock, _ in await poller.poll():
                    via = self._routers.index(sock)
                    frames = await sock.recv_multipart(copy=False)
                    self._on_frames([f.bytes for f in frames], via, frames[-1])
        finally:
            reaper.cancel()

    # -- inbound -------------------------------------------------------------------------------

    def _on_frames(self, frames: list[bytes], via: int = 0, last: Any = None) -> None:
        routing_id, rest = bytes([via]) + frames[0], frames[1:]
        self._key_now = None
        if via and self.network is not None and self.network.curve_secret and last is not None:
            self._key_now = str(last.get("User-Id"))  # the client's public key (ZAP)
        try:
            self._check_key(routing_id)
            if len(rest) != 2:
                raise RoostError("bad-request", "a message is exactly two frames: header, body")
            header = p.Header.decode(rest[0])
        except RoostError as err:
            self._refuse(routing_id, None, err)
            return
        try:
            self._dispatch(routing_id, header, rest[1])
        except RoostError as err:
            if header.kind == p.REQUEST and header.method == "initialize":
                self._drop_client(routing_id)
            self._refuse(routing_id, header, err)

    def _drop_client(self, routing_id: bytes) -> None:
        """A failed initialize (body, versions, token or key) ends the connection's registration:
        it keeps no role its last initialize did not prove."""
        known = self.registry.address_of(routing_id)
        if known and known.startswith("client/"):
            self.registry.remove(known)
            log.info("client-dropped", address=known, reason="initialize refused")

    def _dispatch(self, routing_id: bytes, header: p.Header, body: bytes) -> None:
        known = self.registry.address_of(routing_id)
        entry = self.registry.lookup(known) if known else None
        # actors may answer with more than a client may send (a long listing, a transcript)
        limit = p.HARD_FRAME_LIMIT if entry is not None and entry.actor else p.BODY_LIMIT
        if len(body) > limit:
            raise RoostError("frame-too-large", f"body is {len(body)} bytes; the limit is {limit}")
        if header.kind == p.HELLO:
            self._hello(routing_id, header, p.unpack(body))
            return
        if header.kind == p.REQUEST and header.method == "initialize":
            self._initialize(routing_id, header, p.unpack(body))
            return
        sender = self.registry.touch(routing_id)
        if header.kind == p.PING:
            self._send(
                routing_id,
                p.Header(kind=p.PONG, rid=header.rid, sender="broker"),
                {"registered": sender is not None, "incarnation": self.config.incarnation},
            )
            return
        if sender is None and header.kind in (p.RESPONSE, p.ERROR):
            ghost = self.registry.ghost(routing_id)
            if ghost is not None:  # a late answer from an actor that stalled: still deliver it
                header.sender = ghost
                if self.config.policy.hub and node_of(ghost):  # a node's link, gone quiet
                    self.links.check(ghost, header)
                self._route_reply(header, body)
                return
        if sender is None:
            raise RoostError("not-initialized", "call initialize (clients) or hello (actors) first")
        served = None if sender.actor else sender.meta.get("version")  # negotiated by initialize
        if header.version not in ((served,) if served else p.SUPPORTED_VERSIONS):
            raise RoostError(
                "unsupported-version",
                f"protocol version {header.version} is not the one this connection speaks",
                {"version": served} if served else {"supported": list(p.SUPPORTED_VERSIONS)},
            )
        header.sender = sender.address
        if sender.meta.get("link"):
            self.links.check(sender.address, header)
        if header.kind == p.PUBLISH and sender.actor:
            self._publish(header, body)
        elif header.kind in (p.REQUEST, p.NOTIFY):
            self._route_request(sender, header, body)
        elif header.kind in (p.RESPONSE, p.ERROR) and sender.actor:
            self._route_reply(header, body)
        else:
            raise RoostError("bad-request", f"a {header.kind!r} message is not accepted here")

    def _route_request(self, sender: PeerEntry, header: p.Header, body: bytes) -> None:
        policy = self.config.policy
        header.extra.pop("r", None)  # the role is the broker's to say, never the sender's
        if not sender.actor:
            if not policy.client_may_address(header.target):
                raise RoostError(
                    "forbidden", f"clients address the {policy.default_target}; actors are internal"
                )
            header.extra["r"] = sender.meta.get("role", p.OPERATOR)
        if sender.meta.get("role") == p.OBSERVER and header.method not in p.READ_METHODS:
            raise RoostError(
                "forbidden",
                f"an observer may not call {header.method!r}",
                {"method": header.method, "role": p.OBSERVER},
            )
        target = header.target or policy.default_target
        entry = self.registry.lookup(target)
        if entry is None:
            raise RoostError(
                "unreachable", f"no peer is registered as {target!r}", {"target": target}
            )
        sent = self._send(entry.routing_id, header, body, raw=True)
        if sent and entry.meta.get("link") and header.kind == p.REQUEST:
            self.links.sent(target, header)
        if sent is None:
            raise RoostError(
                "unavailable", f"{target!r} is overloaded; retry shortly", {"target": target}
            )
        if not sent:
            self.registry.remove(target)
            raise RoostError("unreachable", f"peer {target!r} has gone", {"target": target})
        self.stats["routed"] += 1

    def _route_reply(self, header: p.Header, body: bytes) -> None:
        entry = self.registry.lookup(header.target)
        if entry is None or not self._send(entry.routing_id, header, body, raw=True):
            log.info("reply-dropped", target=header.target, reason="requester gone")

    def _publish(self, header: p.Header, body: bytes) -> None:
        topic = header.extra.get("topic")
        if not isinstance(topic, str) or not topic:
            raise RoostError("bad-request", "a publish header needs a 'topic' string")
        event_header = p.Header(kind=p.EVENT, sender=header.sender, extra={"topic": topic})
        for pub in self._pub_now:
            try:
                pub.send_multipart([topic.encode(), event_header.encode(), body], flags=zmq.NOBLOCK)
            except zmq.Again:
                continue  # PUB may drop (the durable log may not); subscribers fill gaps from it
        self.stats["published"] += 1

    # -- served by the broker itself -----------------------------------------------------------

    def _hello(self, routing_id: bytes, header: p.Header, body: dict[str, Any]) -> None:
        address, incarnation = body.get("address"), body.get("incarnation")
        link = self.gate.hello(body.get("token"), self._key_now, address)
        if not isinstance(address, str) or not address or address.startswith("client/"):
            raise RoostError("bad-request", "field 'address' must name an actor address")
        if not isinstance(incarnation, str):
            raise RoostError("bad-request", "field 'incarnation' must be a string")
        self._check_holder(address, routing_id, incarnation)
        meta = dict(body.get("meta") or {}) if isinstance(body.get("meta"), dict) else {}
        meta["link"] = link  # the broker's to say, like a client's role
        entry = PeerEntry(address, routing_id, incarnation, self.registry.now(), meta)
        self.registry.register(entry)
        log.info("peer-up", address=address, incarnation=incarnation)
        self._send(
            routing_id,
            p.reply_header(header),
            {"incarnation": self.config.incarnation, "node_id": self.config.node_id},
        )
        self._notify_node(
            {"event": "peer.up", "address": address, "incarnation": incarnation, "meta": meta}
        )

    def _check_holder(self, address: str, routing_id: bytes, incarnation: str) -> None:
        """The first live holder of an address keeps it (Registry.live_holder): a hello from
        another process is refused, unless a send to the holder fails (its connection closed)."""
        holder = self.registry.live_holder(address, routing_id, incarnation)
        probe = p.Header(kind=p.PONG, sender="broker")  # harmless to a live peer
        alive = {"registered": True, "incarnation": self.config.incarnation}
        if holder is not None and self._send(holder.routing_id, probe, alive) is not False:
            raise self.config.policy.conflict(address)

    def _check_key(self, routing_id: bytes) -> None:
        """A CURVE connection whose key was revoked is refused from its next message on, and its
        registration dropped; a key given another role has it from its next message on."""
        if not self._key_now or self.gate.keys is None:
            return
        role = self.gate.key_role(self._key_now)
        address = self.registry.address_of(routing_id)
        entry = self.registry.lookup(address) if address else None
        if role is None:  # a client, or a node's link on a hub: forgotten at once
            if entry is not None:
                self.registry.remove(entry.address)
                if entry.actor:
                    self._notify_node(
                        {"event": "peer.down", "address": entry.address, "meta": entry.meta}
                    )
            raise RoostError("unauthorized", "this key is no longer allowed")
        if entry is not None and not entry.actor:
            entry.meta["role"] = role

    def _initialize(self, routing_id: bytes, header: p.Header, body: dict[str, Any]) -> None:
        version = negotiate(body.get("versions"))  # before the token: a mismatch says so
        role = self.gate.client_role(body.get("token"), self._key_now)
        known = self.registry.address_of(routing_id)
        conn_id = (
            known[len("client/") :]
            if known and known.startswith("client/")
            else (uuid.uuid4().hex[:16])
        )
        entry = PeerEntry(
            f"client/{conn_id}",
            routing_id,
            "",
            self.registry.now(),
            meta={"role": role, "version": version},
            actor=False,
        )
        self.registry.register(entry)
        header.sender = entry.address
        self._send(
            routing_id,
            p.reply_header(header),
            {
                "version": version,
                "node_id": self.config.node_id,
                "incarnation": self.config.incarnation,
                "connection_id": conn_id,
                "role": role,
                "target": self.config.policy.default_target,
                "events": self.events_endpoints[min(routing_id[0], len(self.events_endpoints) - 1)]
                if self.events_endpoints
                else "",
                "limits": {
                    "body": p.BODY_LIMIT,
                    "header": p.HEADER_LIMIT,
                    "frame": p.HARD_FRAME_LIMIT,
                },
            },
        )

    # -- outbound ------------------------------------------------------------------------------

    def _send(
        self, routing_id: bytes, header: p.Header, body: Any, *, raw: bool = False
    ) -> bool | None:
        """True when sent; False when the peer has gone (EHOSTUNREACH); None when it is full."""
        payload = body if raw else p.pack(body)
        try:
            self._router_now[routing_id[0]].send_multipart(
                [routing_id[1:], header.encode(), payload], flags=zmq.NOBLOCK
            )
        except zmq.Again:  # the peer is there but its queue is full: not a peer that has gone
            return None
        except (zmq.ZMQError, IndexError):
            return False
        return True

    def _refuse(self, routing_id: bytes, header: p.Header | None, err: RoostError) -> None:
        self.stats["errors"] += 1
        if self._warned.first(routing_id):
            log.warning("refused", peer=routing_id.hex(), code=err.code, reason=err.message)
        if header is not None and header.kind not in (p.REQUEST, p.HELLO, p.NOTIFY, p.PUBLISH):
            return
        # only a message that could not be read loses its id (a bad field keeps a readable id)
        rid = header.rid if header else err.rid if isinstance(err, p.HeaderError) else ""
        reply = p.Header(kind=p.ERROR, rid=rid, sender="broker")
        self._send(routing_id, reply, err.to_body())

    def _notify_node(self, body: dict[str, Any]) -> None:
        """Tell the actor that owns this broker (a node's ``node``, a hub's ``hub``) who came
        and went."""
        owner = self.config.policy.default_target
        entry = self.registry.lookup(owner)
        if entry is not None and body.get("address") != owner:
            header = p.Header(kind=p.NOTIFY, sender="broker", target=owner)
            self._send(entry.routing_id, header, body)

    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            for entry in self.registry.expired():
                self.registry.expire(entry.address)
                log.info("peer-down", address=entry.address, reason="missed heartbeats")
                self._notify_node(
                    {
                        "event": "peer.down",
                        "address": entry.address,
                        "incarnation": entry.incarnation,
                        "meta": entry.meta,
                    }
                )
