"""The signal channel through a real node: datagrams sent to a live pty session's socket, as a
CLI's hooks send them, with the echo agent (which signals nothing by itself)."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import time
from pathlib import Path
from typing import Any, cast

import psutil

from roost.wire import signals as ws
from tests.e2e.conftest import Node, activity, wait_for


def agent_env(node: Node, rid: str) -> dict[str, str]:
    """The environment of the agent the record's supervisor runs (found by the channel's own
    names in it)."""
    for proc in node.processes():
        with contextlib.suppress(psutil.Error):
            env = proc.environ()
            if env.get(ws.ENV_RECORD) == rid:
                return dict(env)
    return {}


def send(env: dict[str, str], kind: ws.SignalKind, seq: int, **fields: Any) -> None:
    sig: dict[str, Any] = {
        "v": ws.VERSION,
        "record": env[ws.ENV_RECORD],
        "generation": int(env[ws.ENV_GENERATION]),
        "seq": seq,
        "source": "hook",
        "kind": kind,
        "at": time.time(),
        "data": {},
    }
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(ws.encode(cast(ws.Signal, {**sig, **fields})), env[ws.ENV_SOCKET])


def classified(node: Node, rid: str) -> list[dict[str, Any]]:
    return [
        e["data"]
        for e in node.run("events", "--id", rid)["events"]
        if e["kind"] == "session.classified"
    ]


def test_a_turn_end_signal_ends_a_turn_no_screen_ever_showed(node: Node) -> None:
    """Nothing typed through roost, nothing busy on the screen: a turn-end signal (a hook's, for
    a prompt typed in the terminal) is still one turn's end, told once; stale signals are not."""
    node.up()
    rid = node.run("spawn", "echo", "--name", "quiet", "--wait-ready")["record"]["id"]
    env = wait_for(lambda: agent_env(node, rid), 15, "the agent's environment")
    path = Path(env[ws.ENV_SOCKET])
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and env[ws.ENV_GENERATION] == "1"
    send(env, "turn-end", 10)
    wait_for(lambda: [c for c in classified(node, rid) if c.get("turn_end")], 15, "the turn's end")
    shown = node.run("show", rid)["classification"]
    assert shown["state"] == "ready" and shown["via"] == "signal"
    send(env, "turn-end", 10)  # repeated
    send(env, "turn-end", 9)  # late
    send(env, "turn-end", 11, generation=0)  # an earlier launch's hook
    send(env, "turn-end", 12, record="r0000000000")
    time.sleep(1.0)  # a while for any of them to be taken; none may
    assert len([c for c in classified(node, rid) if c.get("turn_end")]) == 1
    log = node.state_dir / "sessions" / rid / "supervisor.log"
    said = log.read_text()
    for reason in ("stale-seq", "other-generation", "other-record"):
        assert reason in said
    node.run("stop", rid)
    assert not path.exists()


def test_a_signal_the_screen_contradicts_leaves_the_screen_s_verdict(node: Node) -> None:
    node.up()
    rid = node.run("spawn", "echo", "--name", "calm", "--wait-ready")["record"]["id"]
    env = wait_for(lambda: agent_env(node, rid), 15, "the agent's environment")
    send(env, "attention", 1, data={"reason": "permission"})  # the screen is ready: it wins
    log = node.state_dir / "sessions" / rid / "supervisor.log"
    wait_for(lambda: "signal-disagrees" in log.read_text(), 15, "the disagreement logged")
    activity(node, rid, "ready")
    assert node.record(rid)["state"] == "live"
    assert all(c["via"] == "screen" for c in classified(node, rid))
