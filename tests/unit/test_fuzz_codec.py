"""Property tests: no input makes the codec, the header or the body accessors fail other than
with a RoostError carrying the right code.

The strategies produce what a hostile or broken peer can put on the wire: every msgpack type,
recursive structures (deep nesting, containers around the size limits), raw bytes, and maps of
the wrong shape. Every property compares the outcome with an independent model of the rules in
docs/PROTOCOL.md (section 2, Encoding) rather than only checking that nothing crashed.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from roost.wire import fields
from roost.wire.errors import RoostError
from roost.wire.protocol import (
    BODY_LIMIT,
    HEADER_LIMIT,
    KINDS,
    MAX_ARRAY,
    MAX_BIN,
    MAX_DEPTH,
    MAX_MAP,
    MAX_STR,
    PROTOCOL_VERSION,
    Header,
    pack,
    unpack,
)

# derandomize: the same examples on every run (deterministic, no example database)
COMMON: dict[str, Any] = {"deadline": None, "derandomize": True, "database": None}
FAST = settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow], **COMMON)
MEDIUM = settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], **COMMON)
SLOW = settings(
    max_examples=40,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    **COMMON,
)
CODEC_CODES = ("bad-request", "frame-too-large")

# -- strategies ----------------------------------------------------------------------------------

INT64 = st.integers(min_value=-(2**63), max_value=2**64 - 1)  # what msgpack can carry
EDGE_INTS = st.sampled_from(
    [0, 1, -1, 127, 128, 255, 256, 2**31 - 1, 2**31, 2**53, 2**53 + 1, 2**63 - 1, 2**64 - 1]
)
NEGATIVE_EDGES = st.sampled_from([-(2**31), -(2**63), -129, -32769])
KEYS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "k", "v", "id", "m", "t", "f", "s", "g", "op", "text", "topic"]),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    INT64,
    EDGE_INTS,
    NEGATIVE_EDGES,
    st.floats(allow_nan=False, width=64),
    st.floats(width=32),  # a float32 widens exactly; NaN is checked apart from equality
    st.text(max_size=40),
    st.binary(max_size=40),
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=8),
        st.dictionaries(KEYS, children, max_size=8),
    )


VALUES: st.SearchStrategy[Any] = st.recursive(SCALARS, _containers, max_leaves=25)
# What msgpack can carry but the protocol refuses: bin map keys and extension types.
EXTS = st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=4))
WIRE_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.one_of(SCALARS, EXTS),
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.dictionaries(st.one_of(KEYS, st.binary(max_size=3)), children, max_size=6),
    ),
    max_leaves=25,
)


@st.composite
def deep(draw: st.DrawFn) -> Any:
    """A value wrapped in 0..80 containers (lists and maps mixed), around MAX_DEPTH."""
    levels = draw(
        st.one_of(
            st.integers(0, 80),
            st.sampled_from([MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2]),
        )
    )
    shape = draw(st.integers(0, 2**80))  # bit i: level i is a map (1) or a list (0)
    key = draw(KEYS)
    value = draw(SCALARS)
    for level in range(levels):
        value = {key: value} if shape >> level & 1 else [value]
    return value


@st.composite
def large(draw: st.DrawFn) -> Any:
    """A list or map of a size around MAX_ARRAY / MAX_MAP (or anywhere up to a bit over)."""
    element = draw(SCALARS)
    if draw(st.booleans()):
        size = draw(
            st.one_of(st.integers(0, MAX_ARRAY + 5), st.integers(MAX_ARRAY - 3, MAX_ARRAY + 3))
        )
        return [element] * size
    size = draw(st.one_of(st.integers(0, MAX_MAP + 5), st.integers(MAX_MAP - 3, MAX_MAP + 3)))
    return {f"k{i}": element for i in range(size)}


@st.composite
def large_inside(draw: st.DrawFn) -> Any:
    """A large container somewhere inside a small structure."""
    inner = draw(large())
    for _ in range(draw(st.integers(0, 3))):
        inner = {"a": inner} if draw(st.booleans()) else [inner, draw(SCALARS)]
    return inner


ANY_VALUE = st.one_of(VALUES, deep())  # large containers are slow to build: tested apart
MAPS = st.dictionaries(KEYS, ANY_VALUE, max_size=6)

# -- the model of the decoder's rules ------------------------------------------------------------


def depth_of(value: Any, depth: int = 0) -> int:
    """The deepest level a value reaches, counting the top map as level 0 like the decoder."""
    if isinstance(value, dict):
        return max((depth_of(v, depth + 1) for v in value.values()), default=depth)
    if isinstance(value, list):
        return max((depth_of(v, depth + 1) for v in value), default=depth)
    return depth


def protocol_types(value: Any) -> bool:
    """No extension types, and every map key a string (section 2, Encoding)."""
    if isinstance(value, msgpack.ExtType):
        return False
    if isinstance(value, dict):
        return all(isinstance(k, str) and protocol_types(v) for k, v in value.items())
    if isinstance(value, list):
        return all(protocol_types(v) for v in value)
    return True


def within_sizes(value: Any) -> bool:
    if isinstance(value, dict):
        return len(value) <= MAX_MAP and all(within_sizes(v) for v in value.values())
    if isinstance(value, list):
        return len(value) <= MAX_ARRAY and all(within_sizes(v) for v in value)
    if isinstance(value, str):
        return len(value.encode()) <= MAX_STR
    if isinstance(value, bytes):
        return len(value) <= MAX_BIN
    return True


def expected_code(value: Any, data: bytes, limit: int) -> str | None:
    """What ``unpack(data, limit=limit)`` must do with the encoding of ``value``: None = decode."""
    if len(data) > limit:
        return "frame-too-large"
    if not isinstance(value, dict) or not within_sizes(value) or depth_of(value) > MAX_DEPTH:
        return "bad-request"
    if not protocol_types(value):
        return "bad-request"
    return None


def same(a: Any, b: Any) -> bool:
    """Equality that also holds for NaN and keeps bool/int/float and str/bytes apart."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def packed(value: Any) -> bytes:
    data: bytes = msgpack.packb(value, use_bin_type=True)
    return data


