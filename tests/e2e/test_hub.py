"""The hub: a lab of one hub and two nodes (lab-a, lab-b) under the test's
tmp dir, each with its own state directory and CURVE key pair, on a free loopback port.

Nodes dial out to the hub; the operator talks only to the hub, through the real CLI (``--hub``,
``--node``) and the client library. Every process of the lab carries one test marker, so the
finaliser reaps the hub, both nodes and their children even when a test failed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
import zmq

from roost.client.client import Client, Curve
from roost.client.keys import node_keys
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from tests.e2e.conftest import MARK, JsonLines, Node, client_keys, free_port, wait_for
from tests.e2e.test_quick_ls import same_both_ways

NODES = ("lab-a", "lab-b")


@dataclass
class Lab:
    hub: Node  # the hub's directory; its Node also runs every CLI command aimed at the hub
    nodes: dict[str, Node]
    endpoint: str
    hub_key: str
    me: Path  # the operator's key file
    events_port: int = field(default_factory=free_port)  # the same at every start of the hub

    def remote(self, *args: str, node: str = "", key: Path | None = None) -> list[str]:
        # a z85 key may begin with "-": as an option's value it is still read as the value
        opts = ["--hub", self.endpoint, "--server-key", self.hub_key]
        opts += ["--key-file", str(key or self.me)]
        return [*opts, *(["--node", node] if node else []), *args]

    def run(self, *args: str, node: str = "", key: Path | None = None) -> dict[str, Any]:
        """``roost --hub ... [--node NODE] ARGS``."""
        return self.hub.run(*self.remote(*args, node=node, key=key))

    def error(self, *args: str, node: str = "", key: Path | None = None) -> dict[str, Any]:
        return self.hub.error(*self.remote(*args, node=node, key=key))

    def up_hub(self) -> dict[str, Any]:
        port = str(self.events_port)
        return self.hub.run("hub", "up", "--listen", self.endpoint, "--events-port", port)

    def linked(self) -> dict[str, dict[str, Any]]:
        """The nodes linked to the hub now, by node id."""
        return {n["node_id"]: n for n in self.run("hub", "nodes")["nodes"] if n["linked"]}

    def wait_linked(self, wanted: set[str], timeout: float = 15.0) -> dict[str, dict[str, Any]]:
        return wait_for(
            lambda: got if set(got := self.linked()) == wanted else None,
            timeout,
            f"the hub to list exactly {sorted(wanted)}",
        )

    def client(self, pair: dict[str, str] | None = None) -> Client:
        """A client-library connection to the hub (not initialised), as ``pair`` or the operator."""
        pair = pair or json.loads(self.me.read_text())
        assert pair is not None
        curve = Curve(self.hub_key, pair["public"], pair["secret"])
        return Client(self.endpoint, "", timeout=10.0, curve=curve)

    def node_pair(self, name: str) -> dict[str, str]:
        pair = node_keys(self.nodes[name].state_dir)
        assert pair is not None
        return {"public": pair[0], "secret": pair[1]}

    def screen(self, node: str, ref: str) -> str:
        return str(self.run("show", ref, "--screen", node=node).get("screen") or "")

    def wait_screen(self, node: str, ref: str, text: str) -> str:
        return wait_for(
            lambda: s if text in (s := self.screen(node, ref)) else None,
            15,
            f"{text!r} on the screen of {ref} on {node}, through the hub",
        )


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    hub = Node(tmp_path / "hub")
    nodes = {name: Node(tmp_path / name) for name in NODES}
    for n in nodes.values():  # one marker for the whole lab: the hub's kill_all reaps it all
        n.mark = hub.mark
        n.env[MARK] = hub.mark
    try:
        hub_key = hub.run("keys", "new")["public"]
        for name, n in nodes.items():
            public = n.run("keys", "new")["public"]
            hub.run("keys", "allow", "--role", "node", "--name", name, "--", public)
        me = tmp_path / "me.json"
        client_keys(hub, me, "operator", "me")
        lab = Lab(hub, nodes, f"tcp://127.0.0.1:{free_port()}", hub_key, me)
        started = lab.up_hub()
        assert started["hub"] is True and started["server_key"] == hub_key
        assert started["endpoints"]["router"] == lab.endpoint
        for name, n in nodes.items():
            n.up("--node-id", name, "--hub", lab.endpoint, "--hub-key", hub_key)
        lab.wait_linked(set(NODES))
        yield lab
    finally:
        hub.kill_all()


def _spawn(lab: Lab, node: str, name: str, project: Path) -> str:
    rid: str = lab.run("spawn", "echo", "--name", name, "--cwd", str(project), node=node)["record"][
        "id"
    ]
    return rid


def _hub_pid(lab: Lab) -> int:
    info = json.loads((lab.hub.state_dir / "node.json").read_text())
    assert info["node_id"] == "hub"
    return int(info["pid"])


def _gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def test_a_lab_of_two_nodes_is_driven_through_the_hub(lab: Lab, project: Path) -> None:
    linked = lab.linked()
    for name, n in lab.nodes.items():
        status = n.run("node", "status")
        assert status["endpoints"]["hub"] == {
            "endpoint": lab.endpoint,
            "server_key": lab.hub_key,
            "linked": True,
        }
        assert linked[name]["incarnation"] == status["incarnation"]
    status = lab.run("hub", "status")
    assert status["hub"] is True and [n["node_id"] for n in status["nodes"]] == list(NODES)

    alpha = _spawn(lab, "lab-a", "alpha", project)
    beta = _spawn(lab, "lab-b", "beta", project)
    lab.run("prompt", "alpha", "hello lab", node="lab-a")
    lab.wait_screen("lab-a", "alpha", "echo: hello lab")
    assert "echo: hello lab" not in lab.screen("lab-b", "beta")  # each node its own session
    # the session lives on its node, as the node itself tells it
    assert lab.nodes["lab-a"].record("alpha")["id"] == alpha
    assert "echo: hello lab" in lab.nodes["lab-a"].screen("alpha")
    assert lab.nodes["lab-b"].record("beta")["id"] == beta
    assert lab.nodes["lab-a"].error("show", "beta")["code"] == "not-found"

    listing = lab.run("ls")
    assert listing["unanswered"] == {}
    where = {r["id"]: (r["node"], r["name"]) for r in listing["records"]}
    assert where == {alpha: ("lab-a", "alpha"), beta: ("lab-b", "beta")}

    # on the hub's machine, by its directory alone (its local token), and stopped that way
    assert [n["node_id"] for n in lab.hub.run("hub", "nodes")["nodes"]] == list(NODES)
    local = lab.hub.run("hub", "status")
    assert local["incarnation"] == status["incarnation"] and local["pid"] == _hub_pid(lab)
    assert lab.hub.run("hub", "stop")["stopped"] is True
    assert not (lab.hub.state_dir / "node.json").exists()
    assert lab.nodes["lab-a"].record("alpha")["state"] == "live"  # the nodes run on


def test_events_are_relayed_through_the_hub(lab: Lab, project: Path) -> None:
    alpha = _spawn(lab, "lab-a", "alpha", project)
    beta = _spawn(lab, "lab-b", "beta", project)
    with lab.client() as c:
        info = c.initialize()
        assert info["target"] == "hub" and info["role"] == "operator"
        c.via("lab-a/node")
        stream = c.subscribe("e/")
        try:
            # PUB/SUB joins late: prompt until an event arrives, so the relay is known to be up
            wait_for(
                lambda: (
                    c.call("session.prompt", {"id": alpha, "text": "warm up"})
                    and stream.recv(0.5) is not None
                ),
                15,
                "the first relayed event",
            )
            lab.run("prompt", "beta", "on lab-b only", node="lab-b")
            lab.wait_screen("lab-b", "beta", "echo: on lab-b only")
            seen: list[tuple[str, dict[str, Any]]] = []

            def the_input() -> tuple[str, dict[str, Any]] | None:
                got = stream.recv(0.2)
                if got is not None:
                    seen.append(got)
                    data = got[1].get("data") or {}
                    if got[1].get("kind") == "session.input" and "via hub" in str(data):
                        return got
                return None

            c.call("session.prompt", {"id": alpha, "text": "via hub"})
            topic, event = wait_for(the_input, 15, "the session.input of 'via hub'")
        finally:
            stream.close()
        assert topic == f"e/{alpha}/session.input"  # the hub's lab-a/ prefix is stripped
        assert all(t.startswith("e/") and beta not in t for t, _ in seen)
        assert all(e.get("record") != beta for _, e in seen)  # only lab-a's events

        logged = c.call("events.since", {"after": 0, "limit": event["seq"]})["events"]
        assert logged[-1]["seq"] == event["seq"] and logged[-1]["kind"] == "session.input"
        assert logged[-1]["data"] == event["data"]
    local = lab.nodes["lab-a"].run("events", "--after", "0", "--limit", str(event["seq"]))
    assert local["events"] == logged  # the hub answers with the node's own log
    remote = lab.run("events", "--after", "0", node="lab-b")["events"]
    assert remote and all(e.get("record") in (None, beta) for e in remote)

    with lab.client() as c:
        c.initialize()
        stream = c.subscribe("lab-b/e/")  # no via: topics as the hub publishes them
        try:

            def raw() -> tuple[str, dict[str, Any]] | None:
                c.call("session.prompt", {"id": beta, "text": "raw"}, target="lab-b/node")
                return stream.recv(0.5)

            topic, event = wait_for(raw, 15, "an event of lab-b on the hub's PUB")
        finally:
            stream.close()
    assert topic.startswith(f"lab-b/e/{beta}/") and event["record"] == beta


def test_a_dead_hub_leaves_the_sessions_alone_and_nodes_link_again(lab: Lab, project: Path) -> None:
    alpha = _spawn(lab, "lab-a", "alpha", project)
    before = {name: n["incarnation"] for name, n in lab.linked().items()}
    hub_before = lab.run("hub", "status")["incarnation"]
    pid = _hub_pid(lab)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: _gone(pid), 10, "the hub to die")

    gone = lab.hub.error("--timeout", "1", *lab.remote("hub", "nodes"))
    assert gone["code"] == "timeout"  # no hub: no answer
    a = lab.nodes["lab-a"]
    assert a.record("alpha")["state"] == "live"
    a.run("prompt", "alpha", "hub gone")  # the node serves its local clients on
    a.wait_screen("alpha", "echo: hub gone")

    restarted = lab.up_hub()
    assert restarted["pid"] != pid and restarted["incarnation"] != hub_before
    linked = lab.wait_linked(set(NODES))
    # the same node processes linked again: nothing on the nodes restarted
    assert {name: n["incarnation"] for name, n in linked.items()} == before
    assert a.run("node", "status")["endpoints"]["hub"]["linked"] is True
    lab.run("prompt", "alpha", "hub back", node="lab-a")
    screen = lab.wait_screen("lab-a", "alpha", "echo: hub back")
    assert "echo: hub gone" in screen
    rec = a.record("alpha")
    assert rec["id"] == alpha and rec["state"] == "live" and rec["generation"] == 1


def _hello(lab: Lab, pair: dict[str, str], address: str) -> tuple[p.Header, dict[str, Any]]:
    """A hello over CURVE with ``pair``, from a raw DEALER; the hub's answer."""
    sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    Curve(lab.hub_key, pair["public"], pair["secret"]).apply(sock)
    sock.connect(lab.endpoint)
    try:
        body = {"address": address, "incarnation": "intruder", "token": "", "meta": {}}
        sock.send_multipart([p.Header(kind=p.HELLO, rid="hello").encode(), p.pack(body)])
        assert sock.poll(10_000), "the hub did not answer the hello"
        header, reply = sock.recv_multipart()
        return p.Header.decode(header), p.unpack(reply)
    finally:
        sock.close(0)


