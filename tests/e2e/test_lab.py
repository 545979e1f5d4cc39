"""A lab in network namespaces: a hub and nodes as separate hosts.

The test makes the hosts (``tests/e2e/netns.py``): ``hub``, ``lab1`` (the node lab-1, also the
client host that follows events) and ``rogue`` (a second machine that calls itself lab-1), each
joined to the hub by a veth pair with private addresses that exist only in those namespaces.
Every process carries the lab's test marker and is SIGKILLed by the finaliser, before the
namespaces are deleted. Skipped, with the reason, where namespaces cannot be made.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
import zmq

from roost.client.client import Client
from roost.client.locate import read_node_info
from roost.wire import protocol as p
from tests.e2e import netns
from tests.e2e.conftest import (
    MARK,
    RUNTIME_BASE,
    JsonLines,
    Node,
    client_keys,
    free_port,
    wait_for,
)
from tests.e2e.netns import Hosts


@dataclass
class Lab:
    hosts: Hosts
    hub: Node
    port: int
    hub_key: str
    me: Path
    hub_addr: dict[str, str]  # the hub's address as each host reaches it
    nodes: dict[str, Node]

    def node(self, host: str, root: Path) -> Node:
        """A node directory whose CLI commands (and daemon) run on ``host``: a machine of its own,
        so with a runtime base (and node-id locks) of its own, not the other hosts'."""
        n = Node(root)
        n.mark, n.env[MARK], n.prefix = self.hub.mark, self.hub.mark, self.hosts.prefix(host)
        base = Path(RUNTIME_BASE) / host
        base.mkdir(mode=0o700, exist_ok=True)
        n.env["XDG_RUNTIME_DIR"] = str(base)
        return n

    def endpoint(self, host: str) -> str:
        return f"tcp://{self.hub_addr[host]}:{self.port}"

    def link(self, n: Node, host: str, node_id: str) -> dict[str, Any]:
        return n.up("--node-id", node_id, "--hub", self.endpoint(host), "--hub-key", self.hub_key)

    def remote(self, host: str, *args: str) -> list[str]:
        opts = ["--hub", self.endpoint(host), "--server-key", self.hub_key, "--key-file"]
        return [*opts, str(self.me), *args]

    def up_hub(self) -> dict[str, Any]:
        return self.hub.run("hub", "up", "--listen", f"tcp://0.0.0.0:{self.port}")

    def linked(self) -> dict[str, dict[str, Any]]:
        nodes = self.hub.run("hub", "nodes")["nodes"]  # on the hub's host, by its directory
        return {n["node_id"]: n for n in nodes if n["linked"]}


def hub_link(n: Node) -> dict[str, Any]:
    """What a node says of its hub link (``node status``, by its directory)."""
    link: dict[str, Any] = n.run("node", "status")["endpoints"]["hub"]
    return link


def log_lines(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.startswith("{")]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    why = Hosts.why_not()
    if why:
        pytest.skip(why)
    hosts = Hosts()
    hub = Node(tmp_path / "hub")
    try:
        for host in ("hub", "lab1", "rogue"):
            hosts.add(host)
        addr = {"lab1": hosts.join("hub", "lab1")[0], "rogue": hosts.join("hub", "rogue")[0]}
        hub.prefix = hosts.prefix("hub")
        hub_key = hub.run("keys", "new")["public"]
        me = tmp_path / "me.json"
        client_keys(hub, me, "operator", "me")
        lab = Lab(hosts, hub, free_port(), hub_key, me, addr, {})
        real = lab.nodes["lab-1"] = lab.node("lab1", tmp_path / "lab-1")
        public = real.run("keys", "new")["public"]
        hub.run("keys", "allow", "--role", "node", "--name", "lab-1", "--", public)
        started = lab.up_hub()
        assert started["endpoints"]["events"] == f"tcp://0.0.0.0:{lab.port + 1}"  # listen + 1
        lab.link(real, "lab1", "lab-1")
        wait_for(lambda: "lab-1" in lab.linked(), 20, "lab-1 to link")
        yield lab
    finally:
        hub.kill_all()  # one marker for the lab: every process of every host
        hosts.close()


def _rogue(lab: Lab, root: Path, *, copy_keys: bool) -> Node:
    """A second machine that says it is lab-1: with a copy of lab-1's keys, or its own."""
    rogue = lab.node("rogue", root)
    if copy_keys:
        rogue.state_dir.mkdir(mode=0o700, parents=True)
        shutil.copytree(lab.nodes["lab-1"].state_dir / "keys", rogue.state_dir / "keys")
    else:
        rogue.run("keys", "new")
    lab.link(rogue, "rogue", "lab-1")
    return rogue


