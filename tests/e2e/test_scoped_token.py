"""A scoped token (``roost token new --scope own``): its own sessions and their forks, nothing
else, a cap on live sessions, and a revoke that counts on connections already open."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

from roost.client.client import Client, _decoded
from roost.client.locate import read_node_info
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from tests.e2e.conftest import Node, wait_for


def as_token(node: Node, token: str) -> Node:
    """The same node, reached with ``token`` (``ROOST_TOKEN``) instead of the node's."""
    other = copy.copy(node)
    other.env = {**node.env, "ROOST_TOKEN": token}
    return other


def test_a_scoped_token_drives_only_its_own_sessions(node: Node, tmp_path: Path) -> None:
    node.up()
    theirs = node.run("spawn", "echo", "--name", "theirs", "--cwd", str(tmp_path))["record"]["id"]
    made = node.run("token", "new", "--scope", "own", "--name", "agent", "--max-live", "2")
    assert made["id"].startswith("t-") and made["max_live"] == 2 and made["token"]
    assert made["token"] not in (node.state_dir / "scoped-tokens.json").read_text()
    assert (node.state_dir / "scoped-tokens.json").stat().st_mode & 0o077 == 0
    agent = as_token(node, made["token"])

    assert agent.run("ls")["records"] == []  # the node's other records are not its to see
    mine = agent.run("spawn", "echo", "--name", "mine", "--cwd", str(tmp_path))["record"]
    assert mine["owner"] == made["id"]
    agent.wait_state(mine["id"], "live")
    agent.run("prompt", "mine", "hello")
    agent.wait_screen("mine", "hello", 20)
    fork = agent.run("fork", "mine", "--name", "mine-2")["record"]
    assert fork["owner"] == made["id"]  # a fork of its own is its own
    assert [r["id"] for r in agent.run("ls")["records"]] == [mine["id"], fork["id"]]

    for args in (
        ("show", theirs),
        ("show", "theirs"),
        ("prompt", theirs, "hi"),
        ("stop", theirs),
        ("forget", theirs),
        ("fork", theirs),
        ("events", "--id", theirs),
    ):
        err = agent.error(*args)
        assert err["code"] == "forbidden" and err["detail"]["record"] == theirs, (args, err)
    for args in (("node", "stop"), ("workspace", "add", str(tmp_path)), ("resume", "--all")):
        err = agent.error(*args)
        assert err["code"] == "forbidden" and "may not call" in err["message"], (args, err)
    status = agent.run("node", "status")
    assert "state_dir" not in status and "pid" not in status and status["actors"] == {}

    err = agent.error("spawn", "echo", "--cwd", str(tmp_path))  # two live: its cap
    assert err["code"] == "forbidden" and err["detail"]["max_live"] == 2
    assert sorted(err["detail"]["live"]) == sorted([mine["id"], fork["id"]])
    agent.run("stop", "mine-2")
    agent.run("spawn", "echo", "--name", "third", "--cwd", str(tmp_path))  # room again

    events = agent.run("events")["events"]
    assert events and {e["record"] for e in events} <= {mine["id"], fork["id"], *_ids(agent)}
    assert theirs not in {e.get("record") for e in events}
    everyone = {r["id"]: r for r in node.run("ls")["records"]}  # the node's own token sees all
    assert everyone[theirs]["owner"] is None and everyone[mine["id"]]["owner"] == made["id"]


def _ids(node: Node) -> set[str]:
    return {r["id"] for r in node.run("ls")["records"]}


def test_a_revoked_token_is_refused_on_an_open_connection(node: Node) -> None:
    node.up()
    made = node.run("token", "new", "--scope", "own")
    listed = node.run("token", "list")["tokens"]
    assert [t["id"] for t in listed] == [made["id"]] and "token" not in listed[0]
    info = read_node_info(node.state_dir)
    with Client(info.router, made["token"], timeout=10) as client:
        client.initialize()
        assert client.call("session.list")["records"] == []
        node.run("token", "revoke", made["id"])
        with pytest.raises(RoostError) as refused:
            client.call("session.list")
        assert refused.value.code == "unauthorized"
    err = as_token(node, made["token"]).error("ls")
    assert err["code"] == "unauthorized"
    assert node.error("token", "revoke", made["id"])["code"] == "not-found"


def test_a_scoped_client_cannot_say_whose_it_is(node: Node) -> None:
    """The scope is the broker's to set: a header ``o`` a client sends is dropped, so the
    node's token stays the node's and a scoped token cannot take another token's id."""
    node.up()
    first = node.run("token", "new", "--scope", "own")
    second = node.run("token", "new", "--scope", "own")
    rid = as_token(node, first["token"]).run("spawn", "echo", "--cwd", os.getcwd())["record"]["id"]
    info = read_node_info(node.state_dir)
    with Client(info.router, second["token"], timeout=10) as client:
        client.initialize()
        header = p.Header(kind=p.REQUEST, rid="spoof:1", method="session.show", target="node")
        header.extra["o"] = first["id"]  # "I am the first token"
        client._sock.send_multipart([header.encode(), p.pack({"id": rid})])
        with pytest.raises(RoostError) as refused:
            _decoded(*client._receive("spoof:1", "session.show", 10, None))
        assert refused.value.code == "forbidden"
    wait_for(lambda: node.record(rid)["state"] == "live", 15, "the session to be live")