def test_the_hub_refuses_what_a_caller_may_not_do(lab: Lab, project: Path, tmp_path: Path) -> None:
    alpha = _spawn(lab, "lab-a", "alpha", project)
    watcher = tmp_path / "watch.json"
    client_keys(lab.hub, watcher, "observer", "watch")
    forbidden = lab.error("stop", "alpha", node="lab-a", key=watcher)
    assert forbidden["code"] == "forbidden"
    assert [r["id"] for r in lab.run("ls", key=watcher)["records"]] == [alpha]
    assert lab.run("show", "alpha", node="lab-a", key=watcher)["record"]["state"] == "live"

    unknown = lab.error("show", "alpha", node="lab-z")
    assert unknown["code"] == "unreachable"
    nowhere = lab.error("show", "alpha")  # a node's method, no node named
    assert nowhere["code"] == "bad-request" and nowhere["detail"]["field"] == "node"

    with lab.client(lab.node_pair("lab-a")) as as_client, pytest.raises(RoostError) as refused:
        as_client.initialize()  # a node's key is for its link, not for a client
    assert refused.value.code == "unauthorized"

    before = lab.linked()
    header, body = _hello(lab, lab.node_pair("lab-a"), "lab-b/node")  # one node posing as another
    assert header.kind == p.ERROR and body["code"] == "forbidden"
    header, body = _hello(lab, lab.node_pair("lab-a"), "hub")
    assert header.kind == p.ERROR and body["code"] == "forbidden"
    header, body = _hello(lab, json.loads(lab.me.read_text()), "lab-b/node")  # a client's key
    assert header.kind == p.ERROR and body["code"] == "unauthorized"
    assert lab.linked().keys() == before.keys()
    assert {k: v["incarnation"] for k, v in lab.linked().items()} == {
        k: v["incarnation"] for k, v in before.items()
    }
    assert lab.run("ls")["unanswered"] == {}  # lab-b still answers as itself
    assert lab.nodes["lab-a"].record("alpha")["state"] == "live"  # nothing was touched


