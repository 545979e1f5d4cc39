"""``roost web``'s Web Push without a browser: a subscription made with a key pair the test owns,
whose endpoint is a push service the test runs on loopback. A session that ends a turn makes the
server POST an ``aes128gcm`` message (RFC 8291) with a VAPID token (RFC 8292) there; the test
checks the token and decrypts the message itself; a 410 answer drops the subscription."""

from __future__ import annotations

import base64
import json
import queue
import secrets
import stat
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from roost.web import security as sec
from tests.e2e.conftest import Node, wait_for
from tests.e2e.test_web import http, web_of

__all__ = ["web_of"]


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class PushService:
    """A push service on a free loopback port: every POST into a queue; answers ``status``."""

    def __init__(self) -> None:
        self.got: queue.Queue[tuple[str, dict[str, str], bytes]] = queue.Queue()
        self.status = 201
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                service.got.put((self.path, dict(self.headers), body))
                self.send_response(service.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture
def push_service() -> Iterator[PushService]:
    service = PushService()
    try:
        yield service
    finally:
        service.close()


def verify_vapid(header: str, origin: str, public_key: str) -> dict[str, Any]:
    """``vapid t=<JWT>,k=<key>``: the key is the server's; the ES256 signature verifies with it;
    the claims name the endpoint's origin and expire within 24 hours."""
    scheme, _, params = header.partition(" ")
    assert scheme == "vapid"
    fields = dict(p.strip().split("=", 1) for p in params.split(","))
    assert fields["k"] == public_key
    key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64u(fields["k"]))
    head, body, sig = fields["t"].split(".")
    assert json.loads(unb64u(head)) == {"typ": "JWT", "alg": "ES256"}
    raw = unb64u(sig)
    assert len(raw) == 64
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    key.verify(der, f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
    with pytest.raises(InvalidSignature):
        key.verify(der, f"{head}.{body}x".encode(), ec.ECDSA(hashes.SHA256()))
    claims: dict[str, Any] = json.loads(unb64u(body))
    assert claims["aud"] == origin
    assert time.time() < claims["exp"] <= time.time() + 24 * 3600
    assert str(claims["sub"]).startswith(("mailto:", "https:"))
    return claims


def decrypt(body: bytes, private: ec.EllipticCurvePrivateKey, auth: bytes) -> bytes:
    """RFC 8291 from the user agent's side: the header's salt and sender key, ECDH with the
    subscription's private key, the keys derived, one record opened and its padding removed."""
    salt, rs, idlen = body[:16], int.from_bytes(body[16:20], "big"), body[20]
    sender = body[21 : 21 + idlen]
    assert idlen == 65 and rs >= 18
    receiver = private.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    shared = private.exchange(
        ec.ECDH(), ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), sender)
    )
    ikm = HKDF(hashes.SHA256(), 32, auth, b"WebPush: info\x00" + receiver + sender).derive(shared)
    cek = HKDF(hashes.SHA256(), 16, salt, b"Content-Encoding: aes128gcm\x00").derive(ikm)
    nonce = HKDF(hashes.SHA256(), 12, salt, b"Content-Encoding: nonce\x00").derive(ikm)
    plain = AESGCM(cek).decrypt(nonce, body[21 + idlen :], None).rstrip(b"\x00")
    assert plain.endswith(b"\x02")  # the last (and only) record's delimiter
    return plain[:-1]


def test_a_turn_end_is_pushed_encrypted_and_a_gone_subscription_dropped(
    node: Node, project: Path, web_of: Any, push_service: PushService
) -> None:
    node.up()
    keys = node.run("web", "keys")
    assert keys["created"] is True
    again = node.run("web", "keys")
    assert again["public_key"] == keys["public_key"] and again["created"] is False
    path = Path(keys["path"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(unb64u(keys["public_key"])) == 65 and unb64u(keys["public_key"])[0] == 4

    node.run("spawn", "echo", "--name", "pushy", "--cwd", str(project), "--wait-ready")
    web = web_of("--listen", "127.0.0.1:0")
    base = web.url.rstrip("/")
    _, _, page = http(base + "/")
    config = json.loads(page.split('data-config="')[1].split('"')[0].replace("&quot;", '"'))
    assert config["push"] == keys["public_key"]

    # the browser's side of a subscription: its own P-256 key pair and auth secret
    private = ec.generate_private_key(ec.SECP256R1())
    p256dh = private.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    auth = secrets.token_bytes(16)
    endpoint = f"{push_service.origin}/push/{secrets.token_hex(8)}"
    sub = {
        "endpoint": endpoint,
        "expirationTime": None,
        "keys": {"p256dh": b64u(p256dh), "auth": b64u(auth)},
    }

    def post(path: str, doc: Any, csrf: str = config["csrf"]) -> tuple[int, dict[str, Any]]:
        headers = {sec.CSRF_HEADER: csrf, "Content-Type": "application/json"}
        status, _, text = http(base + path, json.dumps(doc).encode(), headers)
        return status, json.loads(text)

    assert post("/api/push/subscribe", sub, csrf="wrong")[0] == 403  # CSRF-checked
    status, doc = post("/api/push/subscribe", {**sub, "endpoint": "http://example.com/x"})
    assert status == 400 and "https" in doc["error"]["message"]
    status, doc = post("/api/push/subscribe", sub)
    assert status == 200 and doc["subscriptions"] == 1
    stored = path.parent / "push-subscriptions.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600

    node.run("prompt", "pushy", "ping")

    def turn_message() -> tuple[str, dict[str, str], bytes] | None:
        while True:
            try:
                got = push_service.got.get(timeout=0.2)
            except queue.Empty:
                return None
            message = json.loads(decrypt(got[2], private, auth))
            if message["kind"] == "turn":
                return got[0], got[1], json.dumps(message).encode()

    where, headers, plain = wait_for(turn_message, 20, "a pushed turn end")
    assert where == endpoint.removeprefix(push_service.origin)
    assert headers["Content-Encoding"] == "aes128gcm"
    assert int(headers["TTL"]) > 0
    verify_vapid(headers["Authorization"], push_service.origin, keys["public_key"])
    message = json.loads(plain)
    rid = node.record("pushy")["id"]
    assert message == {
        "title": "roost: pushy",
        "body": "ended a turn",
        "tag": f"{rid}:turn",
        "key": rid,
        "kind": "turn",
        "url": "/",
    }

    # the push service says the subscription is gone (410): the server drops it
    push_service.status = 410
    node.run("prompt", "pushy", "again")
    wait_for(lambda: not json.loads(stored.read_text())["subscriptions"], 20, "the drop")
    _, _, text = http(base + "/api/push")
    assert json.loads(text) == {"key": keys["public_key"], "subscriptions": 0}

    # unsubscribe; and a new key pair drops the subscriptions made with the old one
    assert post("/api/push/subscribe", sub)[1] == {"subscriptions": 1}
    assert post("/api/push/unsubscribe", {"endpoint": endpoint})[1] == {"removed": True}
    assert post("/api/push/subscribe", sub)[1] == {"subscriptions": 1}
    renewed = node.run("web", "keys", "--new")
    assert renewed["created"] is True and renewed["public_key"] != keys["public_key"]
    _, _, text = http(base + "/api/push")
    assert json.loads(text) == {"key": renewed["public_key"], "subscriptions": 0}
