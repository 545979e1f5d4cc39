"""claude's hooks end to end: a real node runs the stand-in ``tests/fakes/claude`` with the
per-record ``--settings`` file, whose hooks and status line the stand-in runs as claude does
(through a shell, the event's document on stdin), so each ``roost signal`` reaches the session's
channel by the environment the supervisor gave the CLI. Nothing here sends a datagram itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import FAKES, Node, activity, wait_for
from tests.e2e.test_claude_fake import claude_env, inputs
from tests.e2e.test_signal_channel import agent_env, classified

FAKE = FAKES / "claude"
COST = 0.0125  # what the stand-in's status line adds per answer (FAKE_CLAUDE_COST_USD)


def notify_to(path: Path) -> str:
    writer = f"import sys; open({str(path)!r}, 'a').write(sys.stdin.read())"
    return f"""
[[notify.command]]
on = ["attention", "turn-end"]
argv = [{json.dumps(sys.executable)}, "-c", {json.dumps(writer)}]
"""


def told(path: Path, event: str) -> list[dict[str, Any]]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [n for n in map(json.loads, filter(None, lines)) if n["event"] == event]


def supervisor_log(node: Node, rid: str) -> list[dict[str, Any]]:
    path = node.state_dir / "sessions" / rid / "supervisor.log"
    lines = path.read_text().splitlines() if path.exists() else []
    found = []
    for line in lines:
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return [e for e in found if isinstance(e, dict)]


def said(node: Node, rid: str, event: str) -> list[dict[str, Any]]:
    return [e for e in supervisor_log(node, rid) if e.get("event") == event]


def turn_ends(node: Node, rid: str) -> list[dict[str, Any]]:
    return [c for c in classified(node, rid) if c.get("turn_end")]


def shown_via(node: Node, ref: str) -> dict[str, Any] | None:
    verdict: dict[str, Any] = node.run("show", ref)["classification"]
    return verdict if verdict.get("via") in ("signal", "both") else None


def spawn(node: Node, tmp_path: Path, project: Path, *extra: str) -> tuple[str, str]:
    rec = node.run(
        "spawn", "claude", "--name", "cc", "--cwd", str(project), *claude_env(tmp_path, *extra)
    )["record"]
    return str(rec["id"]), str(rec["provider_session"])


def test_claudes_hooks_tell_the_session_a_short_turn_s_end_and_the_cost(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """SessionStart names the id roost assigned; a turn too short for the screen to read busy
    ends ``via`` its Stop hook, with a turn-end notification; the status line's cost is the
    session's usage."""
    notes = tmp_path / "told.jsonl"
    node.config.write_text(notify_to(notes))
    node.up()
    rid, sid = spawn(node, tmp_path, project, "FAKE_CLAUDE_BUSY_MS=0")
    started = wait_for(lambda: said(node, rid, "signal-session"), 15, "SessionStart's signal")
    assert started[0]["provider_session"] == sid and started[0]["how"] == "startup"
    activity(node, "cc", "ready")

    node.run("prompt", "cc", "hello roost")
    (end,) = wait_for(lambda: turn_ends(node, rid), 15, "the turn's end")
    assert end["state"] == "ready" and end["via"] in ("signal", "both"), end
    verdict = wait_for(lambda: shown_via(node, "cc"), 15, "the signal named as evidence")
    assert verdict["state"] == "ready"
    (note,) = wait_for(lambda: told(notes, "turn-end"), 15, "the turn-end notification")
    assert note["record"]["id"] == rid

    usage = wait_for(
        lambda: u if (u := node.run("show", "cc").get("usage")) and u["cost_usd"] > 0 else None,
        15,
        "the status line's cost",
    )
    assert usage["cost_usd"] == pytest.approx(COST)
    summed = node.run("usage")
    (row,) = summed["session"]
    assert row["name"] == "cc" and row["usage"]["cost_usd"] == pytest.approx(COST)
    assert summed["total"]["cost_usd"] == pytest.approx(COST)

    node.run("prompt", "cc", "again")
    wait_for(lambda: len(turn_ends(node, rid)) == 2 or None, 15, "the second turn's end")
    wait_for(
        lambda: node.run("show", "cc")["usage"]["cost_usd"] == pytest.approx(2 * COST) or None,
        15,
        "the cost after two answers",
    )
    assert not said(node, rid, "signal-dropped") and not said(node, rid, "signal-disagrees")
    assert len(turn_ends(node, rid)) == 2  # each turn's end told once, its signal or not
    node.run("stop", "cc")