def test_a_revoked_node_key_drops_that_node_only(lab: Lab, project: Path) -> None:
    alpha = _spawn(lab, "lab-a", "alpha", project)
    beta = _spawn(lab, "lab-b", "beta", project)
    lab.hub.run("keys", "revoke", "lab-b")
    lab.wait_linked({"lab-a"})
    assert lab.error("show", "beta", node="lab-b")["code"] == "unreachable"
    listing = lab.run("ls")
    assert [(r["id"], r["node"]) for r in listing["records"]] == [(alpha, "lab-a")]
    assert listing["unanswered"] == {"lab-b": "unreachable"}  # seen before, not linked now
    nodes = {n["node_id"]: n for n in lab.run("hub", "nodes")["nodes"]}
    assert nodes["lab-a"]["linked"] is True and nodes["lab-b"]["linked"] is False
    assert nodes["lab-b"]["gone_s"] >= 0
    lab.run("prompt", "alpha", "still here", node="lab-a")
    lab.wait_screen("lab-a", "alpha", "echo: still here")

    b = lab.nodes["lab-b"]
    wait_for(
        lambda: b.run("node", "status")["endpoints"]["hub"]["linked"] is False,
        15,
        "lab-b to see its link refused",
    )
    rec = b.record("beta")
    assert rec["id"] == beta and rec["state"] == "live"
    b.run("prompt", "beta", "on my own")  # the node and its session run on
    b.wait_screen("beta", "echo: on my own")


