"""msgpack for ``roost ls``'s fast path, in pure Python: the subset the wire uses, for small
messages, so the fast path need not import msgpack (~11 ms of a ~40 ms start: its ``ext`` module
brings datetime and collections).

``packb`` encodes what requests hold (maps, arrays, str, bytes, int, float, bool, None) as
``msgpack.packb(obj, use_bin_type=True)`` does, byte for byte. ``unpackb`` decodes one value as
``roost.wire.codec.load`` reads a frame (``raw=False``, ``strict_map_key``, the wire's array,
map and depth limits), giving the same objects; anything else (an extension type, a key that is
not a string, a limit passed, trailing or missing bytes) raises ``ValueError``, and the caller
then asks again through the real codec. Only for small messages (``SMALL``): the C decoder is
faster on large ones than this saves.
"""

from __future__ import annotations

import _struct

from roost.wire.limits import MAX_ARRAY as MAX_ARRAY
from roost.wire.limits import MAX_DEPTH as MAX_DEPTH
from roost.wire.limits import MAX_MAP as MAX_MAP

TYPE_CHECKING = False  # not typing's (its import costs the fast path ~4 ms); mypy reads this
if TYPE_CHECKING:
    from typing import Any

SMALL = 64 * 1024  # frames at most this long are decoded here (strings and bins in one cannot
# pass the wire's MAX_STR and MAX_BIN)

_F64 = _struct.Struct(">d")
_F32 = _struct.Struct(">f")


def packb(obj: Any) -> bytes:
    out: list[bytes] = []
    _pack(obj, out)
    return b"".join(out)


def _pack(obj: Any, out: list[bytes]) -> None:
    if obj is None:
        out.append(b"\xc0")
    elif obj is True or obj is False:
        out.append(b"\xc3" if obj else b"\xc2")
    elif type(obj) is int:
        out.append(_int(obj))
    elif type(obj) is float:
        out.append(b"\xcb" + _F64.pack(obj))
    elif type(obj) is str:
        data = obj.encode("utf-8")
        n = len(data)
        if n < 32:
            out.append(bytes([0xA0 | n]))
        else:
            out.append(_sized(n, b"\xd9", b"\xda", b"\xdb"))
        out.append(data)
    elif type(obj) is bytes:
        out.append(_sized(len(obj), b"\xc4", b"\xc5", b"\xc6"))
        out.append(obj)
    elif type(obj) in (list, tuple):
        n = len(obj)
        out.append(bytes([0x90 | n]) if n < 16 else _sized(n, b"", b"\xdc", b"\xdd"))
        for item in obj:
            _pack(item, out)
    elif type(obj) is dict:
        n = len(obj)
        out.append(bytes([0x80 | n]) if n < 16 else _sized(n, b"", b"\xde", b"\xdf"))
        for key, value in obj.items():
            _pack(key, out)
            _pack(value, out)
    else:
        raise TypeError(f"{type(obj).__name__} is not part of the protocol")


def _int(n: int) -> bytes:
    if 0 <= n < 128:
        return bytes([n])
    if -32 <= n < 0:
        return bytes([n & 0xFF])
    if n >= 0:
        for tag, size in ((0xCC, 1), (0xCD, 2), (0xCE, 4), (0xCF, 8)):
            if n < 1 << (8 * size):
                return bytes([tag]) + n.to_bytes(size, "big")
    else:
        for tag, size in ((0xD0, 1), (0xD1, 2), (0xD2, 4), (0xD3, 8)):
            if n >= -(1 << (8 * size - 1)):
                return bytes([tag]) + n.to_bytes(size, "big", signed=True)
    raise OverflowError("an integer msgpack cannot carry")


def _sized(n: int, tag8: bytes, tag16: bytes, tag32: bytes) -> bytes:
    if n < 256 and tag8:
        return tag8 + bytes([n])
    if n < 1 << 16:
        return tag16 + n.to_bytes(2, "big")
    if n < 1 << 32:
        return tag32 + n.to_bytes(4, "big")
    raise ValueError("too long for msgpack")


def unpackb(data: bytes) -> Any:
    """One msgpack value that is all of ``data``, as the wire decodes it."""
    value, end = _unpack(data, 0, 0)
    if end != len(data):
        raise ValueError("extra bytes after the value")
    return value


def _take(data: bytes, at: int, n: int) -> tuple[bytes, int]:
    end = at + n
    if end > len(data):
        raise ValueError("cut short")
    return data[at:end], end


def _uint(data: bytes, at: int, n: int) -> tuple[int, int]:
    raw, end = _take(data, at, n)
    return int.from_bytes(raw, "big"), end


def _unpack(data: bytes, at: int, depth: int) -> tuple[Any, int]:
    if at >= len(data):
        raise ValueError("cut short")
    tag = data[at]
    at += 1
    if tag < 0x80:
        return tag, at
    if tag >= 0xE0:
        return tag - 0x100, at
    if 0xA0 <= tag <= 0xBF:
        return _str(data, at, tag & 0x1F)
    if 0x90 <= tag <= 0x9F:
        return _array(data, at, tag & 0x0F, depth)
    if 0x80 <= tag <= 0x8F:
        return _map(data, at, tag & 0x0F, depth)
    if tag == 0xC0:
        return None, at
    if tag == 0xC2:
        return False, at
    if tag == 0xC3:
        return True, at
    if tag == 0xCB:
        raw, at = _take(data, at, 8)
        return _F64.unpack(raw)[0], at
    if tag == 0xCA:
        raw, at = _take(data, at, 4)
        return _F32.unpack(raw)[0], at
    if 0xCC <= tag <= 0xCF:
        return _uint(data, at, 1 << (tag - 0xCC))
    if 0xD0 <= tag <= 0xD3:
        raw, at = _take(data, at, 1 << (tag - 0xD0))
        return int.from_bytes(raw, "big", signed=True), at
    if 0xD9 <= tag <= 0xDB:
        n, at = _uint(data, at, 1 << (tag - 0xD9))
        return _str(data, at, n)
    if 0xC4 <= tag <= 0xC6:
        n, at = _uint(data, at, 1 << (tag - 0xC4))
        return _take(data, at, n)
    if tag in (0xDC, 0xDD):
        n, at = _uint(data, at, 2 if tag == 0xDC else 4)
        return _array(data, at, n, depth)
    if tag in (0xDE, 0xDF):
        n, at = _uint(data, at, 2 if tag == 0xDE else 4)
        return _map(data, at, n, depth)
    raise ValueError(f"msgpack type {tag:#x} is not part of the protocol")  # ext, 0xc1


def _str(data: bytes, at: int, n: int) -> tuple[str, int]:
    raw, at = _take(data, at, n)
    return raw.decode("utf-8"), at  # UnicodeDecodeError is a ValueError


def _array(data: bytes, at: int, n: int, depth: int) -> tuple[list[Any], int]:
    if n > MAX_ARRAY or depth >= MAX_DEPTH:
        raise ValueError("past the wire's limits")
    items: list[Any] = []
    for _ in range(n):
        item, at = _unpack(data, at, depth + 1)
        items.append(item)
    return items, at


def _map(data: bytes, at: int, n: int, depth: int) -> tuple[dict[Any, Any], int]:
    if n > MAX_MAP or depth >= MAX_DEPTH:
        raise ValueError("past the wire's limits")
    out: dict[Any, Any] = {}
    for _ in range(n):
        key, at = _unpack(data, at, depth + 1)
        if type(key) not in (str, bytes):
            raise ValueError("a map key that is not a string")
        out[key], at = _unpack(data, at, depth + 1)
    return out, at
