"""The node daemon (``roost node up`` starts it): broker, node actor, and the child actors.

Startup: take the state directory's lock (one node per state directory), then its node id's
(one node per node id on the machine: ``identity.py``), check the database (refusing foreign or
newer state untouched), bind the broker in the private runtime directory, start the state store
and adapters, then print one JSON line on stdout (``ready`` or ``error``) for the CLI that
launched it, and keep serving until ``node.shutdown`` or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
import uuid
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import structlog
import zmq.asyncio
from zmq.auth.asyncio import AsyncioAuthenticator

from roost import __version__
from roost.actors.node import identity
from roost.actors.node.actor import NodeActor
from roost.actors.node.control import TURN_TOPIC
from roost.actors.node.hublink import HubConfig, HubLink, stored_hub
from roost.actors.node.launcher import Launcher
from roost.actors.node.notify import Notifier
from roost.actors.node.restore import WAS_RUNNING, Batch, Restorer
from roost.actors.node.sessions import Sessions
from roost.actors.node.zygote import Zygote, wanted
from roost.actors.runtime.children import Child
from roost.actors.runtime.endpoints import network_endpoint
from roost.actors.runtime.lock import StateLock
from roost.actors.runtime.peer import Peer
from roost.actors.runtime.process import Tasks, announce, run_until_stopped, setup_logging
from roost.adapters.settings import binary
from roost.broker.registry import Registry
from roost.broker.router import Broker, BrokerConfig, NetworkEndpoint
from roost.client.keys import node_keys
from roost.client.locate import (
    ACTOR_TOKEN_ENV,
    ACTOR_TOKEN_FILE,
    LOCK_FILE,
    OBSERVER_TOKEN_FILE,
    NodeInfo,
    clear_node_info,
    load_or_create_secret,
    load_or_create_token,
    private_dir,
    runtime_dir,
    write_node_info,
)
from roost.client.scoped import ScopedTokens
from roost.config import Config, config_path, load
from roost.interpreter import python_module
from roost.providers import built_in, define, defined, vendors
from roost.wire import protocol as p
from roost.wire.errors import RoostError, write_refused
from roost.wire.limits import check_limit
from roost.wire.messages import Event
from roost.wire.policy import check_node_id

log = structlog.get_logger("roost.daemon")

READY_TIMEOUT = 30.0


class Daemon:
    def __init__(
        self,
        state_dir: Path,
        node_id: str,
        token: str,
        network: NetworkEndpoint | None = None,
        retain_events: int | None = None,
        hub: HubConfig | None = None,
        cfg: Config | None = None,
    ) -> None:
        self.state_dir, self.node_id, self.token = state_dir, node_id, token
        self.config = cfg or Config(*config_path())
        define(self.config.defined_providers())  # spawn knows the providers the file defines
        self.actor_token = load_or_create_secret(state_dir / ACTOR_TOKEN_FILE)
        self.incarnation = uuid.uuid4().hex[:12]
        self.runtime = runtime_dir(state_dir)
        self.router_ep = f"ipc://{self.runtime}/router"
        self.events_ep = f"ipc://{self.runtime}/events"
        self.ctx = zmq.asyncio.Context()
        self.broker = Broker(
            self.ctx,
            BrokerConfig(
                router_endpoints=[self.router_ep, "inproc://broker"],
                pub_endpoints=[self.events_ep],
                token=token,
                actor_token=self.actor_token,
                observer_token=load_or_create_secret(state_dir / OBSERVER_TOKEN_FILE),
                incarnation=self.incarnation,
                node_id=node_id,
                scoped=ScopedTokens(state_dir),
            ),
        )
        self.children = self._children(retain_events)
        self.started = time.time()
        self.failed = False
        self.network = network
        self.peer: Peer | None = None  # the node actor's, once running
        self.launcher: Launcher | None = None  # the sessions', once running
        self.hub = hub
        self.link: HubLink | None = None
        self.tasks = Tasks()  # serve's, once running

    def _exited(self, prefix: str) -> None:
        """A child actor's process exited: forget it now, and fail the node's calls to it now
        rather than at their deadline (clients get `unavailable` at once)."""
        self.broker.drop(prefix)
        if self.peer is not None:
            self.peer.abandon(prefix)

    def _children(self, retain_events: int | None) -> list[Child]:
        """The state store (with the retention limit, when given) and the adapter host."""
        env = {**os.environ, ACTOR_TOKEN_ENV: self.actor_token}
        env.pop("ROOST_TOKEN", None)
        common = ["--state-dir", str(self.state_dir), "--endpoint", self.router_ep]
        keep = [] if retain_events is None else ["--retain-events", str(retain_events)]
        return [
            Child(
                "state",
                python_module("roost.actors.state", *common, "--node-id", self.node_id, *keep),
                env,
                on_exit=lambda: self._exited("state"),
                first_only=["--checked"],  # main() has just checked the database
            ),
            Child(
                "adapters",
                python_module("roost.actors.adapter_host", *common),
                env,
                on_exit=lambda: self._exited("adapter/"),
            ),
        ]

    def status(self) -> dict[str, Any]:
        actors: dict[str, Any] = {c.name: c.status() for c in self.children}
        if self.launcher is not None:
            zygote = self.launcher.zygote
            actors["zygote"] = zygote.status() if zygote else {"kind": "zygote", "health": "off"}
        for entry in self.broker.registry.actors():
            kind = "session" if entry.address.startswith("session/") else "actor"
            actors.setdefault(entry.address, {"kind": kind, "pid": entry.meta.get("pid")})
            if kind == "session":  # what it runs: a supervisor outlives an upgrade of the node
                actors[entry.address]["roost"] = entry.meta.get("roost")
                actors[entry.address]["wire"] = entry.meta.get("wire", 1)
            actors[entry.address]["registered"] = True
        for name in ("state",):
            actors[name]["registered"] = self.broker.registry.lookup(name) is not None
        # an adapter is only as usable as its CLI: say when it is missing
        for provider in (*vendors(), *defined()):
            if f"adapter/{provider}" in actors:
                actors[f"adapter/{provider}"].update(binary(provider, self.config, os.environ))
        return {
            "node_id": self.node_id,
            "roost": __version__,
            "incarnation": self.incarnation,
            "pid": os.getpid(),
            "state_dir": str(self.state_dir),
            "started": self.started,
            "endpoints": self.endpoints(),
            "actors": actors,
            "broker": dict(self.broker.stats),
        }

    def endpoints(self) -> dict[str, Any]:
        eps: dict[str, Any] = {"router": self.router_ep, "events": self.events_ep}
        if self.hub is not None:
            linked = self.link is not None and self.link.peer.registered.is_set()
            eps["hub"] = {
                "endpoint": self.hub.endpoint,
                "server_key": self.hub.server_key,
                "linked": linked,
            }
            refused = self.link.peer.refused if self.link is not None else None
            if refused is not None and not linked:  # the hub said no, and why (node-id-conflict)
                eps["hub"]["refused"] = dict(refused)
        if self.network is not None:
            eps["network"] = {
                "router": self.network.endpoint,
                "events": self.broker.events_endpoints[-1],
                "curve": bool(self.network.curve_secret),
            }
            if self.network.curve_secret:
                pair = node_keys(self.state_dir)
                eps["network"]["server_key"] = pair[0] if pair else None
        return eps

    def registered(self) -> Registered:
        return Registered(self.broker.registry)

    async def serve(self, stop: asyncio.Event) -> None:
        for sock in ("router", "events"):
            with contextlib.suppress(FileNotFoundError):
                (self.runtime / sock).unlink()  # left by a crashed node; we hold the lock
        self.broker.bind()
        if self.network is not None:
            if self.network.curve_secret:
                self.zap = AsyncioAuthenticator(self.ctx)
                self.zap.start()
                self.zap.configure_curve_callback("roost", credentials_provider=self.network.keys)
            self.broker.listen(self.network)
        for sock in ("router", "events"):
            with contextlib.suppress(OSError):
                os.chmod(self.runtime / sock, 0o600)
        self.peer = peer = Peer(
            self.ctx,
            "inproc://broker",
            "node",
            self.actor_token,
            incarnation=self.incarnation,
            meta={"pid": os.getpid()},
            link=self.broker.local("node"),  # the broker is in this process: no socket between
        )
        self.launcher = launcher = Launcher(self.runtime, Zygote() if wanted() else None)
        if launcher.zygote is None:
            log.info("zygote-off", why="windows" if sys.platform == "win32" else "ROOST_ZYGOTE=0")
        sessions = Sessions(
            peer, launcher, self.state_dir, self.router_ep, self.actor_token, self.node_id
        )
        restorer = Restorer(peer, sessions, self.config.restore_pause()[0], self.registered)
        node = NodeActor(peer, sessions, self.status, stop.set, self.registered, restorer)
        self.broker.tap("state", TURN_TOPIC, node.turn_event)  # a turn's end, as it is published
        # Every task here is essential: one that crashes (logged task-crashed) stops the node as
        # node.shutdown would, and main exits with CRASHED for the service manager to start it
        # again (the supervisors outlive it and re-attach), rather than serve on without it.
        self.tasks = tasks = Tasks(on_crash=lambda _: stop.set())
        tasks.start(self.broker.run(), "broker")
        tasks.start(peer.run(), "node-peer")
        tasks.start(restorer.run(), "restorer")
        for child in self.children:
            tasks.start(child.run(), f"child/{child.name}")
        if self.hub is not None:
            self.link = HubLink(
                self.ctx,
                self.node_id,
                self.hub,
                ("inproc://broker", self.events_ep),
                {p.OPERATOR: self.token, p.OBSERVER: self.broker.config.observer_token},
                self.incarnation,
            )
            tasks.start(self.link.run(), "hub-link")
            tasks.start(node.providers.at_start(self.registered), "provider-checks")
        try:
            await self._wait_ready(peer)
            await self._started(peer)
            restoring = await self._restore(node, restorer)
        except RoostError as err:  # storage-full too: node.started or node.json not written
            announce({"error": err.to_body()})
            self.failed = True
            stop.set()
        else:
            tasks.start(node.sweep.run(), "sweep")
            tasks.start(self._notifier(peer).run(), "notifier")
            announce({"ready": {**self.status(), "restore": restoring.to_wire()}})
            log.info("node-serving", node_id=self.node_id, incarnation=self.incarnation)
        await stop.wait()
        log.info("node-stopping", crashed=tasks.failure.name if tasks.failure else None)
        node.limits.close()  # no continue is typed by a node on its way out
        await node.inputs.drain()  # what the node accepted, typed before it goes
        clear_node_info(self.state_dir, os.getpid())
        for child in self.children:
            await child.stop()
        await launcher.close()
        await tasks.cancel()
        self.broker.close()
        self.ctx.destroy(0)
        if tasks.failure is not None:
            raise tasks.failure  # run_until_stopped: exit status CRASHED

    async def _restore(self, node: NodeActor, restorer: Restorer) -> Batch:
        """The first sweep, before ready: records whose supervisor died with the machine become
        dormant (``session.lost``); those that were running and say ``resume`` are queued for a
        cold resume, one at a time (``node up`` prints the plan and follows it)."""
        lost = await node.sweep.sweep(first=True)
        return await restorer.begin([x for x in lost if x.state in WAS_RUNNING], "boot")

    def _notifier(self, peer: Peer) -> Notifier:
        async def lookup(rid: str) -> dict[str, Any] | None:
            reply = await peer.call("state", "state.record.get", {"id": rid}, timeout=2.0)
            record: dict[str, Any] | None = reply.get("record")
            return record

        return Notifier(self.ctx, self.events_ep, self.config, self.node_id, lookup)

    async def _started(self, peer: Peer) -> None:
        """Append ``node.started``, then publish ``node.json`` for clients."""
        event: Event = {
            "kind": "node.started",
            "data": {"incarnation": self.incarnation, "pid": os.getpid()},
        }
        await peer.call("state", "state.events.append", {"events": [event]})
        network = self.endpoints().get("network")
        info = NodeInfo(
            self.node_id, self.incarnation, os.getpid(), self.router_ep, self.events_ep, network
        )
        try:
            write_node_info(self.state_dir, info)
        except OSError as exc:
            raise write_refused(
                exc, "node.json could not be written to the state directory"
            ) from None

    async def _wait_ready(self, peer: Peer) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        # the adapter host serves once its built-in adapters (always offered) are registered
        needed = {"state", *(f"adapter/{name}" for name in built_in())}
        while not needed <= self.registered() or not peer.registered.is_set():
            if time.monotonic() > deadline:
                raise RoostError("unavailable", "the node's actors did not start in time")
            if any(c.health == "failed" for c in self.children):
                raise RoostError("unavailable", "a node actor failed to start")
            if self.tasks.failure is not None:
                raise RoostError("internal", f"the node's {self.tasks.failure.name} crashed")
            await asyncio.sleep(0.05)
        await peer.call("state", "state.open", {})


class Registered(AbstractSet[str]):
    """The actors registered with the broker, read live: ``in`` is one lookup (every forwarded
    request asks about its supervisor), not a copy of the whole registry."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def __contains__(self, address: object) -> bool:
        entry = self._registry.lookup(address) if isinstance(address, str) else None
        return entry is not None and entry.actor

    def __iter__(self) -> Iterator[str]:
        return iter([e.address for e in self._registry.actors()])

    def __len__(self) -> int:
        return len(self._registry.actors())