def test_a_hub_without_keys_names_its_state_dir_in_the_fix(tmp_path: Path) -> None:
    """The hub's directory is never the default one: the key commands it asks for name it."""
    hub = Node(tmp_path / "my hub")
    del hub.env["ROOST_STATE_DIR"]
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    try:
        err = hub.error("--state-dir", str(hub.state_dir), "hub", "up", "--listen", endpoint)
        assert err["code"] == "insecure-listen"
        given = f"roost --state-dir '{hub.state_dir}'"
        assert f"`{given} keys new`" in err["message"], err
        assert f"`{given} keys allow" in err["message"], err
    finally:
        hub.kill_all()


def test_a_hub_or_a_link_without_keys_does_not_start(tmp_path: Path) -> None:
    hub, node = Node(tmp_path / "hub"), Node(tmp_path / "lab-a")
    node.mark, node.env[MARK] = hub.mark, hub.mark
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    try:
        assert hub.error("hub", "up", "--listen", endpoint)["code"] == "insecure-listen"
        hub_key = hub.run("keys", "new")["public"]  # a key pair, but no key allowed yet
        assert hub.error("hub", "up", "--listen", endpoint)["code"] == "insecure-listen"
        assert not (hub.state_dir / "node.json").exists()
        wait_for(lambda: not hub.processes(), 10, "the refused hubs to exit")

        no_pair = node.error("node", "up", "--hub", endpoint, "--hub-key", hub_key)
        assert no_pair["code"] == "bad-request" and no_pair["detail"]["field"] == "hub"
        node.run("keys", "new")
        no_key = node.error("node", "up", "--hub", endpoint)
        assert no_key["code"] == "bad-request" and "--hub-key" in no_key["message"]
        bad_key = node.error("node", "up", "--hub", endpoint, "--hub-key", "not a key")
        assert bad_key["code"] == "bad-request"
        bad_endpoint = node.error("node", "up", "--hub", "127.0.0.1:1", "--hub-key", hub_key)
        assert bad_endpoint["code"] == "bad-request" and bad_endpoint["detail"]["field"] == "hub"
        assert not (node.state_dir / "node.json").exists()
        wait_for(lambda: not node.processes(), 10, "the refused daemons to exit")
    finally:
        hub.kill_all()


