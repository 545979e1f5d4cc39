"""A node's link to a hub: the node dials out, and the hub routes to it.

The link registers with the hub's broker as ``<node-id>/node`` over CURVE, with the node's own key
pair (the hub authorises that public key with the role ``node`` under the node id's name). A
request a hub client addresses to ``<node-id>/node`` arrives here and goes on to the node's own
broker as a client request, on a local connection with the caller's role (``r``, which the hub's
broker stamps): the node applies its own rules, and its answer goes back the same way. Every event
the node publishes is relayed to the hub with its topic prefixed ``<node-id>/``, and the output
of the sessions the hub's clients subscribe to (the hub's broker says which: ``output.watched``;
all of it until a hub says so), so a session nobody watches is not published for the link.
The link holds no state: cut off from the hub, the node and its sessions run on, and the link's
peer reconnects and registers again when the hub is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
import zmq
import zmq.asyncio

from roost.actors.runtime.endpoints import check_tcp
from roost.actors.runtime.peer import Peer
from roost.client.keys import check_public, node_keys
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.policy import node_address

log = structlog.get_logger("roost.hublink")

HUB_LINK_FILE = "hub-link.json"  # the hub this node dials, kept for later starts
LOCAL_TIMEOUT = 300.0  # a hub client's own deadline ends its wait sooner; this bounds ours


@dataclass(frozen=True)
class HubConfig:
    """Where the hub is and who this node is to it (z85 CURVE keys)."""

    endpoint: str
    server_key: str
    public: str
    secret: str


class LocalClient:
    """An asyncio client connection to the node's own broker, with one role's token."""

    def __init__(self, ctx: zmq.asyncio.Context, endpoint: str, token: str, name: str) -> None:
        self._ctx, self._endpoint, self._token, self._name = ctx, endpoint, token, name
        self._sock: zmq.asyncio.Socket | None = None
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[tuple[p.Header, dict[str, Any]]]] = {}
        self._ready: asyncio.Future[None] | None = None

    async def run(self) -> None:
        """Read replies for as long as the link runs."""
        sock = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(self._endpoint)
        self._sock = sock
        try:
            while True:
                frames = await sock.recv_multipart()
                if len(frames) != 2:
                    continue
                try:  # nothing the node's broker sends may end the link
                    header = p.Header.decode(frames[0])
                    reply = p.unpack(frames[1], limit=p.HARD_FRAME_LIMIT)
                except RoostError as err:
                    log.warning("undecodable-local-reply", code=err.code)
                    continue
                future = self._pending.pop(header.rid, None)
                if future is not None and not future.done():
                    future.set_result((header, reply))
        finally:
            sock.close(0)
            self._sock = None

    async def call(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """The request as the hub client made it (method, target node, session, grant, op)."""
        ready = self._ready
        if ready is None or (ready.done() and (ready.cancelled() or ready.exception())):
            ready = self._ready = asyncio.ensure_future(self._initialize())
        await asyncio.shield(ready)  # calls arriving meanwhile wait for the same initialize
        try:
            return await self._request(header, body)
        except RoostError as err:
            if err.code != "not-initialized":
                raise
            self._ready = asyncio.ensure_future(self._initialize())
            await asyncio.shield(self._ready)
            return await self._request(header, body)

    async def _initialize(self) -> None:
        body = {"versions": list(p.SUPPORTED_VERSIONS), "token": self._token, "client": self._name}
        await self._request(p.Header(kind=p.REQUEST, method="initialize", target="broker"), body)

    async def _request(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        if self._sock is None:
            raise RoostError("unavailable", "the node's local connection is not open yet")
        rid = f"link:{next(self._ids)}"
        local = p.Header(
            kind=p.REQUEST,
            rid=rid,
            method=header.method,
            target="broker" if header.method == "initialize" else "node",
            session=header.session,
            grant=header.grant,
            op=header.op,
        )
        future: asyncio.Future[tuple[p.Header, dict[str, Any]]] = (
            asyncio.get_running_loop().create_future()
        )
        self._pending[rid] = future
        try:
            await self._sock.send_multipart([local.encode(), p.pack(body)])
            reply_header, reply = await asyncio.wait_for(future, LOCAL_TIMEOUT)
        except TimeoutError:
            what = f"the node did not answer {header.method} in time"
            raise RoostError("timeout", what) from None
        finally:
            self._pending.pop(rid, None)
        if reply_header.kind == p.ERROR:
            raise RoostError.from_body(reply)
        return reply


class HubLink:
    """The node's presence on a hub: a peer there, two local connections, an event relay."""

    def __init__(
        self,
        ctx: zmq.asyncio.Context,
        node_id: str,
        hub: HubConfig,
        local: tuple[str, str],
        tokens: dict[str, str],
        incarnation: str,
    ) -> None:
        self.node_id, self.hub = node_id, hub
        self._ctx = ctx
        self._router, self._events = local
        self.peer = Peer(
            ctx,
            hub.endpoint,
            node_address(node_id),
            "",
            incarnation=incarnation,
            meta={"node_id": node_id},
            sockopts={
                zmq.CURVE_SERVERKEY: hub.server_key.encode(),
                zmq.CURVE_PUBLICKEY: hub.public.encode(),
                zmq.CURVE_SECRETKEY: hub.secret.encode(),
            },
        )
        self.peer.fallback = self._forward
        self.peer.on_notify = self._on_notify
        self._sub: zmq.asyncio.Socket | None = None
        self._output = ["o/"]  # the output topics relayed: all, until the hub says which
        self._clients = {
            role: LocalClient(ctx, self._router, token, f"hub-link/{role}")
            for role, token in tokens.items()
        }

    async def run(self) -> None:
        tasks = [
            asyncio.create_task(t)
            for t in (self.peer.run(), self._relay(), *(c.run() for c in self._clients.values()))
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            self.peer.close()
            for task in tasks:
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _forward(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        role = header.extra.get("r", p.OBSERVER)
        client = self._clients.get(role if isinstance(role, str) else p.OBSERVER)
        if client is None:
            raise RoostError("forbidden", "the hub named a role this node does not serve")
        return await client.call(header, body)

    async def _on_notify(self, header: p.Header, body: dict[str, Any]) -> None:
        """The hub's broker on which of this node's output topics its clients subscribe to."""
        prefixes = body.get("prefixes")
        if header.sender != "broker" or body.get("event") != "output.watched":
            return
        if not isinstance(prefixes, list) or not all(isinstance(x, str) for x in prefixes):
            return
        wanted = [x for x in prefixes if x.startswith("o/")]
        if self._sub is not None:
            for gone in set(self._output) - set(wanted):
                self._sub.setsockopt(zmq.UNSUBSCRIBE, gone.encode())
            for new in set(wanted) - set(self._output):
                self._sub.setsockopt(zmq.SUBSCRIBE, new.encode())
        self._output = wanted

    async def _relay(self) -> None:
        """Every event the node publishes, and the output the hub's clients want, on to the hub
        under <node-id>/."""
        self._sub = sub = self._ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        for prefix in ("e/", *self._output):
            sub.setsockopt(zmq.SUBSCRIBE, prefix.encode())
        sub.connect(self._events)
        prefix = f"{self.node_id}/"
        try:
            while True:
                frames = await sub.recv_multipart()
                if len(frames) == 3 and self.peer.registered.is_set():
                    topic = frames[0].decode(errors="replace")
                    self.peer.publish_packed(prefix + topic, frames[2])
        finally:
            self._sub = None
            sub.close(0)


def hub_config(state_dir: Path, endpoint: str, server_key: str | None) -> HubConfig:
    """The hub this node dials: its endpoint and public key, and the node's own key pair."""
    check_tcp(endpoint, "hub")
    if not server_key:
        raise RoostError("bad-request", "--hub needs --hub-key, the hub's public key")
    pair = node_keys(state_dir)
    if pair is None:
        raise RoostError(
            "bad-request",
            "a hub link needs this node's key pair: run `roost keys new` and have the hub "
            "allow its public key with --role node --name <node id>",
            {"field": "hub"},
        )
    return HubConfig(endpoint, check_public(server_key), pair[0], pair[1])


def stored_hub(
    state_dir: Path, endpoint: str | None, key: str | None, *, forget: bool = False
) -> HubConfig | None:
    """The hub link: the one given (and stored for later starts, like the node id), else the one
    stored; ``forget`` removes it."""
    path = state_dir / HUB_LINK_FILE
    if forget:
        path.unlink(missing_ok=True)
        return None
    if endpoint:
        hub = hub_config(state_dir, endpoint, key)
        path.write_text(json.dumps({"endpoint": hub.endpoint, "server_key": hub.server_key}))
        return hub
    try:
        raw = json.loads(path.read_text())
        endpoint, key = str(raw["endpoint"]), str(raw["server_key"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return hub_config(state_dir, endpoint, key)
