"""The minimal ZMTP client (``roost ls``'s fast path) against a real pyzmq ROUTER, and against a
hand-driven peer for what libzmq never does (split writes, closing mid-frame, a huge frame)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from roost.client.fast import zmtp
from roost.client.fast.zmtp import Dealer, ZmtpError


def wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)  # polling interval of a condition with a deadline


@pytest.fixture
def router(tmp_path: Path) -> Iterator[tuple[zmq.Socket[bytes], str]]:
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    endpoint = f"ipc://{tmp_path}/router"
    sock.bind(endpoint)
    try:
        yield sock, endpoint
    finally:
        sock.close(0)


def recv(sock: zmq.Socket[bytes], timeout: float = 10.0) -> list[bytes]:
    assert sock.poll(int(timeout * 1000)), "nothing arrived"
    return sock.recv_multipart()


def test_a_multipart_request_and_reply_with_long_frames(
    router: tuple[zmq.Socket[bytes], str],
) -> None:
    sock, endpoint = router
    long = bytes(range(256)) * 5  # 1,280 bytes: a long frame (8-byte size)
    with Dealer(endpoint, timeout=10.0) as dealer:
        dealer.send([b"header", long, b""])
        routing_id, *frames = recv(sock)
        assert frames == [b"header", long, b""]
        sock.send_multipart([routing_id, b"h" * 255, long])  # 255: the longest short frame
        assert dealer.recv() == [b"h" * 255, long]
        sock.send_multipart([routing_id, b"again"])
        assert dealer.recv() == [b"again"]


def test_tcp_loopback() -> None:
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        port = sock.bind_to_random_port("tcp://127.0.0.1")
        with Dealer(f"tcp://127.0.0.1:{port}", timeout=10.0) as dealer:
            dealer.send([b"x"])
            routing_id, frame = recv(sock)
            sock.send_multipart([routing_id, frame + b"y"])
            assert dealer.recv() == [b"xy"]
    finally:
        sock.close(0)


def test_heartbeat_pings_are_answered_so_the_router_keeps_the_connection(
    router: tuple[zmq.Socket[bytes], str], tmp_path: Path
) -> None:
    """Every roost ROUTER sends ZMTP PINGs and drops a peer silent past the timeout: a client
    waiting for a slow answer must PONG. Here the wait spans many timeouts before the reply."""
    sock, _ = router
    sock.setsockopt(zmq.HEARTBEAT_IVL, 20)
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, 60)
    endpoint = f"ipc://{tmp_path}/beating"
    sock.bind(endpoint)  # the options hold for connections on an endpoint bound after them
    got: list[Any] = []
    with Dealer(endpoint, timeout=10.0) as dealer:
        dealer.send([b"slow"])
        routing_id, _frame = recv(sock)
        waiter = threading.Thread(target=lambda: got.append(_recv_or_error(dealer)))
        waiter.start()
        wait_for(lambda: dealer.pings >= 10 or bool(got))  # >= 200 ms: past 3 timeouts
        sock.send_multipart([routing_id, b"answer"])
        waiter.join(10)
    assert got == [[b"answer"]]
    assert dealer.pings >= 10


def _recv_or_error(dealer: Dealer) -> list[bytes] | ZmtpError:
    try:
        return dealer.recv()
    except ZmtpError as err:
        return err


def test_no_answer_is_an_error_at_the_deadline(router: tuple[zmq.Socket[bytes], str]) -> None:
    _, endpoint = router
    with Dealer(endpoint, timeout=0.3) as dealer:
        dealer.send([b"unanswered"])
        with pytest.raises(ZmtpError, match="in time"):
            dealer.recv()


def test_a_frame_over_the_cap_is_refused(router: tuple[zmq.Socket[bytes], str]) -> None:
    sock, endpoint = router
    with Dealer(endpoint, timeout=10.0, max_frame=1000) as dealer:
        dealer.send([b"x"])
        routing_id, _ = recv(sock)
        sock.send_multipart([routing_id, bytes(1001)])
        with pytest.raises(ZmtpError, match="limit is 1000"):
            dealer.recv()


def test_nothing_listening_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        Dealer(f"ipc://{tmp_path}/nothing", timeout=1.0)


def test_endpoints() -> None:
    assert zmtp.parse_endpoint("ipc:///run/x/router") == (socket.AF_UNIX, "/run/x/router")
    assert zmtp.parse_endpoint("ipc://@roost") == (socket.AF_UNIX, "\0roost")
    assert zmtp.parse_endpoint("tcp://127.0.0.1:5555") == (socket.AF_INET, ("127.0.0.1", 5555))
    assert zmtp.parse_endpoint("tcp://[::1]:5555") == (socket.AF_INET6, ("::1", 5555))
    for other in ("tcp://10.0.0.1:5555", "tcp://*:5555", "inproc://x", "ipc://", "tcp://h:p"):
        with pytest.raises(ZmtpError):
            zmtp.parse_endpoint(other)


# -- a hand-driven peer -----------------------------------------------------------------------

ROUTER_READY = zmtp.frame(
    b"\x05READY\x0bSocket-Type\x00\x00\x00\x06ROUTER", zmtp.COMMAND
)  # as libzmq sends it


def serve(path: Path, script: Callable[[socket.socket], None]) -> threading.Thread:
    """A unix-socket peer that accepts one connection and runs ``script`` on it."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def run() -> None:
        conn, _ = listener.accept()
        listener.close()
        with conn:
            script(conn)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        assert chunk, "the client closed"
        data += chunk
    return data