def _dash_key() -> str:
    """A CURVE public key that begins with "-" (one in 85 does; z85 has the dash), as another
    program may make; one with an "h" in it, which a command line parser could take for -h."""
    while not (public := zmq.curve_keypair()[0].decode()).startswith("-") or "h" not in public:
        continue
    return public


def test_a_hub_key_may_begin_with_a_dash(node: Node) -> None:
    node.run("keys", "new")
    endpoint = f"tcp://127.0.0.1:{free_port()}"  # no hub there: the node starts all the same
    key = _dash_key()
    status = node.up("--node-id", "lab-a", "--hub", endpoint, "--hub-key", key)
    assert status["endpoints"]["hub"] == {"endpoint": endpoint, "server_key": key, "linked": False}


def test_a_node_key_beginning_with_a_dash_may_be_allowed(node: Node) -> None:
    key = _dash_key()
    allowed = node.run("keys", "allow", key, "--role", "node", "--name", "lab-a")
    assert allowed == {"key": key, "role": "node", "name": "lab-a", "replaced": None, "revoked": []}
    assert node.run("keys", "revoke", key) == {"revoked": [key], "by": "key", "count": 1}
    again = node.run("keys", "allow", "--role", "observer", "--", key)  # the explicit way
    assert again == {"key": key, "role": "observer", "name": "", "replaced": None, "revoked": []}


def _linked_as(lab: Lab, name: str) -> zmq.Socket[Any]:
    """A raw link for an allowed node key that no node uses: hello answered, registered."""
    pair = {"public": "", "secret": ""}
    pair["public"], pair["secret"] = (k.decode() for k in zmq.curve_keypair())
    lab.hub.run("keys", "allow", "--role", "node", "--name", name, "--", pair["public"])
    sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    Curve(lab.hub_key, pair["public"], pair["secret"]).apply(sock)
    sock.connect(lab.endpoint)
    body = {"address": f"{name}/node", "incarnation": "raw", "token": "", "meta": {}}
    sock.send_multipart([p.Header(kind=p.HELLO, rid="hello").encode(), p.pack(body)])
    assert p.Header.decode(_answer(sock)[0]).kind == p.RESPONSE
    return sock


def _answer(sock: zmq.Socket[Any]) -> list[bytes]:
    """The next message to a raw link that is not the broker's word on which output the hub's
    clients watch (``output.watched``, after the hello and whenever it changes)."""
    while True:
        assert sock.poll(10_000)
        frames = sock.recv_multipart()
        header = p.Header.decode(frames[0])
        if header.kind != p.NOTIFY or p.unpack(frames[1]).get("event") != "output.watched":
            return frames
        assert header.sender == "broker" and isinstance(p.unpack(frames[1])["prefixes"], list)


