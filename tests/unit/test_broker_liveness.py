"""How the broker learns an actor has gone (roost.broker.liveness): a real Broker on ipc in this
process, its owner ``node`` on a local link, and an actor on its own socket."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
import zmq.asyncio

from roost.actors.runtime.peer import Peer
from roost.broker import liveness
from roost.broker.registry import PeerEntry, Registry
from roost.broker.router import Broker, BrokerConfig
from roost.wire import protocol as p
from tests import kit


@pytest.fixture
def ctx() -> Iterator[zmq.asyncio.Context]:
    context = zmq.asyncio.Context()
    yield context
    context.destroy(linger=0)


def test_an_actor_whose_connection_closes_is_dropped_and_its_owner_told(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    async def main() -> None:
        endpoint = f"ipc://{tmp_path}/router"
        config = BrokerConfig([endpoint], [f"ipc://{tmp_path}/events"], "t", "secret", "inc")
        broker = Broker(ctx, config)
        broker.bind()
        node = Peer(ctx, "", "node", "secret", incarnation="n1", link=broker.local("node"))
        told: list[dict[str, Any]] = []

        async def on_notify(header: p.Header, body: dict[str, Any]) -> None:
            told.append(body)

        node.on_notify = on_notify
        actor = Peer(ctx, endpoint, "session/r1", "secret", incarnation="a1", heartbeat=600)
        tasks = [asyncio.create_task(t) for t in (broker.run(), node.run(), actor.run())]
        try:
            await asyncio.wait_for(actor.registered.wait(), 10)
            entry = broker.registry.lookup("session/r1")
            assert entry is not None and entry.fd is not None and entry.fd >= 0
            actor.close()
            tasks[2].cancel()  # its socket closes, as a process's does when it dies
            await kit.until(
                lambda: broker.registry.lookup("session/r1") is None, "the drop", step=0.02
            )
            await kit.until(
                lambda: [b["event"] for b in told][-1:] == ["peer.down"], "peer.down", step=0.02
            )
            assert broker.registry.ghost(entry.routing_id) == "session/r1"
            assert broker.registry.lookup("node") is not None  # the local link stays
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            broker.close()

    asyncio.run(main())


def test_the_suspects_of_a_closed_connection_are_those_on_its_descriptor() -> None:
    registry = Registry(lambda: 0.0)
    on_fd = PeerEntry("session/a", b"\x00a", "i", 0.0, fd=7)
    elsewhere = PeerEntry("session/b", b"\x00b", "i", 0.0, fd=8)
    unknown = PeerEntry("session/c", b"\x00c", "i", 0.0, fd=None)
    network = PeerEntry("lab/node", b"\x01d", "i", 0.0, fd=7)
    for entry in (on_fd, elsewhere, unknown, network):
        registry.register(entry)
    assert liveness.suspects(registry, 0, 7) == [on_fd, unknown]
    assert liveness.suspects(registry, 1, 7) == [network]


def test_a_descriptor_is_read_from_a_frame_or_not_at_all() -> None:
    local: Any = b"bytes, from a local link"  # not a zmq.Frame: no descriptor to read
    assert liveness.source_fd(local) is None
    assert liveness.heartbeats(network=True)[zmq.HEARTBEAT_TIMEOUT] == 3000
    assert liveness.heartbeats(network=False)[zmq.HEARTBEAT_TIMEOUT] == 30_000


def test_a_tap_sees_the_topics_its_sender_publishes_with_its_suffix_only(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    async def main() -> list[str]:
        endpoint = f"ipc://{tmp_path}/router"
        config = BrokerConfig([endpoint], [f"ipc://{tmp_path}/events"], "t", "secret", "inc")
        broker = Broker(ctx, config)
        broker.bind()
        seen: list[str] = []
        broker.tap("state", "/session.turn", seen.append)

        def failing(topic: str) -> None:
            raise RuntimeError(topic)

        broker.tap("state", "/boom", failing)  # a failing tap stops nothing
        state = Peer(ctx, endpoint, "state", "secret", incarnation="s1", heartbeat=600)
        other = Peer(ctx, endpoint, "session/r1", "secret", incarnation="a1", heartbeat=600)
        tasks = [asyncio.create_task(t) for t in (broker.run(), state.run(), other.run())]
        try:
            for peer in (state, other):
                await asyncio.wait_for(peer.registered.wait(), 10)
            other.publish("e/r1/session.turn", {"kind": "session.turn"})  # not the store
            state.publish("e/r1/boom", {})
            state.publish("e/r1/session.output", {"kind": "session.output"})
            state.publish("e/r1/session.turn", {"kind": "session.turn"})
            await kit.until(lambda: broker.stats["published"] == 4, "the four publishes", step=0.02)
            assert broker.stats["tapped"] == 1  # the failing tap is not counted
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            broker.close()
        return seen

    assert asyncio.run(main()) == ["e/r1/session.turn"]
