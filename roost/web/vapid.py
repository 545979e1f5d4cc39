"""Web Push without a third party's library: the VAPID key pair (RFC 8292), the message
encryption (RFC 8291, ``aes128gcm`` of RFC 8188) and the subscriptions, all in files of the
state directory (``<state-dir>/web/``, 0700; the files 0600).

Only the ``cryptography`` package's primitives are used: ECDH and ECDSA on P-256, HKDF-SHA256
and AES-128-GCM. Nothing here touches the network (``roost.web.push`` sends).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from roost.client.locate import private_dir
from roost.web.security import is_loopback
from roost.wire.errors import RoostError

KEYS_FILE = "vapid.json"
SUBSCRIPTIONS_FILE = "push-subscriptions.json"
DEFAULT_SUBJECT = "mailto:roost@localhost"
JWT_TTL_S = 12 * 3600  # RFC 8292: at most 24 hours
RECORD_SIZE = 4096
MAX_SUBSCRIPTIONS = 64


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def web_dir(state_dir: Path) -> Path:
    return private_dir(state_dir / "web")


def public_bytes(key: ec.EllipticCurvePublicKey) -> bytes:
    """The uncompressed point (65 bytes): the form of ``applicationServerKey`` and ``p256dh``."""
    return key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )


def write_private(path: Path, doc: Any) -> None:
    """``doc`` as JSON in ``path``, mode 0600, replaced whole (a reader never sees half)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(doc, out, indent=1)
    os.replace(tmp, path)


@dataclass(frozen=True)
class Vapid:
    """The server's VAPID key pair and the contact (``sub``) its tokens name."""

    private: ec.EllipticCurvePrivateKey
    subject: str
    created: float

    @property
    def public_key(self) -> str:
        """The ``applicationServerKey``: base64url of the uncompressed public point."""
        return b64u(public_bytes(self.private.public_key()))

    def doc(self) -> dict[str, Any]:
        d = self.private.private_numbers().private_value.to_bytes(32, "big")
        return {
            "private_key": b64u(d),
            "public_key": self.public_key,
            "subject": self.subject,
            "created": self.created,
        }

    def authorization(self, endpoint: str, now: float | None = None) -> str:
        """The ``Authorization: vapid t=<JWT>,k=<key>`` header for ``endpoint`` (RFC 8292): an
        ES256 JWT whose audience is the endpoint's origin, valid for 12 hours."""
        parts = urlsplit(endpoint)
        claims = {
            "aud": f"{parts.scheme}://{parts.netloc}",
            "exp": int((now or time.time()) + JWT_TTL_S),
            "sub": self.subject,
        }
        header = b64u(json.dumps({"typ": "JWT", "alg": "ES256"}).encode())
        body = b64u(json.dumps(claims, separators=(",", ":")).encode())
        signed = f"{header}.{body}".encode()
        r, s = decode_dss_signature(self.private.sign(signed, ec.ECDSA(hashes.SHA256())))
        token = f"{header}.{body}.{b64u(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"
        return f"vapid t={token},k={self.public_key}"


def make_keys(state_dir: Path, subject: str = DEFAULT_SUBJECT) -> Vapid:
    """A new key pair in ``<state-dir>/web/vapid.json``; the subscriptions made with the old
    one are of no use and go."""
    vapid = Vapid(ec.generate_private_key(ec.SECP256R1()), subject, time.time())
    save_keys(state_dir, vapid)
    (state_dir / "web" / SUBSCRIPTIONS_FILE).unlink(missing_ok=True)
    return vapid


def save_keys(state_dir: Path, vapid: Vapid) -> None:
    write_private(web_dir(state_dir) / KEYS_FILE, vapid.doc())


def load_keys(state_dir: Path) -> Vapid | None:
    path = state_dir / "web" / KEYS_FILE
    try:
        doc = json.loads(path.read_text())
        value = int.from_bytes(unb64u(str(doc["private_key"])), "big")
        private = ec.derive_private_key(value, ec.SECP256R1())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise RoostError(
            "bad-request",
            f"the VAPID keys in {path} cannot be read ({err}): `roost web keys --new`",
        ) from None
    return Vapid(
        private, str(doc.get("subject") or DEFAULT_SUBJECT), float(doc.get("created") or 0)
    )