# -- (a) pack, then unpack ------------------------------------------------------------------------


@FAST
@given(st.one_of(VALUES, WIRE_VALUES))
def test_any_structure_round_trips_or_is_refused(value: Any) -> None:
    data = packed(value)
    want = expected_code(value, data, BODY_LIMIT)
    try:
        out = unpack(data)
    except RoostError as err:
        assert err.code == want, (err.code, err.message)
    else:
        assert want is None
        assert same(out, value)


@FAST
@given(MAPS)
def test_any_map_round_trips_or_is_refused(value: dict[str, Any]) -> None:
    data = packed(value)
    try:
        out = unpack(data)
    except RoostError as err:
        assert err.code in CODEC_CODES
        assert err.code == expected_code(value, data, BODY_LIMIT), err.message
    else:
        assert expected_code(value, data, BODY_LIMIT) is None
        assert same(out, value)


@FAST
@given(st.dictionaries(KEYS, deep(), min_size=1, max_size=3))
def test_deep_nesting_is_refused_exactly_past_max_depth(value: dict[str, Any]) -> None:
    data = packed(value)
    try:
        out = unpack(data)
    except RoostError as err:
        assert err.code == "bad-request"
        assert depth_of(value) > MAX_DEPTH
    else:
        assert depth_of(value) <= MAX_DEPTH
        assert same(out, value)


@SLOW
@given(st.dictionaries(KEYS, large_inside(), min_size=1, max_size=2))
@example({"a": [0] * MAX_ARRAY})
@example({"a": [0] * (MAX_ARRAY + 1)})
@example({"a": {f"k{i}": None for i in range(MAX_MAP)}})
@example({"a": [{f"k{i}": None for i in range(MAX_MAP + 1)}]})
@example({f"k{i}": "" for i in range(MAX_MAP + 1)})
def test_large_containers_are_refused_exactly_past_the_limits(value: dict[str, Any]) -> None:
    data = packed(value)
    try:
        out = unpack(data)
    except RoostError as err:
        assert err.code == expected_code(value, data, BODY_LIMIT), err.message
    else:
        assert within_sizes(value) and depth_of(value) <= MAX_DEPTH
        assert same(out, value)


@MEDIUM
@given(MAPS, st.integers(min_value=0, max_value=4096))
def test_the_size_limit_is_checked_first(value: dict[str, Any], limit: int) -> None:
    data = packed(value)
    try:
        unpack(data, limit=limit, what="frame")
    except RoostError as err:
        assert err.code == expected_code(value, data, limit)
        if err.code == "frame-too-large":
            assert err.message.startswith("frame") and str(limit) in err.message
    else:
        assert expected_code(value, data, limit) is None


