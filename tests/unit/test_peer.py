"""The actor runtime (runtime.peer), against a raw ROUTER standing in for the broker: a peer
whose pipe is full queues its sends in order instead of dropping them; it pings only a broker
that wants pings; it says hello again, under its own routing id, after a reconnect; it keeps a
connection that is slow to be made, and leaves a made one that falls silent within 3 beats."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
import zmq.asyncio

from roost.actors.runtime import peer as peer_mod
from roost.actors.runtime.peer import Peer
from roost.wire import protocol as p
from roost.wire.errors import RoostError

# What the pipe holds before a send meets it full: the DEALER's send and the ROUTER's receive
# high-water marks (1,000 each by default), the kernel's socket buffers and libzmq's batches
# between them; how much of it the I/O threads move on meanwhile depends on how they are
# scheduled. So a test sends until the peer says its sends wait (the router reads nothing until
# then), and fails if that never happens within far more than all of that holds.
FILL_AT_MOST = 200_000
QUEUED = 1000  # sent after the first send that met the full pipe: each waits behind it


def _fill(peer: Peer, queued: int) -> int:
    """Publish ``{"i": 0}``, ``{"i": 1}``... until ``queued`` of them wait in the peer's queue
    (the pipe is full); how many were published."""
    sent = 0
    while peer.queued_sends < queued:
        assert sent < FILL_AT_MOST, f"{sent} sends and the pipe never filled"
        peer.publish("load", {"i": sent})
        sent += 1
    return sent


@pytest.fixture
def ctx() -> Iterator[zmq.asyncio.Context]:
    context = zmq.asyncio.Context()
    yield context
    context.destroy(linger=0)


async def _recv(router: zmq.asyncio.Socket) -> tuple[p.Header, dict[str, Any]]:
    frames = await asyncio.wait_for(router.recv_multipart(), 10)
    return p.Header.decode(frames[1]), p.unpack(frames[2])


Started = tuple[zmq.asyncio.Socket, Peer, "asyncio.Task[None]"]


def _router(ctx: zmq.asyncio.Context, endpoint: str) -> zmq.asyncio.Socket:
    """A ROUTER bound where the peer dials: the broker's side, played by the test."""
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(endpoint)
    return router


async def _start(ctx: zmq.asyncio.Context, tmp_path: Path) -> Started:
    endpoint = f"ipc://{tmp_path}/broker.sock"
    router = _router(ctx, endpoint)
    peer = Peer(ctx, endpoint, "loaded", "token", incarnation="i1", heartbeat=600)
    task = asyncio.create_task(peer.run())
    header, body = await _recv(router)
    assert header.kind == p.HELLO and body["address"] == "loaded"
    return router, peer, task


