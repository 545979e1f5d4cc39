"""The baseline of figure 1: a bare Python forwarding hop, DEALER -> ROUTER -> DEALER and back.

One process, two threads, like the node daemon's broker and node actor in one process: a ROUTER
bound on ``ENDPOINT`` forwards each client's ``[header, body]`` to a worker DEALER (with the
client's routing id as the frame in front, so the worker's answer can be routed back), and the
worker sends the same two frames back. Nothing is decoded: this is the floor a Python broker
and actor stand on. Prints ``ready`` once it serves; runs until killed.

    python bench/barehop.py ipc:///tmp/x/hop
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import zmq

WORKER = b"worker"


def worker(ctx: zmq.Context[Any], endpoint: str, connected: threading.Event) -> None:
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, WORKER)
    sock.connect(endpoint)
    sock.send_multipart([b"hello"])  # so the ROUTER knows the worker's routing id
    connected.set()
    while True:
        sock.send_multipart(sock.recv_multipart())  # [client id, header, body], straight back


def main() -> None:
    endpoint = sys.argv[1]
    ctx: zmq.Context[Any] = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.bind(endpoint)
    connected = threading.Event()
    threading.Thread(target=worker, args=(ctx, endpoint, connected), daemon=True).start()
    connected.wait()
    assert router.recv_multipart() == [WORKER, b"hello"]
    print("ready", flush=True)
    while True:
        frames = router.recv_multipart()
        if frames[0] == WORKER:  # [worker, client id, header, body] -> [client id, header, body]
            router.send_multipart(frames[1:])
        else:  # [client id, header, body] -> [worker, client id, header, body]
            router.send_multipart([WORKER, *frames])


if __name__ == "__main__":
    main()