def test_a_link_answers_and_relays_for_its_own_node_only(lab: Lab) -> None:
    sock = _linked_as(lab, "lab-c")
    try:
        for target in ("hub", "lab-a/node"):  # a link does not make requests
            request = p.Header(kind=p.REQUEST, rid=f"to-{target}", method="hub.shutdown")
            request.target = target
            sock.send_multipart([request.encode(), p.pack({})])
            header, body = _answer(sock)
            assert p.Header.decode(header).rid == f"to-{target}"
            assert p.unpack(body)["code"] == "forbidden"
        with lab.client() as c:  # nor answer what it was not asked
            c.initialize()
            me = f"client/{c.info['connection_id']}"
            forged = p.Header(kind=p.RESPONSE, rid="c:1", target=me)
            sock.send_multipart([forged.encode(), p.pack({"records": []})])
            real = p.Header(kind=p.REQUEST, rid="real", method="hub.nodes", target="hub")
            c.send_raw([real.encode(), p.pack({})])
            frames = c.recv_raw(10.0)  # the hub answers; the forgery never reaches the client
            assert frames is not None and p.Header.decode(frames[0]).rid == "real"
            assert c.recv_raw(0.5) is None
        seen: list[str] = []

        def publish_both() -> bool:  # again until the subscription has joined
            for topic in ("lab-a/e/r0000000000/session.input", "lab-c/e/node/forged"):
                publish = p.Header(kind=p.PUBLISH, extra={"topic": topic})
                sock.send_multipart([publish.encode(), p.pack({"seq": 1})])
            while got := stream.recv(0.3):
                seen.append(got[0])
            return "lab-c/e/node/forged" in seen

        with lab.client() as c:
            c.initialize()
            stream = c.subscribe("lab-")
            try:
                wait_for(publish_both, 10, "lab-c's own event")
            finally:
                stream.close()
        assert not [t for t in seen if t.startswith("lab-a/")]  # another node's prefix: refused
        assert p.unpack(_answer(sock)[1])["code"] == "forbidden"
    finally:
        sock.close(0)
    assert lab.hub.run("hub", "status")["pid"] > 0  # the hub.shutdown never reached the hub


def test_the_hub_link_is_kept_for_later_starts_and_can_be_forgotten(lab: Lab) -> None:
    a = lab.nodes["lab-a"]
    a.run("node", "stop")
    lab.wait_linked({"lab-b"})
    assert lab.run("ls")["unanswered"] == {"lab-a": "unreachable"}  # gone, not forgotten
    assert a.up()["endpoints"]["hub"]["endpoint"] == lab.endpoint  # a plain `node up`
    lab.wait_linked(set(NODES))
    refused = a.error("node", "up", "--no-hub")  # running: its link is not changed under it
    assert refused["code"] == "node-running"
    a.run("node", "stop")
    assert "hub" not in a.up("--no-hub")["endpoints"]
    lab.wait_linked({"lab-b"})
    a.run("node", "stop")
    assert "hub" not in a.up()["endpoints"]  # forgotten for good


def test_the_hub_serves_its_own_directory_with_live_events(lab: Lab, project: Path) -> None:
    alpha = _spawn(lab, "lab-a", "alpha", project)
    with lab.hub.client() as local:  # by the hub's directory and token: no CURVE keys
        assert local.target == "hub"
        local.via("lab-a/node")
        stream = local.subscribe("e/")
        typed: set[int] = set()

        def seen() -> tuple[str, dict[str, Any]] | None:  # prompt until the SUB has joined
            typed.add(local.call("session.prompt", {"id": alpha, "text": "local"})["seq"])
            while got := stream.recv(0.3):
                if got[1]["seq"] in typed:
                    return got
            return None

        try:
            got = wait_for(seen, 15, "a prompt's event on the hub's local PUB")
            assert got[0] == f"e/{alpha}/session.input"
        finally:
            stream.close()


def test_ls_of_the_hubs_directory_by_the_fast_path_is_the_click_paths(
    lab: Lab, project: Path
) -> None:
    """``roost ls`` on the hub's host (its directory): the NODE column and, on stderr, the node
    that did not answer, the same bytes without click or pyzmq as with them."""
    _spawn(lab, "lab-a", "alpha", project)
    lab.nodes["lab-b"].run("node", "stop")
    lab.wait_linked({"lab-a"})
    run = same_both_ways(lab.hub, "ls")
    assert run.quick and run.rc == 0
    assert run.stdout.split()[:2] == [b"NODE", b"ID"] and b"lab-a" in run.stdout
    assert run.stderr == b"node lab-b did not answer: unreachable\n"
    assert same_both_ways(lab.hub, "ls", "--json").quick


