"""A hub that places work: the fleet view, placement, fleet doctor and a fleet's resume --all.

Three nodes in network namespaces of their own (``tests/e2e/netns.py``), linked to a hub in a
fourth, each with the stand-in codex in a state of its own: lab-1 has it and is logged in
(``$CODEX_HOME/auth.json``), lab-2 has none (``ROOST_CODEX_BIN`` names nothing), lab-3 has it
logged out. The client runs on lab-1's host and reaches the hub over CURVE TCP. Skipped, with
the reason, where namespaces cannot be made.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import FAKES, CliError, Node, client_keys, free_port, wait_for
from tests.e2e.netns import Hosts
from tests.e2e.test_lab import Lab

HOSTS = {"lab-1": "h1", "lab-2": "h2", "lab-3": "h3"}


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    why = Hosts.why_not()
    if why:
        pytest.skip(why)
    hosts = Hosts()
    hub = Node(tmp_path / "hub")
    try:
        hosts.add("hub")
        addr = {}
        for host in HOSTS.values():
            hosts.add(host)
            addr[host] = hosts.join("hub", host)[0]
        hub.prefix = hosts.prefix("hub")
        hub_key = hub.run("keys", "new")["public"]
        me = tmp_path / "me.json"
        client_keys(hub, me, "operator", "me")
        lab = Lab(hosts, hub, free_port(), hub_key, me, addr, {})
        lab.up_hub()
        for node_id, host in HOSTS.items():
            node = lab.nodes[node_id] = lab.node(host, tmp_path / node_id)
            home = tmp_path / f"codex-{node_id}"
            home.mkdir()
            if node_id == "lab-1":
                (home / "auth.json").write_text("{}")  # logged in
            node.env["CODEX_HOME"] = str(home)
            node.env["ROOST_CODEX_BIN"] = str(
                tmp_path / "no-codex" if node_id == "lab-2" else FAKES / "codex"
            )
            public = node.run("keys", "new")["public"]
            hub.run("keys", "allow", "--role", "node", "--name", node_id, "--", public)
            lab.link(node, host, node_id)
        wait_for(lambda: len(lab.linked()) == 3, 30, "the three nodes to link")
        yield lab
    finally:
        hub.kill_all()  # one marker for the lab: every process of every host
        hosts.close()


def client(lab: Lab, *args: str, check: bool = True) -> dict[str, Any]:
    """``roost --hub ... ARGS`` from lab-1's host."""
    return lab.nodes["lab-1"].run(*lab.remote("h1", *args), check=check, timeout=90)


def spawn(lab: Lab, node: str, provider: str, cwd: Path, *extra: str) -> dict[str, Any]:
    return client(lab, "--node", node, "spawn", provider, "--cwd", str(cwd), *extra)


def down(lab: Lab, node_id: str) -> None:
    """The node's daemon SIGKILLed (its sessions run on), and the hub sees it gone."""
    os.kill(lab.nodes[node_id].pid(), signal.SIGKILL)
    wait_for(lambda: node_id not in lab.linked(), 20, f"the hub to drop {node_id}")


def test_the_fleet_view_and_placement_never_pick_a_node_that_cannot_run_it(
    lab: Lab, tmp_path: Path
) -> None:
    fleet = {n["node_id"]: n for n in client(lab, "fleet")["nodes"]}
    assert set(fleet) == set(HOSTS)
    for line in fleet.values():
        assert line["linked"] and line["healthy"] and line["answered"], line
        assert line["roost"] and line["host"]["cpus"] >= 1
        assert line["host"]["memory_mb"]["available"] > 0
        assert line["providers"]["echo"]["installed"] is True
        assert line["sessions"] == {"live": 0, "attention": 0, "records": 0}
    codex = {node_id: line["providers"]["codex"] for node_id, line in fleet.items()}
    assert codex["lab-1"]["installed"] and codex["lab-1"]["login"] == "logged-in"
    assert codex["lab-1"]["version"] == "0.171.0"
    assert codex["lab-2"]["installed"] is False
    assert codex["lab-3"]["installed"] and codex["lab-3"]["login"] == "logged-out"

    # codex: only lab-1 has it logged in; the others are not candidates, each with its reason
    doc = spawn(lab, "auto", "codex", tmp_path)
    placed = doc["placed"]
    assert placed["node"] == "lab-1" and "the only node that can run codex" in placed["why"]
    why = {c["node_id"]: c for c in placed["candidates"]}
    assert "codex is not installed" in why["lab-2"]["why"] and not why["lab-2"]["eligible"]
    assert why["lab-3"]["why"] == "codex is not logged in" and not why["lab-3"]["eligible"]
    assert doc["record"]["provider"] == "codex"
    records = client(lab, "ls")["records"]
    assert [(r["node"], r["provider"]) for r in records] == [("lab-1", "codex")]

    # echo runs everywhere: the least loaded (fewest live sessions: the nodes share one kernel's
    # load and memory) is picked
    spawn(lab, "lab-1", "echo", tmp_path)
    spawn(lab, "lab-2", "echo", tmp_path)
    placed = spawn(lab, "auto", "echo", tmp_path)["placed"]
    assert placed["node"] == "lab-3", placed
    assert "least loaded of 3" in placed["why"] and "0 live sessions" in placed["why"]
    fleet = {n["node_id"]: n for n in client(lab, "fleet")["nodes"]}
    assert [fleet[n]["sessions"]["live"] for n in HOSTS] == [2, 1, 1]

    # a node that is down is listed so and never picked
    down(lab, "lab-2")
    fleet = {n["node_id"]: n for n in client(lab, "fleet")["nodes"]}
    assert fleet["lab-2"]["linked"] is False and fleet["lab-2"]["healthy"] is False
    placed = spawn(lab, "auto", "echo", tmp_path)["placed"]
    assert placed["node"] == "lab-3", placed  # 1 live session to lab-1's 2; lab-2 is down
    why = {c["node_id"]: c["why"] for c in placed["candidates"]}
    assert why["lab-2"] == "not linked (down)"

    # no node fits: refused with every node's reason, and nothing is spawned
    down(lab, "lab-1")
    with pytest.raises(CliError) as refused:
        spawn(lab, "auto", "codex", tmp_path)
    assert refused.value.code == "no-node-fits"
    error = refused.value.doc["error"]
    why = {c["node_id"]: c["why"] for c in error["detail"]["candidates"]}
    assert why == {
        "lab-1": "not linked (down)",
        "lab-2": "not linked (down)",
        "lab-3": "codex is not logged in",
    }
    assert "lab-3: codex is not logged in" in error["message"]
    assert len(client(lab, "ls")["records"]) == 2  # lab-3's two; the others do not answer