def main() -> None:
    parser = argparse.ArgumentParser(prog="roost-daemon")
    parser.add_argument("--state-dir", required=True)
    ids = parser.add_mutually_exclusive_group()
    ids.add_argument("--node-id")
    ids.add_argument("--new-node-id", help="serve under this id from now on (identity.py)")
    parser.add_argument("--listen", help="a tcp:// endpoint for clients (CURVE unless loopback)")
    parser.add_argument("--retain-events", help="keep this many events (stored for later starts)")
    parser.add_argument("--hub", help="a hub's tcp:// endpoint to dial out to (CURVE)")
    parser.add_argument("--hub-key", help="the hub's CURVE public key")
    parser.add_argument("--no-hub", action="store_true", help="forget the hub link stored")
    args = parser.parse_args()
    state_dir = private_dir(Path(args.state_dir))
    private_dir(state_dir / "logs")
    setup_logging(state_dir / "logs" / "node.log", "node")
    lock = StateLock(state_dir / LOCK_FILE)
    if not lock.acquire():
        announce({"error": RoostError("node-running").to_body()})
        sys.exit(3)
    try:
        for given in (args.node_id, args.new_node_id):
            if given:
                check_node_id(given)
        held = identity.claim(state_dir, args.node_id, args.new_node_id)
    except RoostError as err:
        announce({"error": err.to_body()})
        sys.exit(2)
    token = load_or_create_token(state_dir)
    try:
        cfg = load()  # checked here so that a bad file stops node up with config-invalid
        network = network_endpoint(state_dir, args.listen) if args.listen else None
        keep = None if args.retain_events is None else check_limit(args.retain_events)
        hub = stored_hub(state_dir, args.hub, args.hub_key, forget=args.no_hub)
    except RoostError as err:
        announce({"error": err.to_body()})
        sys.exit(2)
    daemon = Daemon(state_dir, held.node_id, token, network, keep, hub, cfg)
    run_until_stopped(daemon.serve)
    held.release()
    lock.release()
    sys.exit(2 if daemon.failed else 0)


if __name__ == "__main__":
    main()
