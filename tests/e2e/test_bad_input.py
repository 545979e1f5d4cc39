"""Bad input gets a clear error code and leaves the node serving everyone else."""

from __future__ import annotations

import json
from typing import Any

import msgpack
import pytest

from roost.client.client import Client
from roost.client.locate import read_node_info
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from tests.e2e.conftest import Node


def _raw_reply(client: Client, frames: list[bytes]) -> tuple[p.Header, dict[str, Any]]:
    client.send_raw(frames)
    got = client.recv_raw(timeout=5.0)
    assert got is not None, "no reply to a malformed message"
    return p.Header.decode(got[0]), p.unpack(got[1])


def _serving(node: Node) -> None:
    with node.client() as client:
        assert client.call("node.status")["node_id"]
        assert isinstance(client.call("session.list")["records"], list)


@pytest.fixture
def up(node: Node) -> Node:
    node.up()
    return node


def test_prompt_to_an_unknown_record(up: Node) -> None:
    err = up.error("prompt", "no-such-record", "hello")
    assert err["code"] == "not-found" and err["detail"] == {"ref": "no-such-record"}
    _serving(up)


@pytest.mark.parametrize(
    "frames, code",
    [
        ([b"\xc1"], "bad-request"),  # one frame, not msgpack
        ([b"\xc1", b"\x80"], "bad-request"),  # header not msgpack
        ([msgpack.packb([1, 2]), b"\x80"], "bad-request"),  # header not a map
        ([msgpack.packb({"k": "bogus"}), b"\x80"], "bad-request"),  # unknown kind
        ([msgpack.packb({"k": "request", "id": 7}), b"\x80"], "bad-request"),  # id of wrong type
    ],
)
def test_malformed_messages_get_bad_request(up: Node, frames: list[bytes], code: str) -> None:
    with up.client() as client:
        header, body = _raw_reply(client, frames)
        assert header.kind == p.ERROR and body["code"] == code
    _serving(up)


def test_malformed_body_and_wrong_types_name_the_field(up: Node) -> None:
    with up.client() as client:
        header = p.Header(kind=p.REQUEST, rid="x1", method="session.spawn", target="node")
        reply_header, body = _raw_reply(client, [header.encode(), b"\x92\x01"])
        assert reply_header.rid == "x1" and body["code"] == "bad-request"
        with pytest.raises(RoostError) as wrong:
            client.call("session.spawn", {"provider": 5, "cwd": "/"})
        assert wrong.value.code == "bad-request" and wrong.value.detail["field"] == "provider"
        with pytest.raises(RoostError) as unknown:
            client.call("session.explode", {})
        assert unknown.value.code == "unknown-method"
        with pytest.raises(RoostError) as internal:
            client.call("state.record.list", {}, target="state")
        assert internal.value.code == "forbidden"
    _serving(up)


def test_oversized_frame_is_refused_and_the_node_keeps_serving(up: Node) -> None:
    with up.client() as client:
        big = {"id": "x", "text": "a" * (p.BODY_LIMIT + 10)}
        with pytest.raises(RoostError) as err:
            client.call("session.prompt", big)
        assert err.value.code == "frame-too-large"
    _serving(up)


def test_requests_before_initialize_and_bad_tokens(up: Node) -> None:
    info = read_node_info(up.state_dir)
    raw = Client(info.router, "wrong-token", events=info.events, timeout=5.0)
    try:
        with pytest.raises(RoostError) as early:
            raw.call("session.list")
        assert early.value.code == "not-initialized"
        with pytest.raises(RoostError) as denied:
            raw.initialize()
        assert denied.value.code == "unauthorized"
        with pytest.raises(RoostError) as still:
            raw.call("session.list")
        assert still.value.code == "not-initialized"
        with pytest.raises(RoostError) as version:
            raw.call("initialize", {"versions": [99], "token": "x"}, target="broker")
        assert version.value.code == "unsupported-version"
        with pytest.raises(RoostError) as boolean:  # True is an int to Python, not a version
            raw.call("initialize", {"versions": [True], "token": "x"}, target="broker")
        assert boolean.value.code == "bad-request"
    finally:
        raw.close()
    client = up.client()
    try:
        assert client.info["version"] == 1
        header = p.Header(kind=p.REQUEST, rid="v2", method="session.list", target="node", version=2)
        client.send_raw([header.encode(), p.pack({})])
        frames = client.recv_raw(5.0)
        assert frames is not None
        refused = p.unpack(frames[1])
        assert refused["code"] == "unsupported-version" and refused["detail"] == {"version": 1}
    finally:
        client.close()
    _serving(up)


def test_an_observer_reads_and_subscribes_but_never_mutates(up: Node) -> None:
    rid = up.run("spawn", "echo", "--name", "watched")["record"]["id"]
    info = read_node_info(up.state_dir)
    observer_token = (up.state_dir / "observer-token").read_text().strip()
    observer = Client(info.router, observer_token, events=info.events, timeout=5.0)
    try:
        assert observer.initialize()["role"] == "observer"
        assert [r["id"] for r in observer.call("session.list")["records"]] == [rid]
        assert observer.call("session.show", {"id": rid, "screen": True})["screen"] is not None
        assert observer.call("events.since", {"after": 0})["events"]
        watched = observer.call("node.status")  # no host paths nor process ids for a watcher
        assert watched["node_id"] and "state_dir" not in watched and "pid" not in watched
        assert all("pid" not in actor for actor in watched["actors"].values())
        assert str(up.state_dir) not in json.dumps(watched)
        full = up.run("node", "status")  # the operator's view has them
        assert full["state_dir"] == str(up.state_dir) and full["pid"] > 0
        for method, body in (
            ("session.prompt", {"id": rid, "text": "x"}),
            ("session.stop", {"id": rid}),
            ("node.shutdown", {}),
            ("session.spawn", {"provider": "echo", "cwd": "/"}),
        ):
            with pytest.raises(RoostError) as refused:
                observer.call(method, body)
            assert refused.value.code == "forbidden", method
    finally:
        observer.close()
    assert up.record(rid)["state"] == "live"
    assert not [e for e in up.events() if e["kind"] == "session.input"]
    with up.client() as operator:
        assert operator.info["role"] == "operator"
