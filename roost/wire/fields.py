"""Typed access to request bodies: every accessor names the field it refuses.

Bodies arrive as decoded msgpack maps; these functions are the edge where they become typed values,
so the core never handles an unchecked ``dict[str, Any]`` field.
"""

from __future__ import annotations

from typing import Any

from roost.wire.errors import RoostError

MAX_TEXT = 256 * 1024


def _bad(key: str, expected: str) -> RoostError:
    return RoostError("bad-request", f"field {key!r} must be {expected}", {"field": key})


def req_str(body: dict[str, Any], key: str, *, max_len: int = MAX_TEXT) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise _bad(key, f"a non-empty string of at most {max_len} characters")
    return value


def opt_str(body: dict[str, Any], key: str, *, max_len: int = MAX_TEXT) -> str | None:
    if body.get(key) is None:
        return None
    return req_str(body, key, max_len=max_len)


def text(body: dict[str, Any], key: str, *, max_len: int = MAX_TEXT) -> str:
    """A string that may be empty (typed input)."""
    value = body.get(key)
    if not isinstance(value, str) or len(value) > max_len:
        raise _bad(key, f"a string of at most {max_len} characters")
    return value


def opt_int(body: dict[str, Any], key: str, *, lo: int = 0, hi: int = 2**53) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise _bad(key, f"an integer from {lo} to {hi}")
    return value


def req_int(body: dict[str, Any], key: str, *, lo: int = 0, hi: int = 2**53) -> int:
    value = opt_int(body, key, lo=lo, hi=hi)
    if value is None:
        raise _bad(key, f"an integer from {lo} to {hi}")
    return value


def opt_bool(body: dict[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise _bad(key, "a boolean")
    return value


def str_map(body: dict[str, Any], key: str, *, max_items: int = 256) -> dict[str, str]:
    value = body.get(key)
    if value is None:
        return {}
    ok = isinstance(value, dict) and len(value) <= max_items
    if not ok or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _bad(key, f"a map of at most {max_items} string keys to string values")
    return dict(value)


def str_list(body: dict[str, Any], key: str, *, max_items: int = 256) -> list[str]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > max_items:
        raise _bad(key, f"a list of at most {max_items} strings")
    if not all(isinstance(v, str) and v for v in value):
        raise _bad(key, "a list of non-empty strings")
    return list(value)


def opt_map(body: dict[str, Any], key: str) -> dict[str, Any]:
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad(key, "a map")
    return value