def test_a_permission_screen_is_attention_borne_out_by_its_hook(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    rid, _ = spawn(node, tmp_path, project, "FAKE_CLAUDE_SCREEN=permission")
    activity(node, "cc", "ready")
    node.run("prompt", "cc", "make a file")
    rec = node.wait_state("cc", "attention")
    assert rec["attention"] == "permission"
    verdict = wait_for(lambda: shown_via(node, "cc"), 15, "the hook named as evidence")
    assert verdict["state"] == "attention" and verdict["reason"] == "permission"
    assert [e["data"]["text"] for e in inputs(node, rid)] == ["make a file"]  # nothing answered
    assert not turn_ends(node, rid)
    node.run("key", "cc", "enter")  # "1. Yes", by a human
    node.wait_screen("cc", "You said: make a file")
    wait_for(lambda: turn_ends(node, rid), 15, "the turn's end")
    node.run("stop", "cc")


def test_a_claude_the_agent_runs_cannot_signal_into_the_session(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """A second claude started with the agent's environment (as a tool would) runs the same
    hooks under its own session id: its signals are dropped, logged, and change nothing."""
    node.up()
    rid, sid = spawn(node, tmp_path, project, "FAKE_CLAUDE_BUSY_MS=0")  # the end is the hook's
    activity(node, "cc", "ready")
    env = wait_for(lambda: agent_env(node, rid), 15, "the agent's environment")
    settings = node.state_dir / "sessions" / rid / "claude-settings.json"
    other = str(uuid.uuid4())
    argv = [str(FAKE), "--settings", str(settings), "-p", "--session-id", other, "--", "hi"]
    ran = subprocess.run(argv, env=env, cwd=project, capture_output=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    dropped = wait_for(lambda: said(node, rid, "signal-dropped"), 15, "the drop, logged")
    assert dropped[0]["reason"] == "other-session" and dropped[0]["signalled"] == other
    assert all(e["provider_session"] == sid for e in said(node, rid, "signal-session"))
    assert node.record("cc")["provider_session"] == sid
    assert node.run("show", "cc")["classification"]["state"] == "ready"
    assert not turn_ends(node, rid)
    assert os.path.exists(env["ROOST_SIGNAL_SOCKET"])

    assert node.run("show", "cc")["classification"]["via"] == "screen"
    node.run("prompt", "cc", "still mine")  # the session's own hooks are still taken
    (end,) = wait_for(lambda: turn_ends(node, rid), 15, "the turn's end")
    assert end["via"] in ("signal", "both"), end
    node.run("stop", "cc")


def test_claude_s_clear_moves_the_session_to_its_new_conversation(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """/clear gives claude a new conversation and id in the same process; its SessionStart
    (source clear) moves the record to it, so the hooks that follow are the session's own and
    a resume continues the conversation the screen shows."""
    node.up()
    rid, sid = spawn(node, tmp_path, project, "FAKE_CLAUDE_BUSY_MS=0")
    activity(node, "cc", "ready")
    node.run("prompt", "cc", "before")
    wait_for(lambda: turn_ends(node, rid), 15, "the first turn's end")
    node.run("prompt", "cc", "/clear")
    rec = wait_for(
        lambda: r if (r := node.record("cc"))["provider_session"] != sid else None,
        15,
        "the new conversation's id",
    )
    new = rec["provider_session"]
    assert rec["state"] == "live" and rec["attention"] is None
    moved = [e["data"] for e in node.run("events", "--id", rid)["events"]]
    assert {"provider_session": new, "previous": sid, "how": "clear"} in moved
    wait_for(lambda: len(turn_ends(node, rid)) == 2 or None, 15, "/clear's, a prompt's, end")
    before = len(classified(node, rid))
    node.run("prompt", "cc", "after")
    wait_for(lambda: len(turn_ends(node, rid)) == 3 or None, 15, "the next turn's end")
    # the new conversation's hooks are taken: a verdict stands on them (the screen may have
    # ended the turn a moment before the Stop hook's signal came, on a loaded host)
    wait_for(
        lambda: [c for c in classified(node, rid)[before:] if c.get("via") in ("signal", "both")],
        15,
        "a verdict on the new conversation's signals",
    )
    assert not said(node, rid, "signal-dropped")
    node.run("stop", "cc")
    node.run("resume", "cc")
    node.wait_screen("cc", "You said: after")
    assert "You said: before" not in node.run("show", "cc", "--screen")["screen"]
    node.run("stop", "cc")
