"""The signal channel's datagram: what a sender encodes, the receiver decodes and refuses."""

from __future__ import annotations

from typing import cast

import msgpack
import pytest

from roost.wire import signals as s


def signal(**over: object) -> s.Signal:
    sig: s.Signal = {
        "v": s.VERSION,
        "record": "r0123456789",
        "generation": 3,
        "seq": 7,
        "source": "hook",
        "kind": "turn-end",
        "at": 1.5,
        "data": {"status": "ok"},
    }
    return cast(s.Signal, {**sig, **over})


def test_round_trip() -> None:
    sig = signal(event="Stop")
    assert s.decode(s.encode(sig)) == sig


def test_long_strings_are_trimmed_and_a_huge_data_dropped() -> None:
    sig = signal(data={"message": "x" * 10_000})
    assert len(s.decode(s.encode(sig))["data"]["message"]) == s.MAX_TEXT
    many = signal(data={f"k{i}": [f"{'y' * 400}"] * 32 for i in range(32)})
    raw = s.encode(many)
    assert len(raw) <= s.MAX_DATAGRAM and s.decode(raw)["data"] == {}


@pytest.mark.parametrize(
    "raw",
    [
        b"\xc1",
        msgpack.packb([1, 2]),
        msgpack.packb({**signal(), "v": 2}),
        msgpack.packb({**signal(), "seq": "7"}),
        msgpack.packb({**signal(), "generation": True}),
        msgpack.packb({**signal(), "source": "someone"}),
        msgpack.packb({**signal(), "kind": "answer-permission"}),
        msgpack.packb({**signal(), "event": 3}),
        b"\x00" * (s.MAX_DATAGRAM + 1),
    ],
)
def test_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        s.decode(raw)
