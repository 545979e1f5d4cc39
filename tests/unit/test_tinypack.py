"""The pure-Python msgpack of ``roost ls``'s fast path (roost.client.fast.tinypack) against msgpack
itself: the same bytes out, the same objects in, and a ValueError wherever the wire's decoder
would refuse or it is not sure (the fast path then asks again through msgpack)."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import msgpack
import pytest

from roost.cli import quick
from roost.client.fast import tinypack
from roost.wire import codec as wire
from roost.wire.errors import RoostError


def value(rng: random.Random, depth: int = 0) -> Any:
    """A random value of what the wire carries, with sizes around every encoding's edges."""
    kinds = ["none", "bool", "int", "float", "str", "bytes"]
    if depth < 4:
        kinds += ["list", "dict"]
    kind = rng.choice(kinds)
    if kind == "none":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "int":
        edge = rng.choice([0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1])
        edge = rng.choice([edge, -edge, -32, -33, -128, -129, -32768, -32769, -(2**63)])
        return max(-(2**63), min(2**64 - 1, edge + rng.randint(-2, 2)))
    if kind == "float":
        return rng.choice([0.0, -0.0, 1.5, 1e300, -2.25e-300, math.inf, rng.random()])
    size = rng.choice([0, 1, 15, 16, 31, 32, 255, 256, 300, 65536])
    if kind == "str":
        return rng.choice("aé€\U0001f600") * size  # 1 to 4 bytes a character in UTF-8
    if kind == "bytes":
        return rng.randbytes(size)
    n = rng.choice([0, 1, 15, 16, 17])
    if kind == "list":
        return [value(rng, depth + 1) for _ in range(n)]
    return {f"k{i}" * rng.randint(1, 9): value(rng, depth + 1) for i in range(n)}


def test_packs_as_msgpack_does_and_reads_back_what_msgpack_reads() -> None:
    rng = random.Random(12)
    for _ in range(1500):
        obj = value(rng)
        packed = msgpack.packb(obj, use_bin_type=True)
        assert tinypack.packb(obj) == packed, obj
        assert tinypack.unpackb(packed) == msgpack.unpackb(packed, raw=False), obj


def test_other_encodings_msgpack_may_meet_are_read_the_same() -> None:
    """What another client's encoder may choose: float32, wide sizes for short values."""
    for data in (
        b"\xca" + struct.pack(">f", 1.5),
        b"\xd9\x01a",  # str8 of one byte
        b"\xda\x00\x01a",
        b"\xdb\x00\x00\x00\x01a",
        b"\xdc\x00\x01\xc0",
        b"\xdd\x00\x00\x00\x01\xc0",
        b"\xde\x00\x01\xa1a\x01",
        b"\xdf\x00\x00\x00\x01\xa1a\x01",
        b"\xcd\x00\x01",  # uint16 of a small number
        b"\xd3\xff\xff\xff\xff\xff\xff\xff\xff",
        b"\x82\xa1a\x01\xa1a\x02",  # a repeated key: the last one counts
        b"\x81\xc4\x01k\x01",  # a bin key (strict_map_key allows str and bin)
    ):
        assert tinypack.unpackb(data) == msgpack.unpackb(data, raw=False, strict_map_key=True)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xa5abc",  # cut short
        b"\x81\xa1a",
        b"\xc0\xc0",  # a second value after the first
        b"\xd4\x01\x00",  # an extension type
        b"\xc7\x00\x01",
        b"\xc1",  # never used
        b"\x81\x01\x02",  # an integer key
        b"\xa2\xff\xfe",  # not UTF-8
        b"\xdc\x27\x11" + b"\xc0" * 10001,  # past the wire's array limit
        b"\x91" * 40 + b"\xc0",  # deeper than the wire's nesting
    ],
)
def test_what_it_is_not_sure_of_is_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        tinypack.unpackb(data)


def test_its_limits_are_the_wires() -> None:
    assert (tinypack.MAX_ARRAY, tinypack.MAX_MAP, tinypack.MAX_DEPTH) == (
        wire.MAX_ARRAY,
        wire.MAX_MAP,
        wire.MAX_DEPTH,
    )
    assert (quick.PROTOCOL_VERSION, quick.HEADER_LIMIT, quick.HARD_FRAME_LIMIT) == (
        wire.PROTOCOL_VERSION,
        wire.HEADER_LIMIT,
        wire.HARD_FRAME_LIMIT,
    )
    assert tinypack.SMALL < wire.MAX_STR and tinypack.SMALL < wire.MAX_BIN


def test_the_fast_path_reads_large_frames_with_msgpack(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {"records": [{"id": f"r{i}", "name": None} for i in range(20)]}
    frame = msgpack.packb(doc, use_bin_type=True)
    assert quick._load(frame, wire.HARD_FRAME_LIMIT) == doc  # small: tinypack's

    def refuse(data: bytes) -> Any:
        raise AssertionError("a large frame went to tinypack")

    monkeypatch.setattr(tinypack, "SMALL", 16)
    monkeypatch.setattr(tinypack, "unpackb", refuse)
    assert quick._load(frame, wire.HARD_FRAME_LIMIT) == doc
    with pytest.raises(RoostError):  # msgpack's refusals are the wire's
        quick._load(b"\xd4\x01\x00" + b"\x00" * 20, wire.HARD_FRAME_LIMIT)
    with pytest.raises(quick.Handover):
        quick._load(frame, 8)
