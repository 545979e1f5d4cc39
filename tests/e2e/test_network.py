"""Network endpoints: loopback-only without CURVE; anything else needs CURVE keys (ZAP), roles.

The node binds 0.0.0.0 (so CURVE is required) and the test connects through 127.0.0.1: nothing
leaves the machine. Ports are chosen free at run time.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import zmq

from roost.client.client import Client, Curve
from roost.wire.errors import RoostError
from tests.e2e.conftest import Node, client_keys, free_port, wait_for


def _connect(port: int, server: str, pair: dict[str, str] | None, token: str = "") -> Client:
    curve = Curve(server, pair["public"], pair["secret"]) if pair else None
    return Client(f"tcp://127.0.0.1:{port}", token, timeout=3.0, curve=curve)


def test_a_network_endpoint_needs_curve_and_honours_roles(node: Node, tmp_path: Path) -> None:
    port = free_port()
    assert node.error("node", "up", "--listen", f"tcp://0.0.0.0:{port}")["code"] == (
        "insecure-listen"
    )
    assert not (node.state_dir / "node.json").exists()  # refused: nothing started
    server = node.run("keys", "new")["public"]
    operator = client_keys(node, tmp_path / "op.json", "operator", "ops")
    observer = client_keys(node, tmp_path / "ob.json", "observer", "watch")
    status = node.up("--listen", f"tcp://0.0.0.0:{port}")
    assert status["endpoints"]["network"]["curve"] and (
        status["endpoints"]["network"]["server_key"] == server
    )

    with _connect(port, server, operator) as op:
        assert op.initialize()["role"] == "operator"
        stream = op.subscribe("e/")
        try:
            rid = op.call("session.spawn", {"provider": "echo", "cwd": str(tmp_path)})["record"][
                "id"
            ]
            op.call("session.prompt", {"id": rid, "text": "over curve"})
            wait_for(
                lambda: (
                    "echo: over curve"
                    in op.call("session.show", {"id": rid, "screen": True})["screen"]
                ),
                15,
                "the answer",
            )
            got = wait_for(lambda: stream.recv(0.5), 10, "an event over the CURVE PUB")
            assert got[0].startswith("e/")
        finally:
            stream.close()
    with _connect(port, server, observer) as ob:
        assert ob.initialize()["role"] == "observer"
        assert [r["id"] for r in ob.call("session.list")["records"]] == [rid]
        with pytest.raises(RoostError) as refused:
            ob.call("session.stop", {"id": rid})
        assert refused.value.code == "forbidden"

    public, secret = _pair()
    stranger = {"public": public, "secret": secret}
    token = (node.state_dir / "token").read_text().strip()
    for pair, tok in ((stranger, ""), (None, token)):  # unknown key; the token without CURVE
        with _connect(port, server, pair, tok) as c, pytest.raises(RoostError) as silent:
            c.initialize()
        assert silent.value.code == "timeout"  # the handshake is refused: no answer at all

    with _connect(port, server, operator) as still, _connect(port, server, observer) as ob:
        assert still.initialize()["role"] == "operator" and ob.initialize()["role"] == "observer"
        node.run("keys", "allow", observer["public"], "--role", "operator", "--name", "watch")
        ob.call("session.rename", {"id": rid, "name": "promoted"})  # its new role, at once
        node.run("keys", "revoke", "ops")
        with pytest.raises(RoostError) as cut:  # a connection already open is cut off too
            still.call("session.list")
        assert cut.value.code == "unauthorized"
        with pytest.raises(RoostError) as again:
            still.call("session.list")
        assert again.value.code == "unauthorized"
    with _connect(port, server, operator) as gone, pytest.raises(RoostError) as revoked:
        gone.initialize()
    assert revoked.value.code == "timeout"
    assert node.record(rid)["state"] == "live"  # none of this touched the session


def _pair() -> tuple[str, str]:
    public, secret = zmq.curve_keypair()
    return public.decode(), secret.decode()


def test_a_loopback_endpoint_serves_the_token_without_curve(node: Node) -> None:
    bad = node.error("node", "up", "--listen", "127.0.0.1:1")
    assert bad["code"] == "bad-request" and bad["detail"]["field"] == "listen"
    port = free_port()
    network = node.up("--listen", f"tcp://127.0.0.1:{port}")["endpoints"]["network"]
    assert network["curve"] is False
    token = (node.state_dir / "token").read_text().strip()
    with Client(f"tcp://127.0.0.1:{port}", token, timeout=5.0) as c:
        assert c.initialize()["role"] == "operator"
        assert c.call("session.list")["records"] == []
    stranger = Client(f"tcp://127.0.0.1:{port}", "wrong", timeout=5.0)
    with stranger, pytest.raises(RoostError) as refused:
        stranger.initialize()
    assert refused.value.code == "unauthorized"
