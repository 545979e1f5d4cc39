"""The msgpack codec and its limits, and the routing header (roost.wire.protocol)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.wire.errors import RoostError
from roost.wire.protocol import (
    BODY_LIMIT,
    ERROR,
    HEADER_LIMIT,
    KINDS,
    MAX_ARRAY,
    MAX_DEPTH,
    MAX_MAP,
    PROTOCOL_VERSION,
    REQUEST,
    RESPONSE,
    Header,
    HeaderError,
    pack,
    reply_header,
    unpack,
)


def nested(levels: int, leaf: Any = 1) -> dict[str, Any]:
    """A map whose leaf sits inside ``levels`` containers (the top map counts as one)."""
    value = leaf
    for _ in range(levels - 1):
        value = [value]
    return {"a": value}


def refusal(data: bytes, **kwargs: Any) -> RoostError:
    with pytest.raises(RoostError) as info:
        unpack(data, **kwargs)
    return info.value


# -- pack / unpack -------------------------------------------------------------------------------


def test_round_trip_keeps_types() -> None:
    body = {
        "s": "text",
        "b": b"\x00\xff",
        "i": -7,
        "f": 1.5,
        "n": None,
        "t": True,
        "l": [1, "two", [3]],
        "m": {"k": {"deep": "v"}},
    }
    assert unpack(pack(body)) == body


def test_bytes_stay_bytes_and_strings_stay_strings() -> None:
    out = unpack(pack({"b": b"raw", "s": "raw"}))
    assert isinstance(out["b"], bytes)
    assert isinstance(out["s"], str)


def test_over_limit_is_frame_too_large() -> None:
    data = pack({"a": b"x" * BODY_LIMIT})
    assert len(data) > BODY_LIMIT
    err = refusal(data)
    assert err.code == "frame-too-large"
    assert str(BODY_LIMIT) in err.message


def test_custom_limit_and_name_are_used() -> None:
    err = refusal(pack({"a": "x" * 100}), limit=50, what="header")
    assert err.code == "frame-too-large"
    assert err.message.startswith("header")


def test_exactly_at_limit_is_accepted() -> None:
    data = pack({"a": "x" * 100})
    assert unpack(data, limit=len(data)) == {"a": "x" * 100}


def test_one_byte_over_the_limit_is_frame_too_large() -> None:
    data = pack({"a": "x" * 100})
    assert refusal(data, limit=len(data) - 1).code == "frame-too-large"


@pytest.mark.parametrize("value", [[1, 2], "text", 7, None, b"bytes"])
def test_non_map_is_bad_request(value: Any) -> None:
    err = refusal(msgpack.packb(value, use_bin_type=True))
    assert err.code == "bad-request"
    assert "map" in err.message


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\xc1", id="never-used-byte"),
        pytest.param(pack({"a": "hello"})[:-2], id="truncated"),
        pytest.param(pack({"a": 1}) + b"\x01", id="extra-data"),
        pytest.param(pack({"a": 1}) + pack({"b": 2}), id="two-values"),
        pytest.param(b"\x81\xa1a\xa1\xff", id="invalid-utf8"),
        pytest.param(msgpack.packb({1: 2}), id="int-key"),
        pytest.param(msgpack.packb({"a": msgpack.ExtType(1, b"x")}), id="ext-type"),
    ],
)
def test_invalid_msgpack_is_bad_request(data: bytes) -> None:
    assert refusal(data).code == "bad-request"


def test_nesting_up_to_max_depth_is_accepted() -> None:
    body = nested(MAX_DEPTH)
    assert unpack(pack(body)) == body


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, MAX_DEPTH + 10])
def test_nesting_deeper_than_max_depth_is_bad_request(levels: int) -> None:
    err = refusal(pack(nested(levels)))
    assert err.code == "bad-request"
    assert str(MAX_DEPTH) in err.message


def test_nesting_through_maps_counts_too() -> None:
    value: Any = 1
    for _ in range(MAX_DEPTH + 1):
        value = {"k": value}
    assert refusal(pack(value)).code == "bad-request"


def test_very_deep_nesting_is_bad_request_not_a_crash() -> None:
    data = b"\x81\xa1a" + b"\x91" * 5000 + b"\x01"
    assert refusal(data).code == "bad-request"


def test_array_of_max_length_is_accepted() -> None:
    assert len(unpack(pack({"a": [0] * MAX_ARRAY}))["a"]) == MAX_ARRAY


def test_array_longer_than_max_is_bad_request() -> None:
    assert refusal(pack({"a": [0] * (MAX_ARRAY + 1)})).code == "bad-request"


def test_map_of_max_size_is_accepted() -> None:
    assert len(unpack(pack({str(i): 0 for i in range(MAX_MAP)}))) == MAX_MAP


def test_map_larger_than_max_is_bad_request() -> None:
    assert refusal(pack({str(i): 0 for i in range(MAX_MAP + 1)})).code == "bad-request"


def test_inner_map_larger_than_max_is_bad_request() -> None:
    assert refusal(pack({"m": {str(i): 0 for i in range(MAX_MAP + 1)}})).code == "bad-request"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=256))
def test_random_bytes_give_a_map_or_roost_error(data: bytes) -> None:
    try:
        out = unpack(data)
    except RoostError as err:
        assert err.code in ("bad-request", "frame-too-large")
    else:
        assert isinstance(out, dict)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=256))
def test_random_bytes_inside_a_map_give_a_map_or_roost_error(tail: bytes) -> None:
    # A fixmap header with one "a" key, so the random part is parsed as a nested value.
    try:
        out = unpack(b"\x81\xa1a" + tail)
    except RoostError as err:
        assert err.code == "bad-request"
    else:
        assert isinstance(out, dict)


# -- Header --------------------------------------------------------------------------------------


def test_header_round_trip() -> None:
    header = Header(
        kind=REQUEST,
        rid="r1",
        method="session.list",
        target="node",
        sender="c/1",
        session={"generation": 2},
        grant="g",
        op="o1",
        extra={"x-trace": [1, 2]},
    )
    assert Header.decode(header.encode()) == header


def test_header_to_wire_uses_short_keys_and_omits_empty_fields() -> None:
    assert Header(kind=REQUEST, rid="r1").to_wire() == {
        "v": PROTOCOL_VERSION,
        "k": REQUEST,
        "id": "r1",
    }


def test_header_extra_keys_survive_decode() -> None:
    data = pack({"v": 1, "k": "event", "topic": "record.state", "seq": 9})
    header = Header.decode(data)
    assert header.extra == {"topic": "record.state", "seq": 9}
    assert header.to_wire()["topic"] == "record.state"


def test_header_version_defaults_when_absent() -> None:
    assert Header.decode(pack({"k": "ping"})).version == PROTOCOL_VERSION


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_known_kind_decodes(kind: str) -> None:
    assert Header.decode(Header(kind=kind).encode()).kind == kind


@pytest.mark.parametrize("wire", [{"k": "shout"}, {"k": 3}, {"v": 1}, {"k": ""}])
def test_header_unknown_or_missing_kind_is_bad_request(wire: dict[str, Any]) -> None:
    with pytest.raises(RoostError) as info:
        Header.decode(pack(wire))
    assert info.value.code == "bad-request"
    assert "'k'" in info.value.message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("v", "1"),
        ("v", True),
        ("v", 1.0),
        ("id", 5),
        ("m", b"m"),
        ("t", 0),
        ("f", [1]),
        ("g", 1),
        ("op", {}),
        ("s", [1]),
        ("s", "session"),
    ],
)
def test_header_wrong_typed_field_is_bad_request(key: str, value: Any) -> None:
    with pytest.raises(HeaderError) as info:
        Header.decode(pack({"k": REQUEST, "id": "r7", key: value}))
    assert info.value.code == "bad-request"
    assert repr(key) in info.value.message
    assert info.value.detail == {"field": key}
    assert info.value.rid == ("" if key == "id" else "r7")  # a readable id is kept


@pytest.mark.parametrize("key", ["v", "id", "m", "t", "f", "g", "op", "s"])
def test_a_nil_header_field_counts_as_absent(key: str) -> None:
    assert Header.decode(pack({"k": REQUEST, key: None})) == Header(kind=REQUEST)


def test_a_nil_generation_counts_as_absent_and_other_session_keys_stay() -> None:
    header = Header.decode(pack({"k": REQUEST, "s": {"generation": None, "x": 1}}))
    assert header.session == {"x": 1}


@pytest.mark.parametrize("generation", ["1", True, 1.5, [1]])
def test_a_generation_that_is_not_an_integer_is_bad_request(generation: Any) -> None:
    with pytest.raises(RoostError) as info:
        Header.decode(pack({"k": REQUEST, "s": {"generation": generation}}))
    assert info.value.code == "bad-request" and "s.generation" in info.value.message
    assert info.value.detail == {"field": "s.generation"}
    assert Header.decode(pack({"k": REQUEST, "s": {"generation": 3}})).session == {"generation": 3}


def test_header_over_header_limit_is_frame_too_large() -> None:
    data = pack({"k": REQUEST, "pad": "x" * HEADER_LIMIT})
    with pytest.raises(RoostError) as info:
        Header.decode(data)
    assert info.value.code == "frame-too-large"


def test_reply_header_answers_the_sender() -> None:
    request = Header(kind=REQUEST, rid="r9", method="session.show", target="node", sender="c/4")
    reply = reply_header(request)
    assert (reply.kind, reply.rid, reply.target, reply.method) == (RESPONSE, "r9", "c/4", "")


def test_reply_header_for_an_error() -> None:
    request = Header(kind=REQUEST, rid="r9", sender="c/4")
    reply = reply_header(request, error=True)
    assert (reply.kind, reply.rid, reply.target) == (ERROR, "r9", "c/4")