@MEDIUM
@given(MAPS, st.binary(min_size=1, max_size=16))
def test_trailing_bytes_are_refused(value: dict[str, Any], tail: bytes) -> None:
    with pytest.raises(RoostError) as info:
        unpack(packed(value) + tail)
    assert info.value.code in CODEC_CODES


@MEDIUM
@given(MAPS, st.data())
def test_truncated_encodings_are_refused(value: dict[str, Any], data: st.DataObject) -> None:
    full = packed(value)
    cut = data.draw(st.integers(0, len(full) - 1))
    with pytest.raises(RoostError) as info:
        unpack(full[:cut])
    assert info.value.code in CODEC_CODES


@MEDIUM
@given(MAPS, st.data())
def test_corrupted_encodings_give_a_map_or_roost_error(
    value: dict[str, Any], data: st.DataObject
) -> None:
    raw = bytearray(packed(value))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    try:
        out = unpack(bytes(raw))
    except RoostError as err:
        assert err.code in CODEC_CODES
    else:
        assert isinstance(out, dict) and depth_of(out) <= MAX_DEPTH and within_sizes(out)
        assert protocol_types(out)


@FAST
@given(
    st.dictionaries(st.one_of(INT64, st.floats(allow_nan=False), st.none()), SCALARS, min_size=1)
)
def test_maps_with_non_string_keys_are_refused(value: dict[Any, Any]) -> None:
    with pytest.raises(RoostError) as info:
        unpack(packed({"inner": value}))
    assert info.value.code == "bad-request"


@FAST
@given(st.integers(0, 127), st.binary(min_size=1, max_size=8))
def test_extension_types_are_refused(code: int, payload: bytes) -> None:
    with pytest.raises(RoostError) as info:
        unpack(packed({"x": msgpack.ExtType(code, payload)}))
    assert info.value.code == "bad-request"


@pytest.mark.parametrize("ext", [b"\xc7\x00\x00", b"\xc7\x00\x05", b"\xc7\x00\x7f"])
def test_empty_extension_types_are_refused(ext: bytes) -> None:
    with pytest.raises(RoostError) as info:
        unpack(b"\x81\xa1x" + ext)
    assert info.value.code == "bad-request"


def test_bin_map_keys_are_refused() -> None:
    with pytest.raises(RoostError) as info:
        unpack(packed({b"k": 1}))
    assert info.value.code == "bad-request"


# -- (b) Header.decode ----------------------------------------------------------------------------

HEADER_KEYS = ("v", "k", "id", "m", "t", "f", "s", "g", "op")
HEADER_VALUES = st.one_of(
    SCALARS,
    st.sampled_from(sorted(KINDS)),
    st.sampled_from([PROTOCOL_VERSION, 0, 2, -1, 2**63 - 1]),
    st.dictionaries(st.text(max_size=10), SCALARS, max_size=3),
    st.lists(SCALARS, max_size=3),
)
HEADER_MAPS = st.dictionaries(
    st.one_of(st.sampled_from(HEADER_KEYS), st.text(max_size=8)), HEADER_VALUES, max_size=12
)


def header_model(raw: dict[str, Any]) -> bool:
    """Whether a decoded map is a valid header (section 2, Header keys)."""
    if not isinstance(raw.get("k"), str) or raw["k"] not in KINDS:
        return False
    version = raw.get("v", PROTOCOL_VERSION)
    if not isinstance(version, int) or isinstance(version, bool):
        return False
    if not all(isinstance(raw.get(key, ""), str) for key in ("id", "m", "t", "f", "g", "op")):
        return False
    return raw.get("s") is None or isinstance(raw.get("s"), dict)


def check_header(header: Header, raw: dict[str, Any]) -> None:
    assert header.kind in KINDS
    assert isinstance(header.version, int) and not isinstance(header.version, bool)
    for value in (header.rid, header.method, header.target, header.sender, header.grant, header.op):
        assert isinstance(value, str)
    assert header.session is None or isinstance(header.session, dict)
    assert not set(header.extra) & set(HEADER_KEYS)
    assert same(header.extra, {k: v for k, v in raw.items() if k not in HEADER_KEYS})