def test_doctor_and_resume_all_through_a_hub_cover_every_node(lab: Lab, tmp_path: Path) -> None:
    doc = client(lab, "doctor")
    nodes = {n["node_id"]: n for n in doc["nodes"]}
    assert set(nodes) == set(HOSTS) and doc["ok"] is False
    assert nodes["lab-1"]["ok"] and nodes["lab-3"]["ok"]  # logged out is a warning
    assert not nodes["lab-2"]["ok"]
    errors = [f["what"] for f in nodes["lab-2"]["findings"] if f["level"] == "error"]
    assert len(errors) == 1 and "codex" in errors[0] and "not found" in errors[0]
    for node_id, node in nodes.items():  # each checked in its own environment
        assert node["node"]["node_id"] == node_id
        codex = next(p for p in node["providers"] if p["provider"] == "codex")
        assert codex["from"] == "env ROOST_CODEX_BIN"
    login = {
        n: next(p for p in nodes[n]["providers"] if p["provider"] == "codex")["login"]
        for n in ("lab-1", "lab-3")
    }
    assert login == {"lab-1": "logged-in", "lab-3": "logged-out"}

    # resume --all: each node restores its own dormant records that say resume
    made = {}
    for node_id in ("lab-1", "lab-2"):
        rid = spawn(lab, node_id, "echo", tmp_path, "--restore", "resume")["record"]["id"]
        client(lab, "--node", node_id, "stop", rid)
        made[node_id] = rid
    spawn(lab, "lab-3", "echo", tmp_path)  # restore never: left alone
    down(lab, "lab-3")
    doc = client(lab, "resume", "--all", "--restore-wait", "60")
    assert doc["unanswered"] == {}  # lab-3 is not linked: not asked
    assert set(doc["nodes"]) == {"lab-1", "lab-2"}
    for node_id, rid in made.items():
        followed = doc["nodes"][node_id]
        assert followed["done"], followed
        assert [(o["record"], o["outcome"]) for o in followed["outcomes"]] == [(rid, "resumed")]
    records = {r["id"]: r for r in client(lab, "ls")["records"]}
    assert all(records[rid]["state"] == "live" for rid in made.values())
    assert all(records[rid]["generation"] == 2 for rid in made.values())

    doc = client(lab, "doctor")
    nodes = {n["node_id"]: n for n in doc["nodes"]}
    assert nodes["lab-3"]["ok"] is False
    assert "not linked to the hub" in nodes["lab-3"]["findings"][0]["what"]


def test_a_stalled_node_is_passed_over_and_taken_again_once_it_answers(
    lab: Lab, tmp_path: Path
) -> None:
    """A node whose daemon is stopped (SIGSTOP) is listed as not answering (or, once the hub
    has dropped its silent link, as down) and never picked; placement waits for it at most the
    fleet's deadline; once it goes on (SIGCONT) it links again and is picked again."""
    client(lab, "fleet")  # every node has made its provider checks
    stalled = lab.nodes["lab-3"].pid()
    os.kill(stalled, signal.SIGSTOP)
    try:
        started = time.monotonic()
        placed = spawn(lab, "auto", "echo", tmp_path)["placed"]
        took = time.monotonic() - started
        why = {c["node_id"]: c["why"] for c in placed["candidates"]}
        # not answering, or dropped by the hub after 3 s of its link's silence
        assert why["lab-3"] in ("timeout", "not linked (down)"), why
        assert placed["node"] in ("lab-1", "lab-2")
        assert took < 30, took  # the fleet's deadline (10 s), not the client's
        fleet = {n["node_id"]: n for n in client(lab, "fleet")["nodes"]}
        assert fleet["lab-3"]["answered"] is False and not fleet["lab-3"]["healthy"]
    finally:
        os.kill(stalled, signal.SIGCONT)
    placed = wait_for(
        lambda: (p := spawn(lab, "auto", "echo", tmp_path)["placed"])["node"] == "lab-3" and p,
        60,
        "lab-3, now the least loaded, to be picked again",
    )
    assert "least loaded of 3" in placed["why"]
