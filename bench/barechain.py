"""A baseline of figure 2: the accepted prompt's path, bare. Three processes, as a node has them,
and the same three request/reply round trips through a Python ROUTER, nothing decoded:

- the "daemon": a ROUTER bound on ``ENDPOINT`` and, in a thread of the same process, the "node"
  (a DEALER): a request from a client is sent on to the "supervisor", whose answer goes back;
- the "supervisor" process: each request is sent on to the "store", whose answer goes back;
- the "store" process: each request is one SQLite WAL commit (synchronous=NORMAL) of an
  event-shaped row in ``DB``, then the answer.

Each message carries its destination as the frame in front; the ROUTER swaps it for the sender's
routing id (as roost's broker routes on the header). Blocking sockets, no asyncio, no msgpack:
this is what three routed round trips and one commit cost in Python on this machine, the floor
the prompt's path stands on. A client sends ``[b"node", header, body]`` and gets back
``[b"node", header, b"ok"]``. Prints ``ready`` once all three serve; runs until killed.

    python bench/barechain.py ipc:///tmp/x/chain /tmp/x/chain.db
"""

from __future__ import annotations

import ctypes
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from typing import Any

import zmq

ROUTER_ITSELF = b"-"  # a destination the ROUTER keeps: a hello, so it knows the sender


def dealer(ctx: zmq.Context[Any], endpoint: str, name: bytes) -> zmq.Socket[Any]:
    sock: zmq.Socket[Any] = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, name)
    sock.connect(endpoint)
    sock.send_multipart([ROUTER_ITSELF, b"hello"])
    return sock


def relay(sock: zmq.Socket[Any], onward: bytes) -> None:
    """Serve ``[sender, header, body]``: ask ``onward``, answer the sender with its answer."""
    while True:
        sender, header, body = sock.recv_multipart()
        sock.send_multipart([onward, header, body])
        _, _, answer = sock.recv_multipart()
        sock.send_multipart([sender, header, answer])


def store(sock: zmq.Socket[Any], path: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL, "
        "kind TEXT, record_id TEXT, generation INTEGER, data BLOB)"
    )
    while True:
        sender, header, body = sock.recv_multipart()
        conn.execute("BEGIN")
        conn.execute(
            "INSERT INTO events (ts, kind, record_id, generation, data) VALUES (?,?,?,?,?)",
            (time.time(), "session.input", "r0", 1, body),
        )
        conn.execute("COMMIT")
        sock.send_multipart([sender, header, b"ok"])


def child(role: str, endpoint: str, path: str) -> None:
    # Killed with the daemon (the bench stops it with SIGKILL): PR_SET_PDEATHSIG, Linux's.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    if os.getppid() != int(os.environ["BARECHAIN_PARENT"]):
        return  # the daemon died before the line above
    ctx: zmq.Context[Any] = zmq.Context()
    if role == "supervisor":
        relay(dealer(ctx, endpoint, b"supervisor"), b"store")
    else:
        store(dealer(ctx, endpoint, b"store"), path)


def main() -> None:
    if sys.argv[1] in ("supervisor", "store"):
        child(*sys.argv[1:4])
        return
    endpoint, path = sys.argv[1], sys.argv[2]
    ctx: zmq.Context[Any] = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.bind(endpoint)
    node = dealer(ctx, endpoint, b"node")
    children = [
        subprocess.Popen(
            [sys.executable, __file__, role, endpoint, path],
            stdin=subprocess.DEVNULL,
            env={**os.environ, "BARECHAIN_PARENT": str(os.getpid())},
        )
        for role in ("supervisor", "store")
    ]
    waiting = {b"node", b"supervisor", b"store"}
    while waiting:
        sender, _, _ = router.recv_multipart()
        waiting.discard(sender)
    threading.Thread(target=relay, args=(node, b"supervisor"), daemon=True).start()
    print("ready", flush=True)
    try:
        while True:
            sender, to, *rest = router.recv_multipart()
            if to != ROUTER_ITSELF:
                router.send_multipart([to, sender, *rest])
    finally:
        for proc in children:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
