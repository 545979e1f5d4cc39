"""What ``roost web`` checks before it listens and on every request, as plain functions.

The rules are the node's: loopback by default; any other address needs a token (read from a file
only its owner may read, never from argv), and TLS or an explicit ``--insecure``. A browser logs
in with the token through a form and gets an HttpOnly, SameSite=Strict cookie; a program may send
``Authorization: Bearer <token>`` instead. Requests that change something carry the page's CSRF
token (``X-CSRF-Token``) and, from a browser, an Origin of this server; so do websocket upgrades.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from roost.wire.errors import RoostError

DEFAULT_PORT = 8765
LOOPBACK_NAMES = ("localhost", "localhost.", "ip6-localhost")
SESSION_TTL_S = 12 * 3600.0  # a browser logs in again after this long
COOKIE = "roost_web"
CSRF_HEADER = "X-CSRF-Token"


@dataclass(frozen=True)
class Listen:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)


def parse_listen(text: str) -> Listen:
    """``HOST:PORT``, ``[V6]:PORT``, ``HOST`` or ``PORT``; the host defaults to 127.0.0.1."""
    text = text.strip().removeprefix("http://").removeprefix("https://").rstrip("/")
    host, port = "127.0.0.1", str(DEFAULT_PORT)
    if text.startswith("["):
        inner, _, rest = text[1:].partition("]")
        host, port = inner, rest.removeprefix(":") or port
    elif text.isdigit():
        port = text
    elif text.count(":") == 1:
        host, port = text.split(":")
    elif text:
        host = text
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise RoostError(
            "bad-request",
            f"--listen {text!r} is not HOST:PORT (e.g. 127.0.0.1:{DEFAULT_PORT})",
            {"field": "listen"},
        )
    return Listen(host, int(port))


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path: str) -> str:
    """The token in ``path``: a file of this user's that group and others cannot read."""
    file = Path(path).expanduser()
    try:
        info = file.stat()
        text = file.read_text().strip()
    except OSError as err:
        raise RoostError(
            "bad-request", f"the token file {file} cannot be read: {err.strerror}"
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise RoostError("bad-request", f"the token file {file} is not a regular file")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise RoostError(
            "bad-request", f"the token file {file} belongs to another user ({info.st_uid})"
        )
    if info.st_mode & 0o077:
        mode = stat.S_IMODE(info.st_mode)
        raise RoostError(
            "bad-request",
            f"the token file {file} may be read by group or others (mode {mode:o}); "
            f"`chmod 600 {file}` and start again",
            {"path": str(file), "mode": f"{mode:o}"},
        )
    if len(text) < 16 or any(ch.isspace() for ch in text):
        raise RoostError(
            "bad-request",
            f"the token in {file} must be one word of at least 16 characters "
            "(e.g. `openssl rand -hex 32 > FILE`)",
        )
    return text


def check_setup(listen: Listen, token: str, tls: bool, insecure: bool) -> None:
    """Refuse, saying why, to listen beyond loopback without a token, or without TLS unless
    ``--insecure`` says plain HTTP is meant."""
    if listen.loopback:
        return
    if not token:
        raise RoostError(
            "bad-request",
            f"{listen.host} is not a loopback address: roost web listens there only with "
            "--token-file FILE (a token only you can read, which browsers log in with)",
            {"field": "token-file"},
        )
    if not tls and not insecure:
        raise RoostError(
            "bad-request",
            f"{listen.host} is not a loopback address: give --tls-cert and --tls-key, or "
            "--insecure to serve plain HTTP (the token then crosses the network in clear)",
            {"field": "tls-cert"},
        )


def token_matches(offered: str, token: str) -> bool:
    return bool(token) and hmac.compare_digest(offered.encode(), token.encode())


@dataclass
class Login:
    csrf: str
    created: float
    role: str = "operator"  # "observer": logged in with --observer-token-file's token


@dataclass
class Gate:
    """Who may use the server: logged-in browsers (cookie) and holders of the token."""

    token: str  # "" on loopback without --token-file: no login
    loopback: bool
    observer_token: str = ""  # --observer-token-file: a login that only watches
    logins: dict[str, Login] = field(default_factory=dict)
    open_csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @property
    def needs_login(self) -> bool:
        return bool(self.token)

    def login(self, offered: str) -> str | None:
        """A new cookie value for a right token (the observer token's: a watcher's), else
        None."""
        role = self._role(offered)
        if role is None:
            return None
        self._expire()
        sid = secrets.token_urlsafe(32)
        self.logins[sid] = Login(secrets.token_urlsafe(32), time.monotonic(), role)
        return sid

    def _role(self, offered: str) -> str | None:
        if token_matches(offered, self.token):
            return "operator"
        if self.observer_token and token_matches(offered, self.observer_token):
            return "observer"
        return None

    def logout(self, sid: str) -> None:
        self.logins.pop(sid, None)

    def _expire(self) -> None:
        now = time.monotonic()
        for sid in [s for s, v in self.logins.items() if now - v.created > SESSION_TTL_S]:
            del self.logins[sid]

    def session(self, cookie: str) -> Login | None:
        login = self.logins.get(cookie)
        if login is None or time.monotonic() - login.created > SESSION_TTL_S:
            return None
        return login

    def csrf_for(self, cookie: str) -> str:
        if not self.needs_login:
            return self.open_csrf
        login = self.session(cookie)
        return login.csrf if login else ""

    def admits(self, cookie: str, authorization: str) -> tuple[bool, bool]:
        """(admitted, by bearer token): the bearer header needs no CSRF token."""
        if not self.needs_login:
            return True, False
        if authorization.startswith("Bearer ") and self._role(authorization[7:]) is not None:
            return True, True
        return self.session(cookie) is not None, False

    def role_of(self, cookie: str, authorization: str) -> str:
        """The role of an admitted request: ``observer`` for the observer token's, by its
        bearer header or its login; else ``operator`` (the server's own connection decides)."""
        if authorization.startswith("Bearer "):
            return self._role(authorization[7:]) or "operator"
        login = self.session(cookie)
        return login.role if login is not None else "operator"


def host_ok(host_header: str, loopback_only: bool) -> bool:
    """On loopback without a token, only a loopback Host: a page of another site that a DNS
    trick points at 127.0.0.1 sends its own name and is refused."""
    if not loopback_only:
        return True
    host = host_header.rsplit(":", 1)[0] if not host_header.endswith("]") else host_header
    if host_header.startswith("["):
        host = host_header[1:].partition("]")[0]
    return is_loopback(host)


def origin_ok(origin: str, host_header: str, scheme: str) -> bool:
    """An Origin header of this server (scheme and host as the browser reached it)."""
    parts = urlsplit(origin)
    return parts.scheme == scheme and parts.netloc.lower() == host_header.lower()