def _refused(rogue: Node, attempts: int = 1) -> dict[str, Any]:
    def seen() -> dict[str, Any] | None:
        refused: dict[str, Any] | None = hub_link(rogue).get("refused")
        return refused if refused and refused["attempts"] >= attempts else None

    return wait_for(seen, 30, f"the second lab-1 to be refused {attempts} time(s)")


def test_a_second_node_with_a_linked_id_is_refused_and_the_first_keeps_serving(
    lab: Lab, tmp_path: Path
) -> None:
    real = lab.nodes["lab-1"]
    incarnation = real.run("node", "status")["incarnation"]
    rogue = _rogue(lab, tmp_path / "rogue", copy_keys=True)
    refused = _refused(rogue)
    assert refused["code"] == "node-id-conflict" and "lab-1" in refused["message"]
    assert hub_link(rogue)["linked"] is False

    # while the rogue tries again (backing off), every answer for lab-1 is the first node's
    answers: list[str] = []
    with Client.for_state_dir(lab.hub.state_dir, timeout=10) as hub:
        hub.via("lab-1/node")
        stream = hub.subscribe("e/")

        def answered_while_refused() -> bool:
            answers.append(hub.call("node.status")["incarnation"])
            return bool(hub_link(rogue)["refused"]["attempts"] >= 3)

        wait_for(answered_while_refused, 60, "three refusals of the second lab-1")
        assert set(answers) == {incarnation}, answers
        assert hub_link(real) == {
            "endpoint": lab.endpoint("lab1"),
            "server_key": lab.hub_key,
            "linked": True,
        }
        # the rogue's own events (its node.stopping) never reach the hub's clients as lab-1's
        rogue.run("node", "stop")
        marker = tmp_path / "after-rogue"
        marker.mkdir()
        real.run("workspace", "add", str(marker))
        kinds: list[str] = []

        def the_marker() -> bool:
            got = stream.recv(0.5)
            if got is not None:
                kinds.append(got[1]["kind"])
            return bool(got and got[1]["kind"] == "workspace.added")

        wait_for(the_marker, 20, "the first node's event through the hub")
        stream.close()
    assert "node.stopping" not in kinds and "node.started" not in kinds
    peer_ups = [
        e
        for e in log_lines(lab.hub.state_dir / "logs" / "hub.log")
        if e.get("event") == "peer-up" and e.get("address") == "lab-1/node"
    ]
    assert len(peer_ups) == 1  # lab-1 linked once, never taken over
    said = [e for e in log_lines(rogue.state_dir / "logs" / "node.log") if e.get("event")]
    codes = {e.get("code") for e in said if e["event"] == "hello-refused"}
    assert codes == {"node-id-conflict"}
    # backing off, not a try every second: the waits double (1, 2, 4 ... s)
    waits = [e["retry_in_s"] for e in said if e["event"] == "hello-refused"]
    assert len(waits) >= 3 and waits == [2.0**i for i in range(len(waits))]


def test_a_second_key_under_a_linked_name_is_refused_too(lab: Lab, tmp_path: Path) -> None:
    real = lab.nodes["lab-1"]
    incarnation = real.run("node", "status")["incarnation"]
    rogue = lab.node("rogue", tmp_path / "rogue")
    other = rogue.run("keys", "new")["public"]
    # keys allow keeps one key per node id ...
    err = lab.hub.error("keys", "allow", "--role", "node", "--name", "lab-1", "--", other)
    assert err["code"] == "node-id-conflict" and err["detail"]["name"] == "lab-1"
    # ... but a table edited by hand (or by an older roost) may hold two: the hub refuses it
    table = lab.hub.state_dir / "keys" / "allowed.json"
    allowed = json.loads(table.read_text())
    allowed[other] = {"role": "node", "name": "lab-1"}
    table.write_text(json.dumps(allowed))
    lab.link(rogue, "rogue", "lab-1")
    assert _refused(rogue)["code"] == "node-id-conflict"
    assert lab.linked()["lab-1"]["incarnation"] == incarnation
    assert lab.hub.run("--node", "lab-1", "node", "status")["incarnation"] == incarnation
    # revoking by key takes that key only; the first node stays allowed and linked
    assert lab.hub.run("keys", "revoke", "--", other) == {
        "revoked": [other],
        "by": "key",
        "count": 1,
    }
    assert hub_link(real)["linked"] is True
    rogue.run("node", "stop")

    # a restart of the first node (a new incarnation) is no rival: it links again at once
    real.run("node", "stop")
    real.up()
    again = wait_for(lambda: lab.linked().get("lab-1"), 20, "lab-1 to link again")
    assert again["incarnation"] == real.run("node", "status")["incarnation"] != incarnation
    assert "refused" not in hub_link(real)