def greet(conn: socket.socket, split: bool = False) -> None:
    """The peer's half of the handshake; ``split``: a byte per write (partial reads)."""
    out = zmtp.GREETING + ROUTER_READY
    if split:
        for i in range(len(out)):
            conn.sendall(out[i : i + 1])
    else:
        conn.sendall(out)
    read_exactly(conn, 64)  # the client's greeting
    flags, size = read_exactly(conn, 2)
    assert flags == zmtp.COMMAND
    assert read_exactly(conn, size).startswith(b"\x05READY\x0bSocket-Type\x00\x00\x00\x06DEALER")


def test_byte_by_byte_delivery_and_a_ping_between_frames(tmp_path: Path) -> None:
    pongs: list[bytes] = []

    def script(conn: socket.socket) -> None:
        greet(conn, split=True)
        ping = zmtp.frame(b"\x04PING\x00\x0actx", zmtp.COMMAND)
        out = zmtp.frame(b"a" * 300, zmtp.MORE) + ping + zmtp.frame(b"b")
        for i in range(len(out)):
            conn.sendall(out[i : i + 1])
        pongs.append(read_exactly(conn, 2 + 8))

    thread = serve(tmp_path / "peer", script)
    with Dealer(f"ipc://{tmp_path}/peer", timeout=10.0) as dealer:
        assert dealer.recv() == [b"a" * 300, b"b"]
    thread.join(10)
    assert pongs == [zmtp.frame(b"\x04PONGctx", zmtp.COMMAND)]


def test_the_peer_closing_mid_reply_is_an_error_not_a_hang(tmp_path: Path) -> None:
    def script(conn: socket.socket) -> None:
        greet(conn)
        conn.sendall(zmtp.frame(b"header", zmtp.MORE) + b"\x00\x64" + b"only ten b")  # of 100

    serve(tmp_path / "peer", script)
    peer = f"ipc://{tmp_path}/peer"
    with Dealer(peer, timeout=10.0) as dealer, pytest.raises(ZmtpError, match="closed"):
        dealer.recv()


def test_a_peer_that_is_not_a_router_is_refused(tmp_path: Path) -> None:
    def script(conn: socket.socket) -> None:
        conn.sendall(zmtp.GREETING + zmtp.frame(b"\x05READY\x0bSocket-Type\x00\x00\x00\x03PUB", 4))
        while conn.recv(4096):  # until the client hangs up
            pass

    serve(tmp_path / "peer", script)
    with pytest.raises(ZmtpError, match="not a ROUTER"):
        Dealer(f"ipc://{tmp_path}/peer", timeout=10.0)


def test_a_huge_declared_frame_is_refused_before_it_is_read(tmp_path: Path) -> None:
    def script(conn: socket.socket) -> None:
        greet(conn)
        conn.sendall(bytes([zmtp.LONG]) + (zmtp.MAX_FRAME + 1).to_bytes(8, "big"))
        while conn.recv(4096):  # until the client hangs up
            pass

    serve(tmp_path / "peer", script)
    peer = f"ipc://{tmp_path}/peer"
    with Dealer(peer, timeout=10.0) as dealer, pytest.raises(ZmtpError, match="the limit is"):
        dealer.recv()
