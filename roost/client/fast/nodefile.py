"""The files a client reads to find a running node: ``node.json``, the lock, the token. With
``os`` and ``json`` only: ``roost.client.locate`` builds on these (and re-exports them), and
``roost ls``'s fast path (``roost.cli.quick``) reads them without pathlib or dataclasses.
Paths are ``str`` or ``os.PathLike`` (``Path``): anything ``open`` takes.
"""

from __future__ import annotations

import os
import sys

from roost.wire.errors import RoostError

TYPE_CHECKING = False  # not typing's: its import costs the fast path ~4 ms (mypy reads this)
if TYPE_CHECKING:
    from typing import Any

NODE_FILE = "node.json"
LOCK_FILE = "node.lock"  # held by the daemon (or hub) serving the directory
TOKEN_FILE = "token"
TOKEN_ENV = "ROOST_TOKEN"


def default_state_dir() -> str:
    """The state directory when none is named: ``ROOST_STATE_DIR``, else the platform's
    (``$XDG_STATE_HOME/roost``, by default ``~/.local/state/roost``; ``%LOCALAPPDATA%\\roost``
    on Windows), resolved as ``Path.resolve`` does (``roost.client.locate`` returns it as a
    ``Path``)."""
    env = os.environ.get("ROOST_STATE_DIR")
    if env:
        return os.path.realpath(os.path.expanduser(env))
    home = os.path.expanduser("~")
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA", os.path.join(home, "AppData", "Local"))
    else:
        base = os.environ.get("XDG_STATE_HOME", os.path.join(home, ".local", "state"))
    return os.path.realpath(os.path.join(base, "roost"))


class _Scanning:
    """What CPython's JSON scanner reads from the decoder it serves: ``json.loads``'s defaults."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int

    @staticmethod
    def parse_constant(name: str) -> float:
        return float(name.replace("Infinity", "inf"))  # NaN, Infinity, -Infinity


def loads(text: str) -> Any:
    """``json.loads(text)`` without importing json, whose regular expressions (``re``, ``enum``)
    cost a CLI start ~12 ms: the C scanner json itself decodes with (json where it is absent)."""
    try:
        from _json import make_scanner
    except ImportError:
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(" \t\n\r"))  # the whitespace JSON allows
    try:
        scan = make_scanner(_Scanning())  # type: ignore[arg-type]  # (typeshed: any context)
        obj, end = scan(text, start)
    except StopIteration:
        raise ValueError("not a JSON document") from None
    if text[end:].strip(" \t\n\r"):
        raise ValueError("more than one JSON document")
    return obj


def read_node_file(state_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``node.json`` as it is written; ``node-not-running`` if it cannot be read as a map."""
    try:
        with open(os.path.join(state_dir, NODE_FILE)) as fh:
            raw = loads(fh.read())
    except (OSError, ValueError):
        raise RoostError("node-not-running", "no node serves this state directory") from None
    if not isinstance(raw, dict):
        raise RoostError("node-not-running", "no node serves this state directory")
    return raw


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` names a live process (a zombie is dead); unknown counts as alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def lock_held(path: str | os.PathLike[str]) -> bool:
    """Whether some process holds the directory's OS lock (``node.lock``), probed without
    waiting. Windows, or anything unexpected, answers True (held: ask the node instead)."""
    if sys.platform == "win32":
        return True
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def read_token(state_dir: str | os.PathLike[str]) -> str:
    env = os.environ.get(TOKEN_ENV)
    if env:
        return env
    try:
        with open(os.path.join(state_dir, TOKEN_FILE)) as fh:
            return fh.read().strip()
    except OSError:
        raise RoostError("unauthorized", "the node token cannot be read") from None
