"""Scoped tokens: a client token that sees and drives only the sessions it spawned.

``roost token new --scope own`` makes one for an agent that is given roost as a tool (``roost
mcp``): it reaches the node as an ``operator`` whose every request the broker marks with the
token's id (header ``o``), and the node lets it see and drive only the records spawned under
that id, and the forks of those; anything else is ``forbidden``, node-wide methods included.
``max_live`` caps how many of its records may be live at once.

The tokens are kept in ``<state-dir>/scoped-tokens.json`` (0600) as the SHA-256 of each token
beside its id (``t-`` and 8 hex digits), name, scope, ``max_live`` and when it was made; the
token itself is printed once and kept nowhere. The broker and the node read the file again
whenever it changes, so a token revoked is refused from the next request on connections already
open.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from roost.wire.errors import RoostError

FILE = "scoped-tokens.json"
SCOPES = ("own",)
MAX_NAME = 64


@dataclass(frozen=True)
class Scoped:
    id: str
    name: str
    scope: str
    max_live: int | None
    created: float


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class ScopedTokens:
    """The scoped tokens of a state directory, read again when the file changes."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / FILE
        self._seen: tuple[int, int, int] | None = None
        self._by_digest: dict[str, Scoped] = {}
        self._by_id: dict[str, Scoped] = {}

    def match(self, offered: Any) -> Scoped | None:
        """The scoped token ``offered`` is, or None."""
        if not isinstance(offered, str) or not offered:
            return None
        self._current()
        return self._by_digest.get(digest(offered))

    def get(self, token_id: str) -> Scoped | None:
        """The token by its id while it is not revoked."""
        self._current()
        return self._by_id.get(token_id)

    def _current(self) -> None:
        try:
            st = self.path.stat()
            stamp: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp == self._seen and stamp is not None:
            return
        table = load(self.path.parent)
        self._by_digest = {d: entry for d, entry in table.items()}
        self._by_id = {entry.id: entry for entry in table.values()}
        self._seen = stamp


def load(state_dir: Path) -> dict[str, Scoped]:
    """The file's tokens by digest (none when it is missing or not readable as written)."""
    try:
        raw = json.loads((state_dir / FILE).read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for entry in raw.get("tokens", []) if isinstance(raw, dict) else []:
        try:
            out[str(entry["digest"])] = Scoped(
                str(entry["id"]),
                str(entry.get("name") or ""),
                str(entry["scope"]),
                int(entry["max_live"]) if entry.get("max_live") is not None else None,
                float(entry.get("created") or 0.0),
            )
        except (KeyError, TypeError, ValueError):
            continue  # a damaged entry admits nobody
    return out


def _save(state_dir: Path, table: dict[str, Scoped]) -> None:
    path = state_dir / FILE
    tmp = path.with_suffix(".tmp")
    doc = {"tokens": [{"digest": d, **asdict(e)} for d, e in sorted(table.items())]}
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(doc, indent=1, sort_keys=True))
    os.replace(tmp, path)


def new(state_dir: Path, scope: str, name: str, max_live: int | None) -> tuple[str, Scoped]:
    """A new scoped token (returned once) and its entry, saved."""
    if scope not in SCOPES:
        raise RoostError("bad-request", f"the scopes are: {', '.join(SCOPES)}", {"field": "scope"})
    if len(name) > MAX_NAME or not name.isprintable():
        raise RoostError(
            "bad-request", "a name is up to 64 printable characters", {"field": "name"}
        )
    if max_live is not None and max_live < 0:
        raise RoostError("bad-request", "--max-live is 0 or more", {"field": "max-live"})
    table = load(state_dir)
    token = secrets.token_urlsafe(32)
    entry = Scoped(f"t-{secrets.token_hex(4)}", name, scope, max_live, time.time())
    table[digest(token)] = entry
    _save(state_dir, table)
    return token, entry


def revoke(state_dir: Path, token_id: str) -> Scoped:
    table = load(state_dir)
    for d, entry in table.items():
        if entry.id == token_id:
            del table[d]
            _save(state_dir, table)
            return entry
    raise RoostError("not-found", f"no scoped token {token_id[:64]!r}", {"id": token_id[:64]})


def listed(state_dir: Path) -> list[Scoped]:
    return sorted(load(state_dir).values(), key=lambda e: e.created)