async def _stop(peer: Peer, task: asyncio.Task[None]) -> None:
    peer.close()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_sends_meeting_a_full_pipe_wait_and_arrive_in_order(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    async def main() -> None:
        router, peer, task = await _start(ctx, tmp_path)
        try:
            sent = _fill(peer, 1)  # the last of these met the high-water mark and waits
            for i in range(sent, sent + QUEUED):  # these wait behind it, however the pipe drains
                peer.publish("load", {"i": i})
            sent += QUEUED
            assert peer.queued_sends == QUEUED + 1
            seen: list[Any] = []
            while len(seen) < sent:
                header, body = await _recv(router)
                assert header.kind == p.PUBLISH
                seen.append(body["i"])
            assert seen == list(range(sent))
            deadline = asyncio.get_running_loop().time() + 10
            while peer.queued_sends and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
            assert peer.queued_sends == 0
        finally:
            await _stop(peer, task)

    asyncio.run(main())


def test_the_send_queue_is_bounded_and_recovers(
    ctx: zmq.asyncio.Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(peer_mod, "MAX_QUEUED_SENDS", 50)

    async def main() -> None:
        router, peer, task = await _start(ctx, tmp_path)
        try:
            sent = _fill(peer, 50)  # the queue is at its bound
            for i in range(sent, sent + QUEUED):
                peer.publish("load", {"i": i})
            sent += QUEUED
            assert peer.queued_sends == 50  # the rest was shed, not held without bound
            kept = sent - QUEUED
            seen = [(await _recv(router))[1]["i"] for _ in range(kept)]
            assert seen == list(range(kept))  # in order, each of those kept
            assert peer.queued_sends == 0
            peer.publish("load", {"i": "after"})  # drained: sending works again
            _, body = await _recv(router)
            assert body["i"] == "after"  # and nothing that was shed came after all
        finally:
            await _stop(peer, task)

    asyncio.run(main())


def _hello_reply(router: zmq.asyncio.Socket, routing_id: bytes, **extra: Any) -> Any:
    header = p.Header(kind=p.RESPONSE, rid="hello", sender="broker")
    return router.send_multipart(
        [routing_id, header.encode(), p.pack({"incarnation": "b1", "node_id": "n", **extra})]
    )


async def _next_kind(router: zmq.asyncio.Socket, timeout: float) -> tuple[bytes, str] | None:
    try:
        frames = await asyncio.wait_for(router.recv_multipart(), timeout)
    except TimeoutError:
        return None
    return frames[0], p.Header.decode(frames[1]).kind


@pytest.mark.parametrize(("extra", "pings"), [({"pings": False}, False), ({}, True)])
def test_a_registered_peer_pings_only_a_broker_that_wants_pings(
    ctx: zmq.asyncio.Context, tmp_path: Path, extra: dict[str, Any], pings: bool
) -> None:
    """A broker that answers hello ``pings: false`` keeps the link with ZMTP heartbeats: the
    peer sends nothing while it is idle. One that does not say (an earlier release) is pinged
    every beat."""

    async def main() -> None:
        endpoint = f"ipc://{tmp_path}/broker.sock"
        router = _router(ctx, endpoint)
        peer = Peer(ctx, endpoint, "quiet", "token", incarnation="i1", heartbeat=0.1)
        task = asyncio.create_task(peer.run())
        try:
            frames = await asyncio.wait_for(router.recv_multipart(), 10)
            assert p.Header.decode(frames[1]).kind == p.HELLO
            await _hello_reply(router, frames[0], **extra)
            await asyncio.wait_for(peer.registered.wait(), 10)
            while await _next_kind(router, 0.05):  # pings sent while the hello was answered
                pass
            got = await _next_kind(router, 1.0)  # ten beats: one that pings has pinged
            assert (got is not None and got[1] == p.PING) is pings, got
        finally:
            await _stop(peer, task)

    asyncio.run(main())


def test_a_reconnect_says_hello_again_under_the_same_routing_id(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    """The broker goes away (its socket closes) and comes back on the same endpoint: the peer
    is unregistered meanwhile, and says hello again, from the routing id it had, as soon as the
    new connection's handshake completes."""

    async def main() -> None:
        endpoint = f"ipc://{tmp_path}/broker.sock"
        first = _router(ctx, endpoint)
        peer = Peer(ctx, endpoint, "back", "token", incarnation="i1", heartbeat=600)
        task = asyncio.create_task(peer.run())
        try:
            frames = await asyncio.wait_for(first.recv_multipart(), 10)
            routing_id = frames[0]
            assert routing_id[:1] == b"\x01" and len(routing_id) == 16
            await _hello_reply(first, routing_id, pings=False)
            await asyncio.wait_for(peer.registered.wait(), 10)
            first.close(0)
            deadline = asyncio.get_running_loop().time() + 10
            while peer.registered.is_set():  # the monitor saw the connection drop
                assert asyncio.get_running_loop().time() < deadline, "still registered"
                await asyncio.sleep(0.02)
            second = _router(ctx, endpoint)
            try:
                frames = await asyncio.wait_for(second.recv_multipart(), 10)
                assert frames[0] == routing_id and p.Header.decode(frames[1]).kind == p.HELLO
                await _hello_reply(second, routing_id, pings=False)
                await asyncio.wait_for(peer.registered.wait(), 10)
            finally:
                second.close(0)
        finally:
            await _stop(peer, task)

    asyncio.run(main())


async def _stalling_proxy(upstream: str, stall: float, conns: list[float]) -> asyncio.Server:
    """A TCP proxy to ``upstream`` (tcp://host:port) that holds each connection ``stall``
    seconds before it passes anything on, either way: a connection slow to be made, as over a
    slow lossy link. ``conns`` gets the time each connection came."""
    host, port = upstream[len("tcp://") :].rsplit(":", 1)

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        writer.close()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conns.append(asyncio.get_running_loop().time())
        await asyncio.sleep(stall)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    return await asyncio.start_server(serve, "127.0.0.1", 0)


def test_a_connection_slow_to_be_made_is_not_started_over(ctx: zmq.asyncio.Context) -> None:
    """The connection takes 6 beats to be made (3 beats is the silence after which a peer
    starts over): the peer keeps it and registers on it. Counting those beats from the socket's
    opening, it started over every 3 beats with a fresh socket and never registered."""

    async def main() -> None:
        router = _router(ctx, "tcp://127.0.0.1:0")
        conns: list[float] = []
        proxy = await _stalling_proxy(router.getsockopt_string(zmq.LAST_ENDPOINT), 0.6, conns)
        port = proxy.sockets[0].getsockname()[1]
        peer = Peer(ctx, f"tcp://127.0.0.1:{port}", "far", "t", incarnation="i1", heartbeat=0.1)
        task = asyncio.create_task(peer.run())
        try:
            frames = await asyncio.wait_for(router.recv_multipart(), 10)
            assert p.Header.decode(frames[1]).kind == p.HELLO
            await _hello_reply(router, frames[0], pings=True)
            await asyncio.wait_for(peer.registered.wait(), 10)
            assert len(conns) == 1, f"{len(conns)} connections: the peer started over"
        finally:
            await _stop(peer, task)
            proxy.close()
            router.close(0)

    asyncio.run(main())


def test_a_silent_broker_on_a_made_connection_is_left_within_3_beats(
    ctx: zmq.asyncio.Context,
) -> None:
    """Registered with a broker that wants pings, which then stops answering them (its
    connection stays): the peer gives that socket up after 3 beats without a pong and says hello
    from a fresh one."""

    async def main() -> None:
        router = _router(ctx, "tcp://127.0.0.1:0")
        endpoint = router.getsockopt_string(zmq.LAST_ENDPOINT)
        peer = Peer(ctx, endpoint, "watched", "t", incarnation="i1", heartbeat=0.1)
        task = asyncio.create_task(peer.run())
        loop = asyncio.get_running_loop()
        try:
            frames = await asyncio.wait_for(router.recv_multipart(), 10)
            first = frames[0]
            await _hello_reply(router, first, pings=True)
            await asyncio.wait_for(peer.registered.wait(), 10)
            silent_since = loop.time()
            while True:  # the pings go unanswered
                got = await _next_kind(router, 10)
                assert got is not None, "neither a ping nor a new hello"
                if got[1] == p.HELLO:
                    break
                assert got == (first, p.PING)
            took = loop.time() - silent_since
            assert got[0] != first  # a fresh socket: a new routing id
            assert 0.3 <= took < 1.5, took  # 3 beats, plus one beat and the loop's slack
        finally:
            await _stop(peer, task)
            router.close(0)

    asyncio.run(main())


async def _zap(ctx: zmq.asyncio.Context, refuse: int, asked: list[int]) -> None:
    """The broker's ZAP handler: refuses the first ``refuse`` CURVE handshakes, then allows."""
    sock = ctx.socket(zmq.REP)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind("inproc://zeromq.zap.01")
    try:
        while True:
            frames = await sock.recv_multipart()
            asked.append(len(asked) + 1)
            allowed = len(asked) > refuse
            status = [b"200", b"OK", b"node"] if allowed else [b"400", b"not allowed", b""]
            await sock.send_multipart([b"1.0", frames[1], *status, b""])
    finally:
        sock.close(0)


def test_a_refused_handshake_is_tried_again_on_a_fresh_socket(ctx: zmq.asyncio.Context) -> None:
    """A broker that refuses the peer's CURVE key (libzmq then never connects that socket again)
    and allows it later: the peer starts over with a fresh socket every 3 beats, and registers
    once the key is allowed."""

    async def main() -> None:
        asked: list[int] = []
        zap = asyncio.create_task(_zap(ctx, 2, asked))
        await asyncio.sleep(0)  # bound before the broker's first handshake
        server_public, server_secret = zmq.curve_keypair()
        public, secret = zmq.curve_keypair()
        router = ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.LINGER, 0)
        router.setsockopt(zmq.CURVE_SERVER, 1)
        router.setsockopt(zmq.CURVE_SECRETKEY, server_secret)
        port = router.bind_to_random_port("tcp://127.0.0.1")
        keys: dict[int, Any] = {
            zmq.CURVE_SERVERKEY: server_public,
            zmq.CURVE_PUBLICKEY: public,
            zmq.CURVE_SECRETKEY: secret,
        }
        endpoint = f"tcp://127.0.0.1:{port}"
        peer = Peer(ctx, endpoint, "n/node", "", incarnation="i1", heartbeat=0.1, sockopts=keys)
        task = asyncio.create_task(peer.run())
        try:
            frames = await asyncio.wait_for(router.recv_multipart(), 10)
            assert p.Header.decode(frames[1]).kind == p.HELLO
            assert asked == [1, 2, 3]  # refused twice, each time from a fresh socket
            await _hello_reply(router, frames[0], pings=True)
            await asyncio.wait_for(peer.registered.wait(), 10)
        finally:
            await _stop(peer, task)
            zap.cancel()
            router.close(0)

    asyncio.run(main())


def test_a_call_gets_its_reply_or_its_deadline_and_a_late_reply_is_dropped(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    """A call answered in time returns the reply; one never answered raises ``timeout`` at its
    deadline (``unavailable`` for a target that restarts) and is forgotten; its reply coming
    after that is dropped, and the next call still gets its own."""

    async def main() -> None:
        endpoint = f"ipc://{tmp_path}/broker.sock"
        router = _router(ctx, endpoint)
        peer = Peer(ctx, endpoint, "caller", "token", incarnation="i1", heartbeat=600)
        task = asyncio.create_task(peer.run())
        try:
            frames = await asyncio.wait_for(router.recv_multipart(), 10)
            routing_id = frames[0]
            await _hello_reply(router, routing_id, pings=False)
            await asyncio.wait_for(peer.registered.wait(), 10)

            async def answer(header: p.Header, body: dict[str, Any]) -> None:
                reply = p.Header(kind=p.RESPONSE, rid=header.rid, sender=header.target)
                await router.send_multipart([routing_id, reply.encode(), p.pack(body)])

            call = asyncio.create_task(peer.call("someone", "echo.it", {"n": 1}, timeout=10))
            header, body = await _recv(router)
            await answer(header, {"got": body["n"]})
            assert await asyncio.wait_for(call, 10) == {"got": 1}

            loop = asyncio.get_running_loop()
            for target, code in (("someone", "timeout"), ("adapter/x", "unavailable")):
                began = loop.time()
                with pytest.raises(RoostError) as raised:
                    await peer.call(target, "echo.never", {}, timeout=0.3)
                assert raised.value.code == code
                assert 0.3 <= loop.time() - began < 5
                late, _ = await _recv(router)
                await answer(late, {"late": True})  # after its deadline: nobody waits for it
            assert not peer._pending and not peer._targets

            call = asyncio.create_task(peer.call("someone", "echo.it", {"n": 2}, timeout=10))
            header, body = await _recv(router)
            await answer(header, {"got": body["n"]})
            assert await asyncio.wait_for(call, 10) == {"got": 2}
        finally:
            await _stop(peer, task)

    asyncio.run(main())
