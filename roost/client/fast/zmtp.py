"""A minimal ZMTP 3 client: one DEALER conversation with a ROUTER, without libzmq or pyzmq.

``roost ls``'s fast path (``roost.cli.quick``) asks its local node two questions over it and
exits; importing pyzmq alone would cost that start more than the whole conversation. It speaks
ZMTP 3.1 (https://rfc.zeromq.org/spec/37/) as far as a DEALER that sends a request and reads
its reply needs: the NULL mechanism (the local node's ipc endpoint has no CURVE), the greeting
and READY, short and long frames, the MORE flag. Of the commands the peer may send it answers
PING with PONG (every roost ROUTER sends ZMTP heartbeats; a silent client would be dropped) and
skips the rest. Anything else that is not as expected (a peer that closes, a malformed frame, a
frame over ``max_frame``, the deadline) raises ``ZmtpError``, and a failure of the socket itself
(nothing listening, a reset) ``OSError``: the caller then asks again through pyzmq (the click
CLI's ``Client``).

Blocking, one socket, a deadline over the whole conversation: a CLI command is one exchange.
"""

from __future__ import annotations

import _socket  # not socket: its enum conversions of every constant cost ~5 ms of the start
import time

from roost.wire.limits import HARD_FRAME_LIMIT, MAX_FRAMES

MORE, LONG, COMMAND = 0x01, 0x02, 0x04
# signature (0xff, 8 bytes of padding, 0x7f), version 3.1, mechanism NULL, as-server 0, filler
GREETING = b"\xff" + bytes(8) + b"\x7f" + b"\x03\x01" + b"NULL".ljust(20, b"\x00") + bytes(32)
MAX_FRAME = HARD_FRAME_LIMIT  # the largest frame taken


class ZmtpError(Exception):
    """The conversation did not go as a ZMTP peer's should (or not in time)."""


def _command(name: bytes, body: bytes) -> bytes:
    return bytes([len(name)]) + name + body


def _property(name: bytes, value: bytes) -> bytes:
    return bytes([len(name)]) + name + len(value).to_bytes(4, "big") + value


def frame(data: bytes, flags: int = 0) -> bytes:
    """One frame on the wire: flags, size (one byte, or eight when it does not fit), data."""
    if len(data) > 255:
        return bytes([flags | LONG]) + len(data).to_bytes(8, "big") + data
    return bytes([flags, len(data)]) + data


def parse_endpoint(endpoint: str) -> tuple[int, str | tuple[str, int]]:
    """``ipc://PATH`` (``@NAME``: Linux's abstract namespace) or ``tcp://HOST:PORT`` on loopback,
    as an address family and a socket address; ``ZmtpError`` for anything else."""
    if endpoint.startswith("ipc://") and len(endpoint) > len("ipc://"):
        path = endpoint[len("ipc://") :]
        return _socket.AF_UNIX, "\0" + path[1:] if path.startswith("@") else path
    if endpoint.startswith("tcp://"):
        host, _, port = endpoint[len("tcp://") :].rpartition(":")
        host = host.strip("[]")
        if port.isdigit() and host in ("127.0.0.1", "localhost", "::1"):
            family = _socket.AF_INET6 if host == "::1" else _socket.AF_INET
            return family, (host, int(port))
    raise ZmtpError(f"not an endpoint this client reaches: {endpoint}")


