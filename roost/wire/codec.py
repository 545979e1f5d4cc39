"""The msgpack codec of the wire and its limits, with nothing heavier than msgpack beside it.

``roost.wire.protocol`` builds on it (and re-exports it); ``roost ls``'s fast path
(``roost.cli.quick``) decodes its two replies with it and nothing else of the protocol module,
whose dataclasses would cost that path's start more than the rest of it.
"""

from __future__ import annotations

import msgpack

from roost.wire.errors import RoostError
from roost.wire.limits import BODY_LIMIT as BODY_LIMIT
from roost.wire.limits import HARD_FRAME_LIMIT as HARD_FRAME_LIMIT
from roost.wire.limits import HEADER_LIMIT as HEADER_LIMIT
from roost.wire.limits import MAX_ARRAY as MAX_ARRAY
from roost.wire.limits import MAX_BIN as MAX_BIN
from roost.wire.limits import MAX_DEPTH as MAX_DEPTH
from roost.wire.limits import MAX_FRAMES as MAX_FRAMES
from roost.wire.limits import MAX_MAP as MAX_MAP
from roost.wire.limits import MAX_STR as MAX_STR
from roost.wire.limits import PROTOCOL_VERSION as PROTOCOL_VERSION

# Not typing.TYPE_CHECKING: importing typing costs the fast path ~4 ms; mypy reads this name so.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def pack(obj: dict[str, Any]) -> bytes:
    """Encode one map; msgpack with bin type, no Python-specific extensions."""
    data: bytes = msgpack.packb(obj, use_bin_type=True)
    return data


def _no_ext(code: int, data: bytes) -> Any:
    raise ValueError("extension types are not part of the protocol")


def load(data: bytes | memoryview, limit: int, what: str) -> dict[Any, Any]:
    """One msgpack map within ``limit`` and the length limits; its shape is not checked yet."""
    if len(data) > limit:
        raise RoostError("frame-too-large", f"{what} is {len(data)} bytes; the limit is {limit}")
    try:
        obj = msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=True,
            max_str_len=MAX_STR,
            max_bin_len=MAX_BIN,
            max_array_len=MAX_ARRAY,
            max_map_len=MAX_MAP,
            max_ext_len=0,
            ext_hook=_no_ext,  # max_ext_len bounds only the length: refuse even empty ones
        )
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
        raise RoostError("bad-request", f"{what} is not one valid msgpack value") from None
    if type(obj) is not dict:
        raise RoostError("bad-request", f"{what} must be a msgpack map")
    return obj
