"""The hub: one per lab; nodes dial out to it and clients talk to it.

A hub is a broker with the hub policy (clients address ``hub`` or ``<node-id>/node``; a node's
link registers as ``<node-id>/node`` with its CURVE key) plus the hub actor, which answers for
the lab as a whole: ``hub.status``, ``hub.nodes`` (the nodes linked now) and ``session.list``
across every node. Events reach hub clients on the hub's PUB socket under ``<node-id>/``. The hub
holds no durable state: its directory keeps its key pair, the authorised keys, a token for local
use and its log. Its network endpoint always needs CURVE, loopback included, because nodes
authenticate by key.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

import structlog
import zmq.asyncio
from zmq.auth.asyncio import AsyncioAuthenticator

from roost.actors.hub import fleet
from roost.actors.runtime.endpoints import check_tcp, curve_endpoint, roost_for
from roost.actors.runtime.idlock import hold_runtime_dir
from roost.actors.runtime.lock import StateLock
from roost.actors.runtime.peer import Peer, Serving
from roost.actors.runtime.process import announce, run_until, run_until_stopped, setup_logging
from roost.broker.router import Broker, BrokerConfig, NetworkEndpoint
from roost.client.keys import node_keys
from roost.client.locate import (
    ACTOR_TOKEN_FILE,
    OBSERVER_TOKEN_FILE,
    NodeInfo,
    clear_node_info,
    load_or_create_secret,
    load_or_create_token,
    private_dir,
    runtime_dir,
    write_node_info,
)
from roost.wire import fields as f
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.policy import HUB, Policy, node_address, node_of

log = structlog.get_logger("roost.hub")

FAN_OUT_TIMEOUT = 10.0
FLEET_TIMEOUT = 10.0  # a stalled node delays a placement this long, then is passed over
MAX_GONE = 1024  # nodes remembered as gone; the hub keeps nothing across its own restarts


class HubActor:
    """Answers for the whole lab; anything about one node is for that node (``<node-id>/node``)."""

    def __init__(self, peer: Peer, broker: Broker, stop: asyncio.Event) -> None:
        self.peer, self.broker, self._stop = peer, broker, stop
        self.started = time.time()
        # nodes that were linked since the hub started and are not now: node id -> since when
        self.gone: OrderedDict[str, dict[str, Any]] = OrderedDict()
        peer.on_notify = self.on_notify
        handlers: dict[str, Serving] = {
            "hub.status": self.status,
            "hub.nodes": self.nodes,
            "hub.shutdown": self.shutdown,
            "hub.fleet": self.fleet,
            "hub.place": self.place,
            "session.list": self.session_list,
        }
        p.check_served(p.HUB, handlers)  # the table of methods says what a hub serves
        peer.handlers.update(handlers)
        peer.fallback = self.elsewhere

    async def on_notify(self, h: p.Header, body: dict[str, Any]) -> None:
        """The broker's word on links coming and going (nobody else's)."""
        node_id = node_of(str(body.get("address", "")))
        if h.sender != "broker" or node_id is None:
            return
        if body.get("event") == "peer.up":
            self.gone.pop(node_id, None)
        elif body.get("event") == "peer.down":
            self.gone[node_id] = {"incarnation": body.get("incarnation"), "at": time.time()}
            while len(self.gone) > MAX_GONE:
                self.gone.popitem(last=False)

    def linked(self) -> list[dict[str, Any]]:
        now = self.broker.registry.now()
        return [
            {
                "node_id": node_of(e.address),
                "linked": True,
                "incarnation": e.incarnation,
                "last_seen_s": round(now - e.last_seen, 3),
            }
            for e in sorted(self.broker.registry.actors(), key=lambda e: e.address)
            if node_of(e.address)
        ]

    def known(self) -> list[dict[str, Any]]:
        """The linked nodes, then those that were linked since the hub started and are not."""
        now, linked = time.time(), self.linked()
        ids = {n["node_id"] for n in linked}
        gone = [
            {
                "node_id": node_id,
                "linked": False,
                "incarnation": seen["incarnation"],
                "gone_s": round(now - seen["at"], 3),
            }
            for node_id, seen in sorted(self.gone.items())
            if node_id not in ids
        ]
        return linked + gone

    async def status(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "hub": True,
            "incarnation": self.broker.config.incarnation,
            "pid": os.getpid(),
            "started": self.started,
            "uptime_s": time.time() - self.started,
            "endpoints": {"events": self.broker.events_endpoints},
            "nodes": self.known(),
            "broker": dict(self.broker.stats),
        }

    async def nodes(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        return {"nodes": self.known()}

    async def fleet(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        return {"nodes": await self._fleet()}

    async def place(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        provider = f.req_str(body, "provider", max_len=64)
        return fleet.place(await self._fleet(), provider)

    async def _fleet(self) -> list[dict[str, Any]]:
        """Each known node's ``fleet.row``: the linked ones asked for their status (with their
        provider checks) at once."""
        known = self.known()
        linked = [n for n in known if n["linked"]]
        replies = await asyncio.gather(
            *(
                self.peer.call(
                    node_address(n["node_id"]),
                    "node.status",
                    {"providers": True},
                    timeout=FLEET_TIMEOUT,
                )
                for n in linked
            ),
            return_exceptions=True,
        )
        answers = dict(zip((n["node_id"] for n in linked), replies, strict=True))
        lines = []
        for n in known:
            reply = answers.get(n["node_id"])
            if isinstance(reply, dict):
                lines.append(fleet.row(n, reply, None))
            else:
                code = reply.code if isinstance(reply, RoostError) else "unreachable"
                lines.append(fleet.row(n, None, code if n["linked"] else "not linked"))
        return lines

    async def shutdown(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        asyncio.get_running_loop().call_later(0.05, self._stop.set)
        return {"stopping": True}

    async def session_list(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """Every linked node's records, each marked with its ``node``; a node that does not
        answer is named in ``unanswered`` with its error code, and the others still count."""
        ids = [n["node_id"] for n in self.linked()]
        replies = await asyncio.gather(
            *(
                self.peer.call(node_address(i), "session.list", timeout=FAN_OUT_TIMEOUT)
                for i in ids
            ),
            return_exceptions=True,
        )
        records: list[dict[str, Any]] = []
        unanswered = {n["node_id"]: "unreachable" for n in self.known() if not n["linked"]}
        for node_id, reply in zip(ids, replies, strict=True):
            if isinstance(reply, RoostError):
                unanswered[node_id] = reply.code
            elif isinstance(reply, BaseException):
                unanswered[node_id] = "internal"
            else:
                records += [{**r, "node": node_id} for r in reply.get("records", [])]
        return {"records": records, "unanswered": unanswered}

    async def elsewhere(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        if h.method not in p.CLIENT_METHODS:
            raise RoostError("unknown-method", f"no node serves {h.method!r}", {"method": h.method})
        raise RoostError(
            "bad-request",
            f"{h.method} is a node's: address <node-id>/node (the CLI: --node NODE)",
            {"field": "node", "method": h.method},
        )


def events_port(endpoint: str, given: int | None) -> int | None:
    """The hub's event port: the one given, else the listen port + 1, so that it is the same at
    every start (firewalls; followers find it again); None (one of its choosing) for port *."""
    port = endpoint.rsplit(":", 1)[1]
    if given is None and port.isdigit():
        given = int(port) + 1
    if given is not None and not (0 < given < 65536 and str(given) != port):
        raise RoostError(
            "bad-request",
            "the events port is 1 to 65535 and not the listen port (give --events-port)",
            {"field": "events-port"},
        )
    return given


def hub_network(state_dir: Path, endpoint: str, port: int | None = None) -> NetworkEndpoint:
    """The hub's TCP endpoint: always CURVE (nodes authenticate by key), loopback included."""
    roost = roost_for(state_dir)
    advice = (
        f"a hub needs CURVE: run `{roost} keys new`, then `{roost} keys allow` for each node "
        "(--role node --name <node id>) and client"
    )
    network = curve_endpoint(state_dir, check_tcp(endpoint, "listen"), advice)
    network.events_port = events_port(endpoint, port)
    return network