def _seqs(lines: list[dict[str, Any]]) -> list[int]:
    return [int(e["seq"]) for e in lines if "seq" in e]


def _hub_pid(lab: Lab) -> int:
    return read_node_info(lab.hub.state_dir).pid


def _kill_hub(lab: Lab) -> None:
    pid = _hub_pid(lab)
    os.kill(pid, signal.SIGKILL)

    def gone() -> bool:
        try:
            return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return True

    wait_for(gone, 10, "the hub to die")


def test_a_follower_through_the_hub_outlives_a_hub_restart(lab: Lab, tmp_path: Path) -> None:
    real = lab.nodes["lab-1"]
    args = lab.remote("lab1", "--node", "lab-1", "events", "--follow")
    follower = JsonLines(real.env, *args, prefix=tuple(lab.hosts.prefix("lab1")))
    printed: list[dict[str, Any]] = []
    try:

        def printed_up_to(seq: int) -> bool:
            printed.extend(follower.drain(0.2))
            return bool(printed and printed[-1].get("seq", 0) >= seq)

        def commit(n: int) -> int:
            for i in range(n):
                work = tmp_path / f"w{len(list(tmp_path.glob('w*')))}-{i}"
                work.mkdir()
                real.run("workspace", "add", str(work))
            return int(real.events()[-1]["seq"])

        wait_for(lambda: printed_up_to(commit(1)), 30, "the follower to print live events")
        _kill_hub(lab)
        last = commit(6)  # committed while the hub is gone
        restarted = lab.up_hub()
        assert restarted["endpoints"]["events"] == f"tcp://0.0.0.0:{lab.port + 1}"  # stable
        wait_for(lambda: printed_up_to(last), 60, "the follower to print what the hub missed")
        wait_for(lambda: printed_up_to(commit(1)), 30, "the follower to print live events again")
        assert _seqs(printed) == [int(e["seq"]) for e in real.events()]  # no gap, no repeat
    finally:
        follower.close()


def test_a_follower_fails_clearly_when_the_hub_stays_gone(lab: Lab) -> None:
    real = lab.nodes["lab-1"]
    args = lab.remote("lab1", "--node", "lab-1", "events", "--follow", "--retry-for", "4")
    follower = JsonLines(real.env, *args, prefix=tuple(lab.hosts.prefix("lab1")))
    try:
        last = int(real.events()[-1]["seq"])
        wait_for(
            lambda: any(e.get("seq") == last for e in follower.drain(0.2)), 30, "the log printed"
        )
        _kill_hub(lab)
        error = wait_for(
            lambda: next((e for e in follower.drain(0.5) if "error" in e), None),
            60,
            "the follower to give up",
        )["error"]
        assert error["code"] == "unavailable" and error["detail"]["after"] == last
        assert follower.proc.wait(10) == 1
    finally:
        follower.close()


def test_a_second_hello_for_a_live_actors_address_is_refused(node: Node, project: Path) -> None:
    """On a node's own broker: an actor address a live process holds is not taken over."""
    node.up()
    rid = node.run("spawn", "echo", "--cwd", str(project))["record"]["id"]
    node.wait_state(rid, "live")
    token = (node.state_dir / "actor-token").read_text().strip()
    sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(read_node_info(node.state_dir).router)
    try:
        for address in (f"session/{rid}", "state"):
            body = {"address": address, "incarnation": "impostor", "token": token, "meta": {}}
            sock.send_multipart([p.Header(kind=p.HELLO, rid="hello").encode(), p.pack(body)])
            assert sock.poll(10_000), "the node did not answer the hello"
            header, reply = sock.recv_multipart()
            assert p.Header.decode(header).kind == p.ERROR
            refused = p.unpack(reply)
            assert refused["code"] == "node-id-conflict", refused
            assert refused["detail"] == {"address": address}
    finally:
        sock.close(0)
    node.run("prompt", rid, "still mine")  # the supervisor and the state store serve on
    node.wait_screen(rid, "echo: still mine")