@FAST
@given(HEADER_MAPS)
def test_header_decode_of_any_map(raw: dict[str, Any]) -> None:
    data = pack(raw)
    try:
        header = Header.decode(data)
    except RoostError as err:
        if len(data) > HEADER_LIMIT:
            assert err.code == "frame-too-large"
        else:
            assert err.code == "bad-request" and not header_model(raw), err.message
    else:
        assert header_model(raw) and len(data) <= HEADER_LIMIT
        check_header(header, raw)
        assert same(Header.decode(header.encode()).to_wire(), header.to_wire())


@MEDIUM
@given(st.dictionaries(KEYS, ANY_VALUE, max_size=4), st.sampled_from(sorted(KINDS)))
def test_header_decode_of_a_known_kind_with_any_extra(extra: dict[str, Any], kind: str) -> None:
    raw = {**extra, "k": kind}
    data = pack(raw)
    try:
        header = Header.decode(data)
    except RoostError as err:
        assert err.code in CODEC_CODES
    else:
        check_header(header, raw)


@FAST
@given(st.binary(max_size=512))
def test_header_decode_of_raw_bytes(data: bytes) -> None:
    try:
        header = Header.decode(data)
    except RoostError as err:
        assert err.code in CODEC_CODES
    else:
        assert header.kind in KINDS


@FAST
@given(HEADER_MAPS, st.data())
def test_header_decode_of_mutated_headers(raw: dict[str, Any], data: st.DataObject) -> None:
    good = bytearray(pack({"v": 1, "k": "request", "id": "r", "m": "session.list", **raw}))
    for _ in range(data.draw(st.integers(1, 3))):
        good[data.draw(st.integers(0, len(good) - 1))] = data.draw(st.integers(0, 255))
    try:
        header = Header.decode(bytes(good))
    except RoostError as err:
        assert err.code in CODEC_CODES
    else:
        assert header.kind in KINDS


@FAST
@given(st.integers(HEADER_LIMIT - 64, HEADER_LIMIT + 64))
def test_header_size_limit(size: int) -> None:
    base = pack({"k": "ping", "pad": ""})
    data = pack({"k": "ping", "pad": "x" * max(0, size - len(base) - 2)})
    try:
        Header.decode(data)
    except RoostError as err:
        assert err.code == "frame-too-large" and len(data) > HEADER_LIMIT
    else:
        assert len(data) <= HEADER_LIMIT


# -- (c) the body accessors -----------------------------------------------------------------------

FIELD_VALUES = st.one_of(
    ANY_VALUE,
    st.text(min_size=0, max_size=12),
    st.integers(-5, 20),
    st.lists(st.text(max_size=4), max_size=8),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=8),
    st.dictionaries(st.text(max_size=4), SCALARS, max_size=4),
)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def str_ok(value: Any, max_len: int, *, empty: bool = False) -> bool:
    return isinstance(value, str) and (empty or bool(value)) and len(value) <= max_len


def expect_req_str(body: dict[str, Any], key: str, kw: dict[str, Any]) -> tuple[bool, Any]:
    value = body.get(key)
    return str_ok(value, kw["max_len"]), value


def expect_opt_str(body: dict[str, Any], key: str, kw: dict[str, Any]) -> tuple[bool, Any]:
    value = body.get(key)
    return value is None or str_ok(value, kw["max_len"]), value


def expect_text(body: dict[str, Any], key: str, kw: dict[str, Any]) -> tuple[bool, Any]:
    value = body.get(key)
    return str_ok(value, kw["max_len"], empty=True), value


def expect_opt_int(body: dict[str, Any], key: str, kw: dict[str, Any]) -> tuple[bool, Any]:
    value = body.get(key)
    return value is None or (is_int(value) and kw["lo"] <= value <= kw["hi"]), value


def expect_req_int(body: dict[str, Any], key: str, kw: dict[str, Any]) -> tuple[bool, Any]:
    value = body.get(key)
    return is_int(value) and kw["lo"] <= value <= kw["hi"], value


def expect_opt_bool(body: dict[str, Any], key: str, kw: dict[str, Any]) -> tuple[bool, Any]:
    value = body.get(key, False)  # nil is refused for booleans (section 2)
    return isinstance(value, bool), value