async def serve(state_dir: Path, network: NetworkEndpoint, stop: asyncio.Event) -> None:
    ctx = zmq.asyncio.Context()
    runtime = runtime_dir(state_dir)
    router_ep, events_ep = f"ipc://{runtime}/router", f"ipc://{runtime}/events"
    for sock in ("router", "events"):
        with contextlib.suppress(FileNotFoundError):
            (runtime / sock).unlink()  # left by a crashed hub; we hold the lock
    actor_token = load_or_create_secret(state_dir / ACTOR_TOKEN_FILE)
    incarnation = uuid.uuid4().hex[:12]
    broker = Broker(
        ctx,
        BrokerConfig(
            router_endpoints=[router_ep, "inproc://hub"],
            pub_endpoints=[events_ep],  # local clients (by the hub's directory) subscribe here
            token=load_or_create_token(state_dir),
            actor_token=actor_token,
            observer_token=load_or_create_secret(state_dir / OBSERVER_TOKEN_FILE),
            incarnation=incarnation,
            node_id=HUB,
            policy=Policy(hub=True),
        ),
    )
    broker.bind()
    zap = AsyncioAuthenticator(ctx)
    zap.start()
    assert network.keys is not None
    zap.configure_curve_callback("roost", credentials_provider=network.keys)
    try:
        broker.listen(network)
    except RoostError as err:  # a port in use: said at once, not "exited during startup"
        announce({"error": err.to_body()})
        zap.stop()
        broker.close()
        ctx.destroy(0)
        return
    for sock in ("router", "events"):
        with contextlib.suppress(OSError):
            os.chmod(runtime / sock, 0o600)
    peer = Peer(
        ctx, "inproc://hub", HUB, actor_token, incarnation=incarnation, link=broker.local(HUB)
    )
    HubActor(peer, broker, stop)
    events = broker.events_endpoints[-1]  # the network one
    write_node_info(state_dir, NodeInfo(HUB, incarnation, os.getpid(), router_ep, events_ep))
    pair = node_keys(state_dir)
    announce(
        {
            "hub": True,
            "pid": os.getpid(),
            "incarnation": incarnation,
            "endpoints": {"router": network.endpoint, "events": events},
            "server_key": pair[0] if pair else None,
        }
    )
    log.info("hub-serving", endpoint=network.endpoint, incarnation=incarnation)
    try:
        await run_until(stop, broker.run(), peer.run())
    finally:
        clear_node_info(state_dir, os.getpid())
        zap.stop()
        broker.close()
        ctx.destroy(0)


def main() -> None:
    parser = argparse.ArgumentParser(prog="roost-hub")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--listen", required=True)
    parser.add_argument("--events-port", type=int, default=None)
    args = parser.parse_args()
    state_dir = private_dir(Path(args.state_dir))
    setup_logging(private_dir(state_dir / "logs") / "hub.log", "hub")
    lock = StateLock(state_dir / "node.lock")  # a directory serves one node or one hub
    if not lock.acquire():
        announce({"error": RoostError("node-running", "a hub or node serves this dir").to_body()})
        sys.exit(3)
    try:
        if (state_dir / "state.db").exists():
            raise RoostError(
                "bad-request",
                "this directory holds a node's state; give the hub a --state-dir of its own",
                {"field": "state-dir"},
            )
        runtime = hold_runtime_dir(runtime_dir(state_dir))  # no node id: its id is no node's
        network = hub_network(state_dir, args.listen, args.events_port)
    except RoostError as err:
        announce({"error": err.to_body()})
        sys.exit(2)
    run_until_stopped(lambda stop: serve(state_dir, network, stop))
    runtime.release()
    lock.release()


if __name__ == "__main__":
    main()
