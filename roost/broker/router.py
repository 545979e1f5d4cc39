"""The broker: a ROUTER for requests and an XPUB for events, routing by header only.

Every inbound message is ``[routing_id, header, body]``. The broker decodes the small header,
never the body (except ``hello`` and ``initialize``, which it serves itself), and forwards to the
registered peer named by the header's target; the body frame goes on as it came, and so does the
header when it already says what the broker would stamp. It answers ``unreachable`` rather than
dropping a request, and every malformed input gets an error reply where one can be sent. The
sockets are read straight from the loop (``loopsock``); who has gone, libzmq's heartbeats and
monitor say (``liveness``). The XPUB sockets also say what is subscribed, which tells each
supervisor whether anyone watches its output (``watch``).
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
import zmq
import zmq.asyncio

from roost.broker import liveness
from roost.broker.admission import Gate, negotiate
from roost.broker.links import Links
from roost.broker.local import LOCAL, LocalLink, data
from roost.broker.loopsock import LoopSocket
from roost.broker.registry import PeerEntry, Registry, Seen
from roost.broker.watch import OUTPUT, Subscriptions, output_topic
from roost.client.keys import AllowedKeys
from roost.client.scoped import ScopedTokens
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.policy import Policy, node_of

log = structlog.get_logger("roost.broker")

Body = bytes | zmq.Frame  # a body frame goes on as it came
_INDEX = [bytes([i]) for i in range(256)]  # a socket's index byte, before a routing id


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
    scoped: ScopedTokens | None = None  # a node's scoped tokens (roost token new --scope own)
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
        self._routers: list[LoopSocket] = []
        self._monitors: list[LoopSocket] = []
        self._pubs: list[LoopSocket] = []
        self.subscriptions = Subscriptions()
        self._told: dict[str, object] = {}  # what each supervisor or node link was told last
        self._drops = liveness.Drops(self.registry, self._still_there, self._expire)
        self._add_sockets({})
        self.events_endpoints = list(config.pub_endpoints)
        self.network: NetworkEndpoint | None = None
        self._key_now: str | None = None  # the CURVE public key of the message being handled
        self._frame_now: zmq.Frame | None = None  # the header frame of the message being handled
        self._locals: dict[bytes, LocalLink] = {}  # actors in this process (roost.broker.local)
        self._warned = Seen()
        self.gate = Gate(
            config.token,
            config.actor_token,
            config.observer_token,
            config.policy,
            scoped=config.scoped,
        )
        self.links = Links()  # a hub's node links: what they may send, which replies they owe
        self._pongs = {  # the two answers to a ping, packed once
            known: p.pack({"registered": known, "incarnation": config.incarnation})
            for known in (True, False)
        }
        self.stats = {"routed": 0, "errors": 0, "published": 0, "output": 0, "tapped": 0}
        self._taps: list[tuple[str, str, Callable[[str], None]]] = []

    def tap(self, sender: str, suffix: str, seen: Callable[[str], None]) -> None:
        """Call ``seen(topic)`` for every event ``sender`` publishes on a topic ending with
        ``suffix``, as it goes out (in this process: what a node's own actor waits on, such as a
        turn's end, without a subscription or a poll). The body is not decoded."""
        self._taps.append((sender, suffix, seen))

    def drop(self, *prefixes: str) -> None:
        """Forget actors known to be dead (their process exited) without waiting for beats."""
        for entry in self.registry.actors():
            if entry.address.startswith(prefixes):
                self.registry.remove(entry.address)
                self._told.pop(entry.address, None)
                log.info("peer-down", address=entry.address, reason="process exited")

    def _add_sockets(self, options: dict[int, Any]) -> tuple[zmq.Socket[Any], zmq.Socket[Any]]:
        via = len(self._routers)
        router: zmq.Socket[Any] = zmq.Socket(self._ctx, zmq.ROUTER)
        pub: zmq.Socket[Any] = zmq.Socket(self._ctx, zmq.XPUB)
        for sock in (router, pub):
            sock.setsockopt(zmq.LINGER, 0)
            for option, value in options.items():
                sock.setsockopt(option, value)
        router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        router.setsockopt(zmq.ROUTER_HANDOVER, 1)  # a peer reconnecting under its routing id
        router.setsockopt(zmq.MAXMSGSIZE, p.HARD_FRAME_LIMIT)
        for option, value in liveness.heartbeats(network=via > 0).items():
            router.setsockopt(option, value)
        name = f"inproc://roost-broker-monitor-{id(self):x}-{via}"
        dropped = functools.partial(self._drops.closed, via)
        self._monitors.append(liveness.watch(self._ctx, router, name, dropped))
        self._routers.append(LoopSocket(router, functools.partial(self._on_frames, via)))
        self._pubs.append(LoopSocket(pub, functools.partial(self._on_subscription, via)))
        return router, pub

    def bind(self) -> None:
        for ep in self.config.router_endpoints:
            self._routers[0].sock.bind(ep)
        for ep in self.config.pub_endpoints:
            self._pubs[0].sock.bind(ep)

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

    def local(self, name: str) -> LocalLink:
        """A link for an actor in this process (the node's, the hub's): its ``Peer`` uses it in
        place of a socket on ``inproc://``."""
        link = LocalLink(f"local-{len(self._locals) + 1}".encode(), self._on_local, name)
        self._locals[link.routing_id] = link
        return link

    def close(self) -> None:
        for loop_sock in (*self._monitors, *self._routers, *self._pubs):
            loop_sock.close()

    async def run(self) -> None:
        """Serve until cancelled: the sockets are read from the loop's callbacks."""
        for loop_sock in (*self._routers, *self._monitors, *self._pubs):
            loop_sock.start()
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            for loop_sock in (*self._routers, *self._monitors, *self._pubs):
                loop_sock.stop()

    # -- inbound -------------------------------------------------------------------------------

    def _on_local(self, frames: list[Any], header: p.Header | None) -> None:
        """A message from a local link, with its header as the actor built it (in this process:
        no need to decode it again). It may come while the broker is still handling another
        (the reply of a handler that answered at once): what that one was, is kept."""
        kept = self._key_now, self._frame_now
        try:
            self._on_frames(LOCAL, frames, header)
        finally:
            self._key_now, self._frame_now = kept

    def _on_frames(self, via: int, frames: list[Any], built: p.Header | None = None) -> None:
        routing_id = _INDEX[via] + data(frames[0])
        self._key_now = None
        if via == 1 and self.network is not None and self.network.curve_secret:
            self._key_now = str(frames[-1].get("User-Id"))  # the client's public key (ZAP)
        try:
            self._check_key(routing_id)
            if len(frames) != 3:
                raise RoostError("bad-request", "a message is exactly two frames: header, body")
            self._frame_now = frames[1]
            header = built if built is not None else p.Header.decode(data(frames[1]))
        except RoostError as err:
            self._refuse(routing_id, None, err)
            return
        try:
            self._dispatch(routing_id, header, frames[2])
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

    def _dispatch(self, routing_id: bytes, header: p.Header, body: Body) -> None:
        sender = self.registry.touch(routing_id)
        # actors may answer with more than a client may send (a long listing, a transcript)
        limit = p.HARD_FRAME_LIMIT if sender is not None and sender.actor else p.BODY_LIMIT
        if len(body) > limit:
            raise RoostError("frame-too-large", f"body is {len(body)} bytes; the limit is {limit}")
        kind = header.kind
        if kind == p.HELLO:
            self._hello(routing_id, header, p.unpack(data(body)))
            return
        if kind == p.REQUEST and header.method == "initialize":
            self._initialize(routing_id, header, p.unpack(data(body)))
            return
        if kind == p.PING:
            pong = p.Header(kind=p.PONG, rid=header.rid, sender="broker")
            self._send(routing_id, pong, self._pongs[sender is not None], raw=True)
            return
        if sender is None and kind in (p.RESPONSE, p.ERROR):
            ghost = self.registry.ghost(routing_id)
            if ghost is not None:  # a late answer from an actor that stalled: still deliver it
                as_is = header.sender == ghost
                header.sender = ghost
                if self.config.policy.hub and node_of(ghost):  # a node's link, gone quiet
                    self.links.check(ghost, header)
                self._route_reply(header, body, as_is)
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
        # the header goes on as it came when it names its sender as the broker would
        as_is = sender.actor and header.sender == sender.address and "r" not in header.extra
        header.sender = sender.address
        if sender.meta.get("link"):
            self.links.check(sender.address, header)
        if kind == p.PUBLISH and sender.actor:
            self._publish(header, body)
        elif kind in (p.REQUEST, p.NOTIFY):
            self._route_request(sender, header, body, as_is)
        elif kind in (p.RESPONSE, p.ERROR) and sender.actor:
            self._route_reply(header, body, as_is)
        else:
            raise RoostError("bad-request", f"a {kind!r} message is not accepted here")

    def _route_request(
        self, sender: PeerEntry, header: p.Header, body: Body, as_is: bool = False
    ) -> None:
        policy = self.config.policy
        header.extra.pop("r", None)  # the role is the broker's to say, never the sender's
        if not sender.actor:
            if not policy.client_may_address(header.target):
                raise RoostError(
                    "forbidden", f"clients address the {policy.default_target}; actors are internal"
                )
            header.extra["r"] = sender.meta.get("role", p.OPERATOR)
            header.extra.pop("o", None)  # the scope too: the token's, never the sender's word
            scope = sender.meta.get("scope")
            if scope is not None:
                if not self.gate.scope_live(scope):
                    raise RoostError("unauthorized", "the scoped token was revoked")
                header.extra["o"] = scope
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
        sent = self._send(entry.routing_id, self._wire(header, as_is), body, raw=True, built=header)
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

    def _route_reply(self, header: p.Header, body: Body, as_is: bool = False) -> None:
        entry = self.registry.lookup(header.target)
        wire = self._wire(header, as_is)
        if entry is None or not self._send(entry.routing_id, wire, body, raw=True, built=header):
            log.info("reply-dropped", target=header.target, reason="requester gone")

    def _wire(self, header: p.Header, as_is: bool) -> bytes | zmq.Frame:
        """The header frame to send on: the one that came, when nothing in it changed."""
        if as_is and self._frame_now is not None:
            return self._frame_now
        return header.encode()

    def _publish(self, header: p.Header, body: Body) -> None:
        topic = header.extra.get("topic")
        if not isinstance(topic, str) or not topic:
            raise RoostError("bad-request", "a publish header needs a 'topic' string")
        event_header = p.Header(kind=p.EVENT, sender=header.sender, extra={"topic": topic})
        frames = [topic.encode(), event_header.encode(), body]
        for pub in self._pubs:
            # PUB may drop (the durable log may not); subscribers fill gaps from it
            pub.send(frames)
        self.stats["published"] += 1
        if topic.startswith(OUTPUT):
            self.stats["output"] += 1
        for sender, suffix, seen in self._taps:
            if header.sender == sender and topic.endswith(suffix):
                try:
                    seen(topic)
                except Exception:  # a tap's bug never stops the routing
                    log.exception("tap-failed", topic=topic)
                else:
                    self.stats["tapped"] += 1

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
        fd = liveness.source_fd(self._frame_now) if self._frame_now is not None else None
        entry = PeerEntry(address, routing_id, incarnation, self.registry.now(), meta, fd=fd)
        self.registry.register(entry)
        log.info("peer-up", address=address, incarnation=incarnation)
        # pings are asked only of a CURVE peer (a hub's link): its key is checked per message
        self._send(
            routing_id,
            p.reply_header(header),
            {
                "incarnation": self.config.incarnation,
                "node_id": self.config.node_id,
                "pings": self._key_now is not None,
            },
        )
        self._notify_node(
            {"event": "peer.up", "address": address, "incarnation": incarnation, "meta": meta}
        )
        self._told.pop(address, None)
        self._tell_watch(entry)

    def _check_holder(self, address: str, routing_id: bytes, incarnation: str) -> None:
        """The first live holder of an address keeps it (Registry.live_holder): a hello from
        another process is refused, unless a send to the holder fails (its connection closed)."""
        holder = self.registry.live_holder(address, routing_id, incarnation)
        if holder is not None and self._still_there(holder):
            raise self.config.policy.conflict(address)

    def _still_there(self, entry: PeerEntry) -> bool:
        """Whether the ROUTER still has ``entry``'s routing id: a pong, harmless to a live peer
        (a full pipe is a peer that is there)."""
        probe = p.Header(kind=p.PONG, sender="broker")
        return self._send(entry.routing_id, probe, self._pongs[True], raw=True) is not False

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
        role, scope = self.gate.client(body.get("token"), self._key_now)
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
            meta={"role": role, "version": version, **({"scope": scope} if scope else {})},
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
                "events": self.events_endpoints[
                    min(routing_id[0] % LOCAL, len(self.events_endpoints) - 1)
                ]
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
        self,
        routing_id: bytes,
        header: p.Header | bytes | zmq.Frame,
        body: Any,
        *,
        raw: bool = False,
        built: p.Header | None = None,
    ) -> bool | None:
        """True when sent; False when the peer has gone (EHOSTUNREACH); None when it is full.
        ``built`` is the header the frame encodes, handed on to an actor on a local link."""
        payload = body if raw else p.pack(body)
        wire: bytes | zmq.Frame
        if isinstance(header, p.Header):
            built, wire = header, header.encode()
        else:
            wire = header
        via = routing_id[0]
        if via == LOCAL:
            link = self._locals.get(routing_id[1:])
            return link.deliver([wire, payload], built) if link is not None else False
        if via >= len(self._routers):
            return False
        return self._routers[via].send([routing_id[1:], wire, payload])

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

    # -- who watches output (roost.broker.watch) -------------------------------------------------

    def _on_subscription(self, via: int, frames: list[Any]) -> None:
        if self.subscriptions.update(via, data(frames[0])):
            for entry in self.registry.actors():
                self._tell_watch(entry)

    def _tell_watch(self, entry: PeerEntry) -> None:
        """Tell a supervisor whether its output is watched, a hub's node link which of its
        node's output topics are; only what changed since it was told last."""
        topic = output_topic(entry.address)
        node = node_of(entry.address) if self.config.policy.hub else None
        body: dict[str, Any]
        if topic is not None:
            body = {"event": "output.watched", "watched": self.subscriptions.watched(topic)}
        elif node is not None:
            body = {"event": "output.watched", "prefixes": self.subscriptions.of_node(node)}
        else:
            return
        if self._told.get(entry.address) == body:
            return
        self._told[entry.address] = body
        header = p.Header(kind=p.NOTIFY, sender="broker", target=entry.address)
        self._send(entry.routing_id, header, body)

    # -- liveness (roost.broker.liveness) -------------------------------------------------------

    def _expire(self, entry: PeerEntry) -> None:
        self.registry.expire(entry.address)
        self._told.pop(entry.address, None)
        log.info("peer-down", address=entry.address, reason="connection dropped")
        self._notify_node(
            {
                "event": "peer.down",
                "address": entry.address,
                "incarnation": entry.incarnation,
                "meta": entry.meta,
            }
        )
