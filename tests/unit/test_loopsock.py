"""A zmq socket read straight from the asyncio loop (roost.broker.loopsock), over inproc."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Iterator
from typing import Any

import pytest
import zmq

from roost.broker import loopsock
from roost.broker.loopsock import LoopSocket
from tests import kit


@pytest.fixture
def ctx() -> Iterator[zmq.Context[Any]]:
    context: zmq.Context[Any] = zmq.Context()
    yield context
    context.destroy(linger=0)


def pair(ctx: zmq.Context[Any], name: str) -> tuple[zmq.Socket[Any], zmq.Socket[Any]]:
    router: zmq.Socket[Any] = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.ROUTER_MANDATORY, 1)
    router.bind(f"inproc://{name}")
    dealer: zmq.Socket[Any] = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.ROUTING_ID, b"\x01dealer")
    dealer.connect(f"inproc://{name}")
    return router, dealer


def test_every_message_is_handed_on_in_order_past_a_batch(ctx: zmq.Context[Any]) -> None:
    async def main() -> None:
        router, dealer = pair(ctx, "order")
        got: list[bytes] = []
        served = LoopSocket(router, lambda frames: got.append(frames[-1].bytes))
        served.start()
        n = loopsock.BATCH * 3 + 7
        for i in range(n):
            dealer.send_multipart([b"h", str(i).encode()])
        await kit.until(lambda: len(got) == n, "every message")
        assert got == [str(i).encode() for i in range(n)]
        served.close()

    asyncio.run(main())


def test_a_send_outside_a_drain_does_not_strand_what_arrived_meanwhile(
    ctx: zmq.Context[Any],
) -> None:
    """libzmq's descriptor is edge-triggered and any call may consume its signal: messages that
    arrive while the socket sends from a timer are still read."""

    async def main() -> None:
        router, dealer = pair(ctx, "edge")
        got: list[bytes] = []
        served = LoopSocket(dealer, lambda frames: got.append(frames[0].bytes))
        served.start()
        dealer.send(b"hello")  # so the ROUTER knows the dealer's routing id
        assert router.recv_multipart()[0] == b"\x01dealer"
        for i in range(200):
            router.send_multipart([b"\x01dealer", str(i).encode()])
            assert served.send([b"out"]) is True  # a send from outside any drain
            await asyncio.sleep(0)
        await kit.until(lambda: len(got) == 200, "every message")
        served.close()

    asyncio.run(main())


def test_send_says_gone_or_full_without_blocking(ctx: zmq.Context[Any]) -> None:
    async def main() -> None:
        router, _ = pair(ctx, "gone")
        served = LoopSocket(router, lambda frames: None)
        served.start()
        assert served.send([b"\x01nobody", b"x"]) is False  # EHOSTUNREACH: not there
        sink: zmq.Socket[Any] = ctx.socket(zmq.ROUTER)  # never read: its pipe fills
        sink.setsockopt(zmq.RCVHWM, 1)
        sink.bind("inproc://full")
        plain, queued = (LoopSocket(ctx.socket(zmq.DEALER), lambda f: None) for _ in range(2))
        queued = LoopSocket(queued.sock, lambda frames: None, queue=3)
        for sock in (plain, queued):
            sock.sock.setsockopt(zmq.SNDHWM, 1)
            sock.sock.connect("inproc://full")
        results = [plain.send([b"x"]) for _ in range(20)]
        assert results[0] is True and results[-1] is None  # full: said so, nothing blocked
        sent = [queued.send([str(i).encode()]) for i in range(20)]
        assert queued.queued == 3 and queued.shedding  # kept 3, in order; shed the rest
        assert sent[-1] is None
        for sock in (served, plain, queued):
            sock.close()

    asyncio.run(main())


def test_a_queue_still_flushes_when_a_receive_took_the_signal_that_the_pipe_drained(
    ctx: zmq.Context[Any],
) -> None:
    """The pipe's "writable again" is a command on the socket's descriptor like any other, and a
    receive consumes it as readily as a send: a queue that met a full pipe still goes out when the
    pipe drained while the socket was being read. Here the handler of the one message that comes
    in reads the far end, so the signal that the pipe has room arrives in the middle of a drain."""

    async def main() -> None:
        router: zmq.Socket[Any] = ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.RCVHWM, 1)
        router.bind("inproc://drained")
        got: list[bytes] = []

        def read_far_end(frames: list[zmq.Frame]) -> None:
            while router.poll(0):
                got.append(router.recv_multipart()[-1])

        dealer: zmq.Socket[Any] = ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.SNDHWM, 1)
        dealer.setsockopt(zmq.ROUTING_ID, b"\x01dealer")
        dealer.connect("inproc://drained")
        served = LoopSocket(dealer, read_far_end, queue=100)
        served.start()
        n = 0
        while served.queued < 10:  # the pipe is full: these sends wait in the queue
            assert served.send([str(n).encode()]) is True
            n += 1
        await asyncio.sleep(0)  # the drain the sends scheduled: the pipe is still full
        assert served.queued == 10
        router.send_multipart([b"\x01dealer", b"read the far end"])

        def all_arrived() -> bool:
            read_far_end([])  # the far end goes on reading
            return len(got) == n

        await kit.until(all_arrived, "the queued messages to go out")
        assert got == [str(i).encode() for i in range(n)] and served.queued == 0
        served.close()

    asyncio.run(main())


STRESS_SEEDS = [int(s) for s in os.environ.get("ROOST_LOOPSOCK_SEEDS", "1 2 3 4 5 6").split()]


@pytest.mark.parametrize("seed", STRESS_SEEDS)
def test_random_traffic_both_ways_arrives_once_in_order(ctx: zmq.Context[Any], seed: int) -> None:
    """A queueing socket (an actor's DEALER) and a plain one (the broker's ROUTER) over pipes of
    a few messages, driven at random: bursts sent from the loop, from timers and from inside the
    other side's handler (inside a drain), the ROUTER's reading paused and resumed so that the
    DEALER's pipe fills and its queue grows (and sheds past its limit), the ROUTER echoing some
    messages back into a pipe that may be full. Every message a send said True to arrives once,
    in the order sent, and none it said None or False to arrives; nothing is stranded. Longer
    runs: ``ROOST_LOOPSOCK_SEEDS="$(seq 1 200)"``; a failure names its seed."""
    rng = random.Random(seed)

    async def main() -> None:
        router: zmq.Socket[Any] = ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        dealer: zmq.Socket[Any] = ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.ROUTING_ID, b"\x01dealer")
        for sock in (router, dealer):
            sock.setsockopt(zmq.SNDHWM, rng.randint(1, 8))
            sock.setsockopt(zmq.RCVHWM, rng.randint(1, 8))
        router.bind(f"inproc://stress-{seed}")
        dealer.connect(f"inproc://stress-{seed}")
        sent_up: list[bytes] = []  # what the DEALER's sends said True to, in order
        sent_down: list[bytes] = []  # what the ROUTER's echoes said True to
        got_up: list[bytes] = []
        got_down: list[bytes] = []
        counter = iter(range(1_000_000))
        loop = asyncio.get_running_loop()

        def up(n: int) -> None:
            for _ in range(n):
                payload = str(next(counter)).encode()
                if actor.send([payload]) is True:
                    sent_up.append(payload)

        def on_router(frames: list[zmq.Frame]) -> None:
            payload = frames[-1].bytes
            got_up.append(payload)
            if rng.random() < 0.3:
                echo = b"echo " + payload
                if broker.send([frames[0].bytes, echo]) is True:
                    sent_down.append(echo)
            if rng.random() < 0.05:
                up(rng.randint(1, 5))  # a send from inside the broker's drain

        def on_dealer(frames: list[zmq.Frame]) -> None:
            got_down.append(frames[-1].bytes)
            if rng.random() < 0.2:
                up(rng.randint(1, 3))  # a send from inside the actor's own drain

        actor = LoopSocket(dealer, on_dealer, queue=rng.choice([4, 32, 256]), name="actor")
        broker = LoopSocket(router, on_router, name="broker")
        actor.start()
        broker.start()
        paused = False
        for _ in range(300):
            action = rng.random()
            if action < 0.4:
                up(rng.randint(1, 20))
            elif action < 0.55:
                loop.call_later(rng.random() / 500, up, rng.randint(1, 10))
            elif action < 0.65:
                if paused:
                    broker.start()
                else:
                    broker.stop()
                paused = not paused
            if rng.random() < 0.5:
                await asyncio.sleep(0 if rng.random() < 0.7 else rng.random() / 1000)
        if paused:
            broker.start()
        await asyncio.sleep(0.01)  # the last timers
        await kit.until(
            lambda: got_up == sent_up and got_down == sent_down and not actor.queued,
            f"every accepted message (seed {seed}: up {len(got_up)}/{len(sent_up)}, "
            f"down {len(got_down)}/{len(sent_down)}, queued {actor.queued})",
        )
        assert not actor.shedding, f"seed {seed}"
        assert len(set(got_up)) == len(got_up), f"seed {seed}: a message arrived twice"
        actor.close()
        broker.close()

    asyncio.run(main())