class Dealer:
    """A connected, greeted DEALER; ``send`` a message, ``recv`` the next one."""

    def __init__(self, endpoint: str, timeout: float, max_frame: int = MAX_FRAME) -> None:
        self._deadline = time.monotonic() + timeout
        self.max_frame = max_frame
        self.pings = 0  # PINGs answered (tests watch this)
        family, address = parse_endpoint(endpoint)
        self._sock = _socket.socket(family, _socket.SOCK_STREAM)
        try:
            self._sock.settimeout(max(timeout, 0.001))
            try:
                self._sock.connect(address)
            except TimeoutError:
                raise ZmtpError("no answer in time") from None
            self._handshake()
        except BaseException:
            self._sock.close()
            raise

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Dealer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, frames: list[bytes]) -> None:
        last = len(frames) - 1
        self._sendall(b"".join(frame(f, MORE if i < last else 0) for i, f in enumerate(frames)))

    def extend(self, seconds: float) -> None:
        """Move the deadline to ``seconds`` from now (a request that may take longer to answer
        than the connection took to set up)."""
        self._deadline = time.monotonic() + seconds

    def readable(self, seconds: float) -> bool:
        """Whether bytes wait to be read within ``seconds`` (and the deadline), none consumed;
        a closed connection counts (``recv`` then says so)."""
        self._sock.settimeout(max(min(seconds, self._remaining()), 0.001))
        try:
            self._sock.recv(1, _socket.MSG_PEEK)
        except TimeoutError:
            return False
        return True

    def recv(self) -> list[bytes]:
        """The next message's frames; commands between them are answered or skipped."""
        frames: list[bytes] = []
        while True:
            flags, data = self._frame()
            if flags & COMMAND:
                self._on_command(data)
                continue
            frames.append(data)
            if not flags & MORE:
                return frames
            if len(frames) >= MAX_FRAMES:
                raise ZmtpError(f"a message of more than {MAX_FRAMES} frames")

    def _handshake(self) -> None:
        self._sendall(GREETING)
        peer = self._read(64)
        if peer[0] != 0xFF or peer[9] & 0x01 != 0x01 or peer[10] < 3:
            raise ZmtpError("the peer is not a ZMTP 3 peer")
        if peer[12:32].rstrip(b"\x00") != b"NULL":
            raise ZmtpError("the peer wants a security mechanism other than NULL")
        ready = _command(b"READY", _property(b"Socket-Type", b"DEALER"))
        self._sendall(frame(ready, COMMAND))
        flags, data = self._frame()
        if not flags & COMMAND or not data.startswith(b"\x05READY"):
            raise ZmtpError("the peer did not answer READY")  # ERROR, or not a command at all
        if b"\x0bSocket-Type\x00\x00\x00\x06ROUTER" not in data:
            raise ZmtpError("the peer is not a ROUTER")

    def _on_command(self, data: bytes) -> None:
        if data.startswith(b"\x04PING") and len(data) >= 7:
            context = data[7:23]  # after the TTL (2 bytes), at most 16 bytes, sent back as is
            self._sendall(frame(_command(b"PONG", context), COMMAND))
            self.pings += 1
        elif data.startswith(b"\x05ERROR"):
            raise ZmtpError("the peer sent ERROR")

    def _frame(self) -> tuple[int, bytes]:
        flags, size = self._read(2)
        if flags & 0xF8:
            raise ZmtpError(f"a frame with reserved flags set ({flags:#x})")
        if flags & LONG:
            size = int.from_bytes(bytes([size]) + self._read(7), "big")
        if size > self.max_frame:
            raise ZmtpError(f"a frame of {size} bytes; the limit is {self.max_frame}")
        return flags, self._read(size)

    def _read(self, size: int) -> bytes:
        """Exactly ``size`` bytes, however the kernel hands them over, before the deadline."""
        buf = bytearray(size)
        view, got = memoryview(buf), 0
        while got < size:
            self._sock.settimeout(self._remaining())
            try:
                n = self._sock.recv_into(view[got:])
            except TimeoutError:
                raise ZmtpError("no answer in time") from None
            if n == 0:
                raise ZmtpError("the peer closed the connection")
            got += n
        return bytes(buf)

    def _sendall(self, data: bytes) -> None:
        self._sock.settimeout(self._remaining())
        try:
            self._sock.sendall(data)
        except TimeoutError:
            raise ZmtpError("no answer in time") from None

    def _remaining(self) -> float:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise ZmtpError("no answer in time")
        return remaining
