"""A zmq socket read straight from the asyncio loop (roost.broker.loopsock), over inproc."""

from __future__ import annotations

import asyncio
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
