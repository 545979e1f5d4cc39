"""Typed keys in ``roost attach`` go in bursts (roost.cli.attach.burst): one event per burst."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from roost.cli import attach


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    r, w = os.pipe()
    try:
        yield r, w
    finally:
        os.close(r)
        os.close(w)


def test_keys_already_waiting_join_the_first(pipe: tuple[int, int]) -> None:
    r, w = pipe
    os.write(w, b"ello")
    assert attach.burst(r, b"h") == b"hello"


def test_a_key_that_is_not_text_ends_the_burst_at_once(pipe: tuple[int, int]) -> None:
    r, w = pipe
    os.write(w, b"next")
    assert attach.burst(r, b"go\r") == b"go\r"  # Enter goes without waiting
    assert attach.burst(r, b"\x1b[A") == b"\x1b[A"
    assert os.read(r, 16) == b"next"  # left for the next burst


def test_a_burst_ends_when_the_keys_stop(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    r, _ = pipe
    monkeypatch.setattr(attach, "BURST_IDLE_S", 0.01)
    assert attach.burst(r, b"x") == b"x"


def test_a_burst_is_bounded_in_size(pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    r, w = pipe
    monkeypatch.setattr(attach, "BURST_BYTES", 8)
    os.write(w, b"b" * 20)
    assert attach.burst(r, b"a") == b"a" + b"b" * 7