# -- the message ----------------------------------------------------------------------------


def encrypt(payload: bytes, p256dh: bytes, auth: bytes, pad: int = 0) -> bytes:
    """``payload`` for the subscription's keys (RFC 8291): one ``aes128gcm`` record, with a new
    ephemeral key pair and salt each time; the header carries the salt and that public key."""
    receiver = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), p256dh)
    ephemeral = ec.generate_private_key(ec.SECP256R1())
    sender = public_bytes(ephemeral.public_key())
    shared = ephemeral.exchange(ec.ECDH(), receiver)
    salt = secrets.token_bytes(16)
    cek, nonce = content_keys(shared, auth, p256dh, sender, salt)
    sealed = AESGCM(cek).encrypt(nonce, payload + b"\x02" + b"\x00" * pad, None)
    return salt + struct.pack("!IB", RECORD_SIZE, len(sender)) + sender + sealed


def content_keys(
    shared: bytes, auth: bytes, receiver: bytes, sender: bytes, salt: bytes
) -> tuple[bytes, bytes]:
    """RFC 8291 section 3.4 then RFC 8188 section 2.2: the content encryption key and nonce."""
    info = b"WebPush: info\x00" + receiver + sender
    ikm = HKDF(hashes.SHA256(), 32, auth, info).derive(shared)
    cek = HKDF(hashes.SHA256(), 16, salt, b"Content-Encoding: aes128gcm\x00").derive(ikm)
    nonce = HKDF(hashes.SHA256(), 12, salt, b"Content-Encoding: nonce\x00").derive(ikm)
    return cek, nonce


# -- the subscriptions ----------------------------------------------------------------------


def checked(doc: Any) -> dict[str, Any]:
    """A browser's ``PushSubscription.toJSON()``: an https endpoint (or http to loopback) and
    its two keys; refused, saying why, otherwise."""
    if not isinstance(doc, dict):
        raise RoostError("bad-request", "a subscription is a JSON object")
    endpoint, keys = doc.get("endpoint"), doc.get("keys")
    if not isinstance(endpoint, str) or not isinstance(keys, dict):
        raise RoostError("bad-request", "a subscription has an endpoint and keys")
    parts = urlsplit(endpoint)
    local = parts.scheme == "http" and is_loopback(parts.hostname or "")
    if not (parts.scheme == "https" or local) or not parts.hostname or len(endpoint) > 2048:
        raise RoostError("bad-request", "a subscription's endpoint is an https URL")
    try:
        p256dh, auth = unb64u(str(keys["p256dh"])), unb64u(str(keys["auth"]))
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), p256dh)
    except (KeyError, ValueError) as err:
        raise RoostError("bad-request", f"a subscription's keys are not P-256 ({err})") from None
    if len(auth) != 16:
        raise RoostError("bad-request", "a subscription's auth secret is 16 bytes")
    return {"endpoint": endpoint, "keys": {"p256dh": b64u(p256dh), "auth": b64u(auth)}}


class Subscriptions:
    """The browsers to push to, in ``<state-dir>/web/push-subscriptions.json`` (0600)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    @property
    def path(self) -> Path:
        return self.state_dir / "web" / SUBSCRIPTIONS_FILE

    def all(self) -> list[dict[str, Any]]:
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return []
        return [s for s in doc.get("subscriptions") or [] if isinstance(s, dict)]

    def _save(self, subs: list[dict[str, Any]]) -> None:
        write_private(web_dir(self.state_dir) / SUBSCRIPTIONS_FILE, {"subscriptions": subs})

    def add(self, sub: dict[str, Any]) -> int:
        subs = [s for s in self.all() if s.get("endpoint") != sub["endpoint"]]
        subs.append({**sub, "added": time.time()})
        self._save(subs[-MAX_SUBSCRIPTIONS:])
        return len(subs)

    def remove(self, endpoint: str) -> bool:
        subs = self.all()
        kept = [s for s in subs if s.get("endpoint") != endpoint]
        if len(kept) != len(subs):
            self._save(kept)
        return len(kept) != len(subs)
