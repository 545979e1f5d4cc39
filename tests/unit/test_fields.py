"""Typed access to request bodies (roost.wire.fields)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from roost.wire import fields
from roost.wire.errors import RoostError


def refused(accessor: Callable[..., Any], body: dict[str, Any], key: str, **kw: Any) -> None:
    with pytest.raises(RoostError) as info:
        accessor(body, key, **kw)
    assert info.value.code == "bad-request"
    assert info.value.detail == {"field": key}
    assert repr(key) in info.value.message


# -- strings -------------------------------------------------------------------------------------


def test_req_str_accepts_a_non_empty_string() -> None:
    assert fields.req_str({"name": "alpha"}, "name") == "alpha"


@pytest.mark.parametrize("value", [None, "", 3, b"alpha", ["a"], True])
def test_req_str_refuses(value: Any) -> None:
    refused(fields.req_str, {"name": value}, "name")


def test_req_str_refuses_missing() -> None:
    refused(fields.req_str, {}, "name")


def test_req_str_max_len() -> None:
    assert fields.req_str({"n": "abc"}, "n", max_len=3) == "abc"
    refused(fields.req_str, {"n": "abcd"}, "n", max_len=3)


def test_opt_str() -> None:
    assert fields.opt_str({}, "cwd") is None
    assert fields.opt_str({"cwd": None}, "cwd") is None
    assert fields.opt_str({"cwd": "/tmp"}, "cwd") == "/tmp"
    refused(fields.opt_str, {"cwd": 1}, "cwd")
    refused(fields.opt_str, {"cwd": ""}, "cwd")


def test_text_accepts_empty() -> None:
    assert fields.text({"text": ""}, "text") == ""
    assert fields.text({"text": "hi\n"}, "text") == "hi\n"


@pytest.mark.parametrize("value", [None, 1, b"hi", ["hi"]])
def test_text_refuses(value: Any) -> None:
    refused(fields.text, {"text": value}, "text")


def test_text_max_len() -> None:
    refused(fields.text, {"text": "x" * (fields.MAX_TEXT + 1)}, "text")
    assert len(fields.text({"text": "x" * fields.MAX_TEXT}, "text")) == fields.MAX_TEXT


# -- integers ------------------------------------------------------------------------------------


def test_opt_int() -> None:
    assert fields.opt_int({}, "after") is None
    assert fields.opt_int({"after": 0}, "after") == 0
    assert fields.opt_int({"after": 2**53}, "after") == 2**53


@pytest.mark.parametrize("value", [True, False, 1.0, "1", -1, 2**53 + 1, [1]])
def test_opt_int_refuses(value: Any) -> None:
    refused(fields.opt_int, {"after": value}, "after")


def test_opt_int_bounds() -> None:
    assert fields.opt_int({"rows": 5}, "rows", lo=5, hi=10) == 5
    assert fields.opt_int({"rows": 10}, "rows", lo=5, hi=10) == 10
    refused(fields.opt_int, {"rows": 4}, "rows", lo=5, hi=10)
    refused(fields.opt_int, {"rows": 11}, "rows", lo=5, hi=10)


def test_req_int() -> None:
    assert fields.req_int({"rows": 24}, "rows") == 24
    refused(fields.req_int, {}, "rows")
    refused(fields.req_int, {"rows": None}, "rows")
    refused(fields.req_int, {"rows": True}, "rows")


# -- booleans ------------------------------------------------------------------------------------


def test_opt_bool() -> None:
    assert fields.opt_bool({}, "screen") is False
    assert fields.opt_bool({"screen": True}, "screen") is True
    assert fields.opt_bool({"screen": False}, "screen") is False


@pytest.mark.parametrize("value", [1, 0, "true", None])
def test_opt_bool_refuses(value: Any) -> None:
    refused(fields.opt_bool, {"screen": value}, "screen")


# -- containers ----------------------------------------------------------------------------------


def test_str_map() -> None:
    assert fields.str_map({}, "env") == {}
    assert fields.str_map({"env": {"A": "1"}}, "env") == {"A": "1"}


@pytest.mark.parametrize("value", [{"A": 1}, {"A": b"1"}, {b"A": "1"}, ["A"], "A=1"])
def test_str_map_refuses(value: Any) -> None:
    refused(fields.str_map, {"env": value}, "env")


def test_str_map_max_items() -> None:
    refused(fields.str_map, {"env": {"a": "1", "b": "2"}}, "env", max_items=1)


def test_str_map_returns_a_copy() -> None:
    env = {"A": "1"}
    out = fields.str_map({"env": env}, "env")
    out["B"] = "2"
    assert env == {"A": "1"}


def test_str_list() -> None:
    assert fields.str_list({}, "keys") == []
    assert fields.str_list({"keys": ["enter", "up"]}, "keys") == ["enter", "up"]


@pytest.mark.parametrize("value", [["enter", ""], ["enter", 1], "enter", {"k": "v"}, [None]])
def test_str_list_refuses(value: Any) -> None:
    refused(fields.str_list, {"keys": value}, "keys")


def test_str_list_max_items() -> None:
    refused(fields.str_list, {"keys": ["a", "b"]}, "keys", max_items=1)


def test_opt_map() -> None:
    assert fields.opt_map({}, "s") == {}
    assert fields.opt_map({"s": {"generation": 1}}, "s") == {"generation": 1}
    refused(fields.opt_map, {"s": [1]}, "s")
    refused(fields.opt_map, {"s": "x"}, "s")
