"""The memory baseline of figure 3: a bare pyzmq asyncio actor, what a supervisor needs at least.

An asyncio loop with a ``zmq.asyncio`` DEALER connected to ``ENDPOINT`` (nothing needs to
listen there), msgpack imported and used, a one-second timer as a heartbeat would have. Prints
``ready`` once it runs; runs until killed.

    python bench/bare_actor.py ipc:///tmp/x/nowhere
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import msgpack
import zmq
import zmq.asyncio


async def main(endpoint: str) -> None:
    ctx = zmq.asyncio.Context()
    sock: zmq.asyncio.Socket = ctx.socket(zmq.DEALER)
    sock.connect(endpoint)
    hello: dict[str, Any] = {"k": "hello", "address": "session/bare"}
    msgpack.unpackb(msgpack.packb(hello))  # a DEALER with no peer would block on a send
    print("ready", flush=True)
    while True:
        if await sock.poll(1000):
            msgpack.unpackb((await sock.recv_multipart())[-1])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