def test_a_hub_refuses_a_nodes_directory(node: Node) -> None:
    node.up()
    node.run("node", "stop")
    node.run("keys", "new")
    node.run("keys", "allow", "--role", "node", "--name", "x", "--", _dash_key())
    refused = node.error("hub", "up", "--listen", f"tcp://127.0.0.1:{free_port()}")
    assert refused["code"] == "bad-request" and refused["detail"]["field"] == "state-dir"


def test_keys_print_as_they_are(node: Node) -> None:
    """z85 keys hold "[" and "]": printed as text they must not be read as markup."""
    public = node.run("keys", "new")["public"]
    while "[" not in public or "]" not in public:
        public = node.run("keys", "new", "--force")["public"]
    shown = subprocess.run(
        [sys.executable, "-m", "roost", "keys", "show"],
        env=node.env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert public in shown


def test_attach_through_the_hub(lab: Lab, project: Path) -> None:
    """`roost attach --json` through the hub: the screen first, then the node's output relayed
    under lab-a/ and read back as the node names it, then the end of the session."""
    alpha = _spawn(lab, "lab-a", "alpha", project)
    lines = JsonLines(lab.hub.env, *lab.remote("attach", alpha, node="lab-a"))
    try:
        assert "echo-ready>" in lines.get(timeout=20)["screen"]
        shown = ""

        def answered() -> bool:  # prompt until the relayed output shows (PUB joins late)
            nonlocal shown
            lab.run("prompt", alpha, "via the hub", node="lab-a")
            shown += "".join(d.get("data", "") for d in lines.drain())
            return "echo: via the hub" in shown

        wait_for(answered, 20, "the relayed output")
        lab.run("stop", alpha, node="lab-a")
        ended = wait_for(lambda: (d := lines.get()).get("ended") and d, 20, "the session's end")
        assert ended == {"ended": "dormant"}
        assert lines.proc.wait(10) == 0
    finally:
        lines.close()


def test_usage_through_the_hub_is_a_nodes(lab: Lab, project: Path) -> None:
    """``roost --hub ... --node N usage`` sums node N's figures; without ``--node`` the hub
    names the flag."""
    lab.run(
        "spawn",
        "echo",
        "--mode",
        "stream",
        "--name",
        "counted",
        "--cwd",
        str(project),
        node="lab-a",
    )
    lab.run("turn", "counted", "hello", "--wait", node="lab-a")
    alpha = lab.run("usage", node="lab-a")
    assert [s["name"] for s in alpha["session"]] == ["counted"]
    assert alpha["total"]["input"] == len("hello") and alpha["total"]["output"] == len(
        "echo: hello"
    )
    assert lab.run("usage", node="lab-b")["session"] == []
    refused = lab.error("usage")
    assert refused["code"] == "bad-request" and refused["detail"]["field"] == "node"


def test_a_link_relays_only_the_output_a_hub_client_watches(lab: Lab, project: Path) -> None:
    """No hub client subscribes to alpha's output: its node publishes none of it (its link does
    not ask); a hub client subscribing to lab-a/o/<alpha> gets alpha's answers, and once it has
    gone the node publishes none again."""
    alpha = _spawn(lab, "lab-a", "alpha", project)
    node = lab.nodes["lab-a"]
    node.wait_screen(alpha, "echo-ready>")

    def output() -> int:
        return int(node.run("node", "status")["broker"]["output"])

    def unwatched(text: str) -> bool:
        before = output()
        lab.run("prompt", alpha, text, node="lab-a")
        node.wait_screen(alpha, f"echo: {text}")
        return output() == before

    wait_for(lambda: unwatched("nobody"), 20, "no output published for the link")
    with lab.client() as client:
        client.initialize()
        client.via("lab-a/node")
        stream = client.subscribe(f"o/{alpha}")
        heard = bytearray()
        try:

            def relayed(n: list[int] = [0]) -> bool:  # noqa: B006 - a counter across tries
                n[0] += 1
                lab.run("prompt", alpha, f"relayed {n[0]}", node="lab-a")
                while (message := stream.recv(0.3)) is not None:
                    assert message[0] == f"o/{alpha}"
                    heard.extend(message[1]["data"])
                return b"echo: relayed" in heard

            wait_for(relayed, 20, "alpha's output through the hub")
        finally:
            stream.close()
    wait_for(lambda: unwatched("gone"), 20, "no output published once the hub client left")