def test_attach_through_the_hub_outlives_hub_restarts(lab: Lab, tmp_path: Path) -> None:
    real = lab.nodes["lab-1"]
    work = tmp_path / "proj"
    work.mkdir()
    rid = real.run("spawn", "echo", "--cwd", str(work))["record"]["id"]
    real.wait_state(rid, "live")
    args = lab.remote("lab1", "--node", "lab-1", "attach", rid, "--read-only")
    view = JsonLines(real.env, *args, prefix=tuple(lab.hosts.prefix("lab1")))
    seen: list[dict[str, Any]] = []

    def shown(text: str) -> bool:
        seen.extend(view.drain(0.2))
        return any(text in str(line.get("screen") or line.get("data") or "") for line in seen)

    try:
        assert "screen" in view.get(30)
        _kill_hub(lab)
        real.run("prompt", rid, "while the hub was away")
        real.wait_screen(rid, "echo: while the hub was away")
        lab.up_hub()
        wait_for(lambda: shown("echo: while the hub was away"), 60, "attach to redraw")
        _kill_hub(lab)
        real.run("stop", rid)  # the session ends while the hub is away
        real.wait_state(rid, "dormant")
        lab.up_hub()

        def ended() -> bool:
            seen.extend(view.drain(0.2))
            return {"ended": "dormant"} in seen

        wait_for(ended, 60, "attach to end with the session, ended while the hub was away")
        assert view.proc.wait(10) == 0
    finally:
        view.close()


def _relay(lab: Lab, host: str, delay: float) -> tuple[subprocess.Popen[str], int]:
    """A TCP relay on the hub's host, on its address toward ``host``, to the hub's port, each way
    ``delay`` seconds slower; and its port. It carries the lab's marker (the fixture's finaliser
    kills it too)."""
    args = ["relay", lab.hub_addr[host], f"127.0.0.1:{lab.port}", str(delay)]
    relay = subprocess.Popen(
        [*lab.hosts.prefix("hub"), sys.executable, netns.__file__, *args],
        env=lab.hub.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert relay.stdout is not None
    ready, _, _ = select.select([relay.stdout], [], [], 10)
    assert ready, "the relay did not say its port"
    return relay, int(json.loads(relay.stdout.readline())["port"])


def test_a_node_restarted_over_a_slow_lossy_link_links_again(lab: Lab) -> None:
    """lab-1 is restarted with a new --hub: a relay 100 ms slower each way, 5 % of lab-1's
    packets dropped in and out, and the first three SYNs of each connection to the relay dropped
    too, so each connect takes 3 s (Linux 6.6 and later; 7 s before): what the random loss does
    to a connection now and then, made certain. Connecting, the ZMTP greeting, the CURVE
    handshake and the hello's answer then take more than the 3 s of silence after which the link
    used to start over with a fresh socket, so it never linked. It links once its connection is
    made, stays linked and answers through the hub; when the network breaks, it still sees its
    link gone within about 3 s, and links again on its own once the network is back."""
    why = Hosts.why_no_nft()
    if why:
        pytest.skip(why)
    real = lab.nodes["lab-1"]
    relay, port = _relay(lab, "lab1", 0.1)
    endpoint = f"tcp://{lab.hub_addr['lab1']}:{port}"
    try:
        lab.hosts.lossy("lab1", 5)
        lab.hosts.slow_connects("lab1", port, 3)
        real.run("node", "stop")
        started = time.monotonic()
        incarnation = real.up("--hub", endpoint, "--hub-key", lab.hub_key)["incarnation"]
        linked = wait_for(lambda: lab.linked().get("lab-1"), 20, "lab-1 to link through the relay")
        took = time.monotonic() - started
        assert linked["incarnation"] == incarnation
        assert hub_link(real) == {"endpoint": endpoint, "server_key": lab.hub_key, "linked": True}
        with Client.for_state_dir(lab.hub.state_dir, timeout=10) as hub:
            hub.via("lab-1/node")
            answers = [hub.call("node.status")["incarnation"] for _ in range(10)]
        assert answers == [incarnation] * 10
        assert hub_link(real)["linked"] is True
        ups = [
            e
            for e in log_lines(lab.hub.state_dir / "logs" / "hub.log")
            if e.get("event") == "peer-up" and e.get("incarnation") == incarnation
        ]
        assert len(ups) == 1  # linked once, and not dropped since

        lab.hosts.cut("lab1")
        cut = time.monotonic()
        wait_for(lambda: not hub_link(real)["linked"], 15, "lab-1 to see its link gone")
        noticed = time.monotonic() - cut
        assert noticed < 8, noticed  # 3 s of silence, a beat, and the polling's own time
        lab.hosts.cut("lab1", cut=False)
        back = time.monotonic()
        wait_for(lambda: hub_link(real)["linked"], 30, "lab-1 to link again")
        again = time.monotonic() - back
        assert lab.linked()["lab-1"]["incarnation"] == incarnation
        print(f"linked {took:.1f} s after node up began; cut seen in {noticed:.1f} s; ", end="")
        print(f"linked again {again:.1f} s after the network was back")
    finally:
        relay.kill()
        relay.wait(10)
