"""Stable error codes and RoostError (roost.wire.errors)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from roost.wire.errors import CODES, RoostError

KEBAB = re.compile(r"^[a-z]+(-[a-z]+)*$")


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_code_is_kebab_case_with_a_description(code: str) -> None:
    assert KEBAB.match(code)
    assert CODES[code].strip()


@pytest.mark.parametrize("code", ["no-such-code", "BAD-REQUEST", "bad_request", ""])
def test_unknown_code_is_rejected(code: str) -> None:
    with pytest.raises(ValueError, match="unknown error code"):
        RoostError(code)


def test_message_defaults_to_the_code_description() -> None:
    err = RoostError("not-found")
    assert err.message == CODES["not-found"]
    assert str(err) == f"not-found: {CODES['not-found']}"
    assert err.detail == {}


def test_to_body_from_body_round_trip() -> None:
    err = RoostError("name-taken", "name 'x' is taken", {"name": "x"})
    back = RoostError.from_body(err.to_body())
    assert (back.code, back.message, back.detail) == (
        "name-taken",
        "name 'x' is taken",
        {"name": "x"},
    )


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"code": "nope"},
        {"code": 5},
        {"code": None, "message": 7, "detail": "x"},
        {"code": ["bad-request"]},
    ],
)
def test_from_body_on_garbage_degrades_to_internal(body: dict[str, Any]) -> None:
    err = RoostError.from_body(body)
    assert err.code == "internal"
    assert isinstance(err.message, str) and err.message
    assert isinstance(err.detail, dict)


def test_from_body_keeps_a_good_message_with_an_unknown_code() -> None:
    err = RoostError.from_body({"code": "from-the-future", "message": "hm", "detail": {"a": 1}})
    assert (err.code, err.message, err.detail) == ("internal", "hm", {"a": 1})


def test_from_body_drops_wrong_typed_message_and_detail() -> None:
    err = RoostError.from_body({"code": "timeout", "message": b"x", "detail": [1]})
    assert (err.code, err.message, err.detail) == ("timeout", CODES["timeout"], {})
