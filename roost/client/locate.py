"""Where a node keeps its files, and how a client finds a running node from its state directory.

The state directory holds the durable things (``state.db``, the token, logs, transcripts). Sockets
live in a private runtime directory (mode 0700) whose path is derived from the state directory, so
it stays short enough for ipc endpoints (about 100 bytes on Linux) wherever the state lives.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roost.client.fast import nodefile
from roost.client.fast.nodefile import LOCK_FILE as LOCK_FILE
from roost.client.fast.nodefile import NODE_FILE as NODE_FILE
from roost.client.fast.nodefile import TOKEN_ENV as TOKEN_ENV
from roost.client.fast.nodefile import TOKEN_FILE as TOKEN_FILE
from roost.client.fast.nodefile import lock_held as lock_held
from roost.client.fast.nodefile import pid_alive as pid_alive
from roost.client.fast.nodefile import read_node_file
from roost.client.fast.nodefile import read_token as read_token
from roost.wire.errors import RoostError

OBSERVER_TOKEN_FILE = "observer-token"  # grants the read-only role observer
ACTOR_TOKEN_FILE = "actor-token"  # what actors (not clients) present in their hello
ACTOR_TOKEN_ENV = "ROOST_ACTOR_TOKEN"


def default_state_dir() -> Path:
    return Path(nodefile.default_state_dir())


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) and make it 0700; refuse one owned by another user."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if sys.platform != "win32":
        st = path.stat()
        if st.st_uid != os.getuid():
            raise RoostError("unauthorized", "a private directory is owned by another user")
        os.chmod(path, 0o700)
    return path


def runtime_dir(state_dir: Path) -> Path:
    """``ROOST_RUNTIME_DIR`` if set (one state directory's: a daemon holds its ``runtime.lock``),
    else ``runtime_base() / <first 12 hex of sha256(state dir)>``."""
    env = os.environ.get("ROOST_RUNTIME_DIR")
    if env:
        return private_dir(Path(env))
    import hashlib  # here, not at the top: a CLI command that does not get here starts faster

    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]
    return private_dir(runtime_base() / digest)


def runtime_base() -> Path:
    """``<XDG_RUNTIME_DIR or the temporary directory>/roost-<uid>``, made 0700: the runtime
    directories of this user's nodes and hubs, and their node-id locks (``node-ids/``), whatever
    ``ROOST_RUNTIME_DIR`` says."""
    import tempfile

    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    uid = os.getuid() if sys.platform != "win32" else 0
    return private_dir(Path(base) / f"roost-{uid}")


@dataclass(frozen=True)
class NodeInfo:
    """What a running node publishes in ``<state-dir>/node.json`` for local clients."""

    node_id: str
    incarnation: str
    pid: int
    router: str
    events: str
    network: dict[str, Any] | None = None  # the --listen endpoint: {router, events, curve, ...}

    def to_json(self) -> dict[str, Any]:
        endpoints: dict[str, Any] = {"router": self.router, "events": self.events}
        if self.network is not None:
            endpoints["network"] = self.network
        return {
            "node_id": self.node_id,
            "incarnation": self.incarnation,
            "pid": self.pid,
            "endpoints": endpoints,
        }


def write_node_info(state_dir: Path, info: NodeInfo) -> None:
    tmp = state_dir / (NODE_FILE + ".tmp")
    tmp.write_text(json.dumps(info.to_json()))
    os.replace(tmp, state_dir / NODE_FILE)


def read_node_info(state_dir: Path) -> NodeInfo:
    raw = read_node_file(state_dir)
    try:
        return NodeInfo(
            node_id=raw["node_id"],
            incarnation=raw["incarnation"],
            pid=int(raw["pid"]),
            router=raw["endpoints"]["router"],
            events=raw["endpoints"]["events"],
            network=_map_or_none(raw["endpoints"].get("network")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        raise RoostError("node-not-running", "no node serves this state directory") from None


def _map_or_none(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def live_node_info(state_dir: Path) -> NodeInfo:
    """``node.json`` of a node that is still there: a ``node.json`` left by a daemon that died
    (SIGKILL; its pid gone, or its lock free) is ``node-not-running`` at once, not a timeout."""
    info = read_node_info(state_dir)
    if not pid_alive(info.pid) or not lock_held(state_dir / LOCK_FILE):
        raise RoostError(
            "node-not-running",
            f"the node that served this state directory (pid {info.pid}) is gone",
            {"pid": info.pid},
        )
    return info


def clear_node_info(state_dir: Path, pid: int) -> None:
    try:
        if read_node_info(state_dir).pid == pid:
            (state_dir / NODE_FILE).unlink()
    except (RoostError, OSError):
        pass


def load_or_create_token(state_dir: Path) -> str:
    """The node token: the env var if set, else the 0600 file, created on first use."""
    env = os.environ.get(TOKEN_ENV)
    if env:
        return env
    return load_or_create_secret(state_dir / TOKEN_FILE)


def load_or_create_secret(path: Path) -> str:
    """A random secret kept in a 0600 file, created on first use."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        import secrets  # the first start only

        token = secrets.token_urlsafe(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(token)
        return token
