"""The protocol as docs/PROTOCOL.md writes it, checked on the raw socket of a real node.

A bad header field keeps a readable id and names the field; a nil
optional header field counts as absent; ``node.json`` names a ``--listen`` endpoint; a ``busy``
refusal of a racing turn names a turn a client can wait on; ``pong`` answers its ``ping``'s id;
a failed re-``initialize`` ends the old registration; a forgotten record's grant is
``stale-grant`` ("record forgotten").
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
from typing import Any

import msgpack
import pytest

from roost.client.client import Client
from roost.client.locate import read_node_info, read_token
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from tests.e2e.conftest import Node, free_port, wait_for

TURN_ID = re.compile(r"^t[0-9a-f]{11}$")


@pytest.fixture
def up(node: Node) -> Node:
    node.up()
    return node


def _reply(client: Client, frames: list[bytes]) -> tuple[p.Header, dict[str, Any]]:
    client.send_raw(frames)
    got = client.recv_raw(timeout=10.0)
    assert got is not None, "no reply"
    return p.Header.decode(got[0]), p.unpack(got[1])


def _request(header: dict[str, Any], body: dict[str, Any] | None = None) -> list[bytes]:
    wire = {"v": 1, "k": "request", "t": "node", **header}
    return [msgpack.packb(wire, use_bin_type=True), p.pack(body or {})]


# -- a header field of the wrong type ------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"v": "1"}, "v"),
        ({"s": {"generation": "1"}}, "s.generation"),
        ({"op": 5}, "op"),
        ({"m": 5}, "m"),
        ({"g": ["g1"]}, "g"),
        ({"s": "session"}, "s"),
        ({"k": "shout"}, "k"),
    ],
)
def test_a_wrong_typed_header_field_keeps_the_id_and_names_the_field(
    up: Node, bad: dict[str, Any], field: str
) -> None:
    with up.client() as client:
        header = {"id": "w15", "m": "session.list", **bad}
        reply, body = _reply(client, _request(header))
        assert reply.kind == p.ERROR and reply.rid == "w15", (reply, body)
        assert body["code"] == "bad-request" and body["detail"] == {"field": field}, body
        assert client.call("session.list")["records"] == []  # the connection serves on


def test_an_id_of_the_wrong_type_is_unreadable_and_named(up: Node) -> None:
    with up.client() as client:
        reply, body = _reply(client, _request({"id": 15, "m": "session.list"}))
        assert reply.kind == p.ERROR and reply.rid == ""
        assert body["code"] == "bad-request" and body["detail"] == {"field": "id"}


# -- a nil optional field counts as absent -------------------------------------------------------


@pytest.mark.parametrize(
    "nil",
    [{"s": {"generation": None}}, {"s": None}, {"op": None}, {"g": None}, {"f": None}, {"v": None}],
)
def test_nil_optional_header_fields_count_as_absent(up: Node, nil: dict[str, Any]) -> None:
    rid = up.run("spawn", "echo", "--name", "nil")["record"]["id"]
    with up.client() as client:
        header = {"id": "n17", "m": "session.prompt", **nil}
        reply, body = _reply(client, _request(header, {"id": rid, "text": "nil is absent"}))
        assert reply.kind == p.RESPONSE and reply.rid == "n17", body
        assert body["accepted"] is True
    up.wait_screen(rid, "echo: nil is absent")


# -- node.json names the network endpoint --------------------------------------------------------


def test_node_json_names_the_listen_endpoint(node: Node) -> None:
    listen = f"tcp://127.0.0.1:{free_port()}"
    status = node.up("--listen", listen)
    written = json.loads((node.state_dir / "node.json").read_text())
    network = written["endpoints"]["network"]
    assert network == status["endpoints"]["network"]
    assert network["router"] == listen and network["curve"] is False
    assert network["events"].startswith("tcp://127.0.0.1:")
    # what node.json names is served: a client dials it and subscribes where it says
    client = Client(network["router"], read_token(node.state_dir), timeout=10.0)
    try:
        assert client.initialize()["events"] == network["events"]
        assert client.call("node.status")["node_id"] == written["node_id"]
    finally:
        client.close()
    node.run("node", "stop")
    node.up()  # without --listen: no network endpoint named
    assert "network" not in json.loads((node.state_dir / "node.json").read_text())["endpoints"]


# -- busy names a turn a client can wait on ------------------------------------------------------


def test_a_racing_turn_is_refused_busy_naming_the_turn_that_runs(up: Node) -> None:
    """The first turn is held in acceptance (its adapter host stopped, asked for each text)
    while the second arrives; the second's ``busy`` names the first's real turn id, and waiting
    on it works."""
    status = up.run("node", "status")
    env = ["--env", "ROOST_ECHO_DELAY_MS=300", "--env", "ROOST_ECHO_PROMPT_ATTACHED=1"]
    rid = up.run("spawn", "echo", "--mode", "stream", *env)["record"]["id"]
    adapters = status["actors"]["adapters"]["pid"]
    racer, watcher = up.client(), up.client()
    replies: dict[str, tuple[str, dict[str, Any]]] = {}

    def collect(timeout: float) -> bool:
        got = racer.recv_raw(timeout)
        if got is not None:
            header = p.Header.decode(got[0])
            replies[header.rid] = (header.kind, p.unpack(got[1]))
        return got is not None

    os.kill(adapters, signal.SIGSTOP)
    try:
        for name in ("race-1", "race-2"):
            racer.send_raw(_request({"id": name, "m": "session.turn"}, {"id": rid, "text": name}))
        # both are in the node (the second waits on the first's acceptance), or one was answered
        wait_for(
            lambda: collect(0.0) or watcher.call("node.status")["accepting"] >= 2,
            10,
            "both turns to reach the node",
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(adapters, signal.SIGCONT)
    while len(replies) < 2:
        assert collect(30.0), f"only {replies}"
    racer.close()
    kinds = sorted(kind for kind, _ in replies.values())
    assert kinds == [p.ERROR, p.RESPONSE], replies
    accepted = next(body for kind, body in replies.values() if kind == p.RESPONSE)
    refused = next(body for kind, body in replies.values() if kind == p.ERROR)
    assert refused["code"] == "busy", refused
    assert TURN_ID.match(str(refused["detail"]["turn"])), refused
    assert refused["detail"]["turn"] == accepted["turn"]
    try:
        waited = watcher.call(
            "session.turn.wait",
            {"id": rid, "turn": refused["detail"]["turn"], "timeout_ms": 20_000},
            timeout=30.0,
        )
    finally:
        watcher.close()
    assert waited["ended"] and waited["turn"]["state"] == "completed", waited


# -- pong, re-initialize, a forgotten record's grant ---------------------------------------------


def test_pong_answers_the_id_of_its_ping(up: Node) -> None:
    with up.client() as client:
        reply, body = _reply(client, [p.pack({"v": 1, "k": "ping", "id": "p19"}), p.pack({})])
        assert reply.kind == p.PONG and reply.rid == "p19" and reply.sender == "broker"
        assert body["registered"] is True and body["incarnation"]


@pytest.mark.parametrize("offered", ["wrong-token", None])
def test_a_failed_reinitialize_ends_the_registration(up: Node, offered: str | None) -> None:
    info = read_node_info(up.state_dir)
    client = Client(info.router, read_token(up.state_dir), events=info.events, timeout=10.0)
    try:
        assert client.initialize()["role"] == "operator"
        assert client.call("session.list")["records"] == []
        again = {"versions": [1], "token": offered}
        with pytest.raises(RoostError) as refused:
            client.call("initialize", again, target="broker")
        assert refused.value.code == "unauthorized"
        for method in ("session.list", "node.shutdown"):  # no role left, operator or other
            with pytest.raises(RoostError) as gone:
                client.call(method)
            assert gone.value.code == "not-initialized", method
        _, body = _reply(client, [p.pack({"v": 1, "k": "ping", "id": "p"}), p.pack({})])
        assert body["registered"] is False
        assert client.initialize()["role"] == "operator"  # a good initialize registers again
        assert client.call("session.list")["records"] == []
    finally:
        client.close()
    assert up.run("node", "status")["pid"] == up.pid()


def test_a_forgotten_records_grant_is_stale_grant_record_forgotten(up: Node) -> None:
    rid = up.run("spawn", "echo", "--name", "gone")["record"]["id"]
    grant = up.run("claim", rid)["claim"]["grant"]
    up.run("stop", rid, "--grant", grant)
    assert up.run("forget", rid, "--grant", grant)["forgotten"] is True
    with up.client() as client:
        for method, body in (
            ("session.prompt", {"id": rid, "text": "x"}),
            ("session.rename", {"id": "gone", "name": "back"}),
            ("session.release", {"id": rid, "grant": grant}),
        ):
            with pytest.raises(RoostError) as stale:
                client.call(method, body, grant="" if method == "session.release" else grant)
            err = stale.value
            assert err.code == "stale-grant", (method, err)
            assert err.detail == {"grant": grant, "reason": "record forgotten"}, method
        with pytest.raises(RoostError) as missing:  # without the grant: the record is not there
            client.call("session.prompt", {"id": rid, "text": "x"})
        assert missing.value.code == "not-found"


def test_bin_map_keys_are_refused_as_section_7_says(up: Node) -> None:
    with up.client() as client:
        body = msgpack.packb({"id": "x", b"bin-key": "v"}, use_bin_type=True)
        reply, refused = _reply(client, [_request({"id": "b19", "m": "session.show"})[0], body])
        assert (reply.rid, refused["code"]) == ("b19", "bad-request"), refused
        header = msgpack.packb({"v": 1, "k": "request", "id": "b19h", b"k2": 1}, use_bin_type=True)
        reply, refused = _reply(client, [header, p.pack({})])
        assert (reply.kind, reply.rid, refused["code"]) == (p.ERROR, "", "bad-request")
