"""systemd's readiness protocol (runtime/process.sd_notify, announce): one datagram on
$NOTIFY_SOCKET, a path or an abstract (@) name; nothing sent, and no error, without systemd."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from roost.actors.runtime import process


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify")
    sock.bind(path)
    sock.settimeout(5)
    try:
        yield sock, path
    finally:
        sock.close()


def test_a_message_reaches_the_socket(
    listener: tuple[socket.socket, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, path = listener
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    assert process.sd_notify("READY=1\nSTATUS=serving")
    assert sock.recv(4096) == b"READY=1\nSTATUS=serving"


def test_an_abstract_socket_name(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"roost-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        assert process.sd_notify("STOPPING=1")
        assert sock.recv(4096) == b"STOPPING=1"


def test_without_systemd_nothing_is_sent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert not process.sd_notify("READY=1")
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "nobody-listens"))
    assert not process.sd_notify("READY=1")


def test_the_ready_line_is_also_the_readiness(
    listener: tuple[socket.socket, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, path = listener
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    saved = os.dup(1)  # announce sends stdout to /dev/null after its line
    try:
        process.announce({"ready": {"node_id": "n-1"}})
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    message = sock.recv(4096).decode()
    assert message.startswith("READY=1\n") and f"MAINPID={os.getpid()}" in message
