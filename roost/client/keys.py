"""CURVE keys for network endpoints: the node's key pair and the authorised client keys.

Files under ``<state-dir>/keys/`` (0700): ``node.secret`` (0600) and ``node.public`` (z85), and
``allowed.json`` mapping each authorised client public key to its role (``operator`` or
``observer``) and a name. A client keeps its own pair in a file of its choosing (``keys new
--client``). Revoking a key refuses its next connection (the ZAP check reads the file each time).
"""

from __future__ import annotations

import ipaddress
import json
import os
import struct
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import zmq
from zmq.utils import z85

from roost.client.locate import private_dir
from roost.wire.errors import RoostError
from roost.wire.policy import NODE_ROLE, check_node_id
from roost.wire.protocol import OBSERVER, OPERATOR

ROLES = (OPERATOR, OBSERVER, NODE_ROLE)


def keys_dir(state_dir: Path) -> Path:
    return private_dir(state_dir / "keys")


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def new_pair() -> tuple[str, str]:
    """A CURVE key pair whose public key does not begin with "-", so that it can be given on
    a command line without being taken for an option (one z85 key in 85 would be)."""
    while True:
        public, secret = zmq.curve_keypair()
        if not public.startswith(b"-"):
            return public.decode(), secret.decode()


def node_keys(state_dir: Path) -> tuple[str, str] | None:
    """The node's (public, secret) pair, or None when ``keys new`` has not made one."""
    folder = state_dir / "keys"
    try:
        return (
            (folder / "node.public").read_text().strip(),
            (folder / "node.secret").read_text().strip(),
        )
    except OSError:
        return None


def make_node_keys(state_dir: Path, *, force: bool = False) -> str:
    if node_keys(state_dir) is not None and not force:
        raise RoostError(
            "bad-request",
            "the node already has a key pair (use --force to replace "
            "it; every client then needs the new public key)",
        )
    public, secret = new_pair()
    folder = keys_dir(state_dir)
    _write_private(folder / "node.secret", secret)
    (folder / "node.public").write_text(public)
    return public


def allowed(state_dir: Path) -> dict[str, dict[str, Any]]:
    try:
        raw = json.loads((state_dir / "keys" / "allowed.json").read_text())
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _save(state_dir: Path, table: dict[str, dict[str, Any]]) -> None:
    path = keys_dir(state_dir) / "allowed.json"
    _write_private(path.with_suffix(".tmp"), json.dumps(table, indent=1, sort_keys=True))
    os.replace(path.with_suffix(".tmp"), path)


def check_public(key: str) -> str:
    if len(key) != 40:
        raise RoostError("bad-request", "a CURVE public key is 40 z85 characters", {"field": "key"})
    try:
        z85.decode(key.encode())
    except (ValueError, KeyError, struct.error, UnicodeEncodeError):
        raise RoostError("bad-request", "not a z85 key", {"field": "key"}) from None
    return key


def allow(
    state_dir: Path, key: str, role: str, name: str, *, replace: bool = False
) -> dict[str, Any]:
    """Allow ``key`` with ``role`` under ``name``. The same key again replaces its entry (role
    and name). A node's key is the one key of role ``node`` under its node id: another key of
    role node under that name is refused ``node-id-conflict`` unless ``replace``, which revokes
    it (two nodes would fight over one id on the hub)."""
    if role not in ROLES:
        raise RoostError("bad-request", f"role must be one of {ROLES}", {"field": "role"})
    if role == NODE_ROLE:  # on a hub, a node's key is allowed under its node id
        check_node_id(name)
    table = allowed(state_dir)
    key = check_public(key)
    rivals = sorted(
        k
        for k, v in table.items()
        if k != key and role == NODE_ROLE and v.get("role") == NODE_ROLE and v.get("name") == name
    )
    if rivals and not replace:
        raise RoostError(
            "node-id-conflict",
            f"another key is allowed as node {name!r} already: give --replace to revoke it and "
            "allow this one, or revoke it first",
            {"name": name, "keys": rivals},
        )
    for rival in rivals:
        del table[rival]
    previous = table.get(key)
    table[key] = {"role": role, "name": name}
    _save(state_dir, table)
    return {"key": key, "role": role, "name": name, "replaced": previous, "revoked": rivals}


def revoke(state_dir: Path, ref: str) -> dict[str, Any]:
    """Revoke the key ``ref``, or, when no key is ``ref``, every key allowed under the name
    ``ref``: ``{revoked: [keys], by: "key" | "name"}``."""
    table = allowed(state_dir)
    by = "key" if ref in table else "name"
    gone = [ref] if by == "key" else sorted(k for k, v in table.items() if v.get("name") == ref)
    if not gone:
        raise RoostError("not-found", f"no authorised key or name {ref!r}", {"ref": ref})
    for key in gone:
        del table[key]
    _save(state_dir, table)
    return {"revoked": gone, "by": by, "count": len(gone)}


def is_loopback(endpoint: str) -> bool:
    host = urlsplit(endpoint).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class AllowedKeys:
    """The ZAP credentials provider: a client key is allowed while it is in allowed.json."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self._seen: tuple[int, int, int] | None = None  # (inode, mtime_ns, size) last read
        self._table: dict[str, dict[str, Any]] = {}

    def callback(self, domain: str, key: bytes) -> bool:
        return key.decode() in self._current()

    def role(self, key: str) -> str | None:
        """The key's role now: asked for every message, so a revoke or a new role takes effect on
        connections already open (the file is read again only when it changed)."""
        entry = self._current().get(key)
        return str(entry["role"]) if entry else None

    def name(self, key: str) -> str | None:
        """The name the key was allowed under (for a node's key on a hub: its node id)."""
        entry = self._current().get(key)
        return str(entry.get("name") or "") or None if entry else None

    def _current(self) -> dict[str, dict[str, Any]]:
        try:
            st = (self.state_dir / "keys" / "allowed.json").stat()
            stamp: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp is None or stamp != self._seen:
            self._table, self._seen = allowed(self.state_dir), stamp
        return self._table