def expect_str_map(body: dict[str, Any], key: str, kw: dict[str, Any]) -> tuple[bool, Any]:
    value = body.get(key)
    if value is None:
        return True, {}
    ok = isinstance(value, dict) and len(value) <= kw["max_items"]
    return ok and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()), value


def expect_str_list(body: dict[str, Any], key: str, kw: dict[str, Any]) -> tuple[bool, Any]:
    value = body.get(key)
    if value is None:
        return True, []
    ok = isinstance(value, list) and len(value) <= kw["max_items"]
    return ok and all(isinstance(v, str) and v for v in value), value


def expect_opt_map(body: dict[str, Any], key: str, kw: dict[str, Any]) -> tuple[bool, Any]:
    value = body.get(key)
    return value is None or isinstance(value, dict), ({} if value is None else value)


Model = Callable[[dict[str, Any], str, dict[str, Any]], tuple[bool, Any]]
MODELS: dict[str, tuple[Model, st.SearchStrategy[dict[str, Any]]]] = {
    "req_str": (expect_req_str, st.fixed_dictionaries({"max_len": st.integers(1, 16)})),
    "opt_str": (expect_opt_str, st.fixed_dictionaries({"max_len": st.integers(1, 16)})),
    "text": (expect_text, st.fixed_dictionaries({"max_len": st.integers(0, 16)})),
    "opt_int": (
        expect_opt_int,
        st.fixed_dictionaries({"lo": st.integers(-3, 5), "hi": st.integers(0, 2**53)}),
    ),
    "req_int": (
        expect_req_int,
        st.fixed_dictionaries({"lo": st.integers(-3, 5), "hi": st.integers(0, 2**53)}),
    ),
    "opt_bool": (expect_opt_bool, st.just({})),
    "str_map": (expect_str_map, st.fixed_dictionaries({"max_items": st.integers(0, 6)})),
    "str_list": (expect_str_list, st.fixed_dictionaries({"max_items": st.integers(0, 6)})),
    "opt_map": (expect_opt_map, st.just({})),
}


def accessors() -> dict[str, Callable[..., Any]]:
    """Every public function of roost.wire.fields (so a new accessor is fuzzed too)."""
    return {
        name: fn
        for name, fn in inspect.getmembers(fields, inspect.isfunction)
        if not name.startswith("_") and fn.__module__ == fields.__name__
    }


def test_every_accessor_has_a_model() -> None:
    assert set(accessors()) == set(MODELS), "model the new accessor in MODELS"


def assert_refused(err: RoostError, key: str) -> None:
    assert err.code == "bad-request"
    assert err.detail == {"field": key}
    assert repr(key) in err.message


@FAST
@given(
    st.sampled_from(sorted(MODELS)),
    st.dictionaries(KEYS, FIELD_VALUES, max_size=4),
    KEYS,
    FIELD_VALUES,
    st.booleans(),
    st.data(),
)
def test_accessors_return_the_right_type_or_name_the_field(
    name: str,
    body: dict[str, Any],
    key: str,
    value: Any,
    present: bool,
    data: st.DataObject,
) -> None:
    model, kwargs = MODELS[name]
    kw = data.draw(kwargs)
    if "lo" in kw:
        assume(kw["lo"] <= kw["hi"])
    if present:
        body = {**body, key: value}
    accessor = accessors()[name]
    ok, want = model(body, key, kw)
    try:
        got = accessor(body, key, **kw)
    except RoostError as err:
        assert not ok, f"{name} refused a valid {body.get(key)!r}"
        assert_refused(err, key)
    else:
        assert ok, f"{name} accepted {body.get(key)!r}"
        assert same(got, want)


@MEDIUM
@given(st.sampled_from(sorted(MODELS)), MAPS, KEYS)
def test_accessors_with_default_limits_on_any_body(
    name: str, body: dict[str, Any], key: str
) -> None:
    accessor = accessors()[name]
    defaults = {
        param.name: param.default
        for param in inspect.signature(accessor).parameters.values()
        if param.kind is inspect.Parameter.KEYWORD_ONLY
    }
    ok, want = MODELS[name][0](body, key, defaults)
    try:
        got = accessor(body, key)
    except RoostError as err:
        assert not ok, f"{name} refused a valid {body.get(key)!r}"
        assert_refused(err, key)
    else:
        assert ok, f"{name} accepted {body.get(key)!r}"
        assert same(got, want)
