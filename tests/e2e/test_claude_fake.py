"""The claude provider end to end: a real node driving the stand-in ``tests/fakes/claude``.

The record's env names the binary (``ROOST_CLAUDE_BIN``) and a private ``CLAUDE_CONFIG_DIR``, so
nothing here reads or writes the user's own ~/.claude.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

from tests.e2e.conftest import (
    FAKES,
    TURN_KINDS,
    Node,
    activity,
    assert_resume_failed_before_exit,
    log_has,
    stopped,
    wait_for,
)

FAKE = FAKES / "claude"


def claude_env(tmp_path: Path, *extra: str) -> list[str]:
    pairs = [f"ROOST_CLAUDE_BIN={FAKE}", f"CLAUDE_CONFIG_DIR={tmp_path / 'claude'}", *extra]
    return [arg for pair in pairs for arg in ("--env", pair)]


def transcript(tmp_path: Path, project: Path, sid: str) -> Path:
    escaped = re.sub(r"[^a-zA-Z0-9]", "-", str(project))
    return tmp_path / "claude" / "projects" / escaped / f"{sid}.jsonl"


def inputs(node: Node, rid: str) -> list[dict[str, Any]]:
    return [e for e in node.run("events", "--id", rid)["events"] if e["kind"] == "session.input"]


def test_a_pty_session_answers_stops_and_resumes_the_same_conversation(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    spawned = node.run(
        "spawn", "claude", "--name", "cc", "--cwd", str(project), *claude_env(tmp_path)
    )
    rec = spawned["record"]
    sid = rec["provider_session"]
    assert rec["state"] == "live" and rec["mode"] == "pty" and rec["generation"] == 1
    assert str(uuid.UUID(sid)) == sid  # assigned up front, before claude ran
    activity(node, "cc", "ready")

    node.run("prompt", "cc", "hello roost")
    node.wait_screen("cc", "You said: hello roost")
    activity(node, "cc", "ready")
    assert transcript(tmp_path, project, sid).exists()

    stopped = node.run("stop", "cc")["record"]
    assert stopped["state"] == "dormant" and stopped["provider_session"] == sid
    resumed = node.run("resume", rec["id"])["record"]
    assert resumed["state"] == "live" and resumed["generation"] == 2
    assert resumed["provider_session"] == sid
    node.wait_screen("cc", "You said: hello roost")  # the conversation claude read back
    activity(node, "cc", "ready")
    node.run("prompt", "cc", "second")
    node.wait_screen("cc", "You said: second")
    lines = transcript(tmp_path, project, sid).read_text().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["user", "assistant"] * 2


def test_a_conversation_with_no_message_cannot_be_resumed(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """As with claude: the conversation file appears with the first message, so a session stopped
    before one has nothing to resume; claude says so and exits 1."""
    node.up()
    rec = node.run("spawn", "claude", "--cwd", str(project), *claude_env(tmp_path))["record"]
    activity(node, rec["id"], "ready")
    node.run("stop", rec["id"])
    node.run("resume", rec["id"])
    gone = node.wait_state(rec["id"], "dormant")
    assert gone["last_exit"]["code"] == 1 and gone["generation"] == 2
    shown = node.run("show", rec["id"], "--screen")
    assert "No conversation found with session ID: " + rec["provider_session"] in (
        shown["last_screen"] or ""
    )
    assert_resume_failed_before_exit(node, rec["id"])


def test_a_stream_session_runs_turns_with_a_tool_call(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    # PATH: stream turns are planned without the record's env today, so argv[0] is "claude"
    env = claude_env(tmp_path, f"PATH={FAKES}{os.pathsep}{os.environ['PATH']}")
    rec = node.run("spawn", "claude", "--mode", "stream", "--cwd", str(project), *env)["record"]
    rid, sid = rec["id"], rec["provider_session"]
    assert rec["state"] == "live" and str(uuid.UUID(sid)) == sid

    done = node.run("turn", rid, "/tool echo hi", "--wait")
    assert done["turn"]["state"] == "completed"
    assert [e["kind"] for e in done["events"]] == TURN_KINDS
    call, result, output = (e["data"] for e in done["events"][1:4])
    assert call["name"] == "Bash" and call["input"] == {"command": "echo hi"}
    assert result["content"] == "hi" and result["id"] == call["id"]
    assert output["text"] == "Tool said hi."

    again = node.run("turn", rid, "and again", "--wait")  # --resume of the same conversation
    assert again["turn"]["state"] == "completed"
    texts = [e["data"]["text"] for e in again["events"] if e["kind"] == "session.output"]
    assert texts == ["Hello from the fake. You said: and again"]
    assert len(transcript(tmp_path, project, sid).read_text().splitlines()) == 4

    node.run("stop", rid)
    assert node.run("resume", rid)["record"]["generation"] == 2
    after = node.run("turn", rid, "after the resume", "--wait")
    assert after["turn"]["state"] == "completed", after["turn"]["result"]
    assert after["turn"]["result"]["provider_session"] == sid
    assert len(transcript(tmp_path, project, sid).read_text().splitlines()) == 6


def test_a_stream_turn_uses_the_binary_named_in_the_record_env(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    env = claude_env(tmp_path, "PATH=/usr/bin:/bin")  # no claude on this PATH
    rid = node.run("spawn", "claude", "--mode", "stream", "--cwd", str(project), *env)["record"][
        "id"
    ]
    done = node.run("turn", rid, "hi", "--wait")
    assert done["turn"]["state"] == "completed", done["turn"]["result"]


def test_a_logged_out_turn_fails_with_claudes_message(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    env = claude_env(
        tmp_path, f"PATH={FAKES}{os.pathsep}{os.environ['PATH']}", "FAKE_CLAUDE_NOAUTH=1"
    )
    rid = node.run("spawn", "claude", "--mode", "stream", "--cwd", str(project), *env)["record"][
        "id"
    ]
    done = node.run("turn", rid, "hi", "--wait")
    assert done["turn"]["state"] == "failed"  # though claude's result says subtype "success"
    assert done["turn"]["result"]["is_error"] is True
    assert done["turn"]["result"]["result"] == "Not logged in · Please run /login"


def test_a_trust_screen_is_reported_and_never_answered(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    env = claude_env(tmp_path, "FAKE_CLAUDE_SCREEN=trust")
    rid = node.run("spawn", "claude", "--cwd", str(project), *env)["record"]["id"]
    rec = node.wait_state(rid, "attention")
    assert rec["attention"] == "trust" and rec["activity"] == "attention"
    assert "Yes, I trust this folder" in node.screen(rid)
    assert inputs(node, rid) == []  # roost typed nothing: "No, exit" is the default
    assert node.record(rid)["state"] == "attention"
    # a human answers; the session goes on
    node.run("key", rid, "down", "enter")
    activity(node, rid, "ready")
    assert node.record(rid)["state"] == "live"


def test_a_permission_prompt_waits_for_a_human(node: Node, tmp_path: Path, project: Path) -> None:
    node.up()
    env = claude_env(tmp_path, "FAKE_CLAUDE_SCREEN=permission")
    rid = node.run("spawn", "claude", "--cwd", str(project), *env)["record"]["id"]
    activity(node, rid, "ready")
    node.run("prompt", rid, "make a file")
    rec = node.wait_state(rid, "attention")
    assert rec["attention"] == "permission"
    assert [e["data"]["text"] for e in inputs(node, rid)] == ["make a file"]
    node.run("key", rid, "enter")  # "1. Yes", by a human
    node.wait_screen(rid, "You said: make a file")
    node.wait_state(rid, "live")


def test_a_permission_screen_drawn_while_a_classification_is_in_flight_is_reported(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """The screen changed while the adapter host was classifying the one before."""
    adapters = node.up()["actors"]["adapters"]["pid"]
    env = claude_env(tmp_path, "FAKE_CLAUDE_SCREEN=permission", "FAKE_CLAUDE_TOOL_MS=1000")
    rid = node.run("spawn", "claude", "--cwd", str(project), *env)["record"]["id"]
    activity(node, rid, "ready")
    with stopped(adapters):  # the busy screen's classification waits on the adapter host
        node.run("prompt", rid, "make a file")
        node.wait_screen(rid, "Do you want to proceed?")  # drawn while it waits, then still
    rec = node.wait_state(rid, "attention", timeout=30)
    assert rec["attention"] == "permission" and rec["activity"] == "attention"


def test_a_permission_screen_whose_classification_failed_is_reported(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """The classification call failed (the adapter host did not answer in time)."""
    adapters = node.up()["actors"]["adapters"]["pid"]
    env = claude_env(tmp_path, "FAKE_CLAUDE_SCREEN=permission")
    rid = node.run("spawn", "claude", "--cwd", str(project), *env)["record"]["id"]
    activity(node, rid, "ready")
    with stopped(adapters):
        node.run("prompt", rid, "make a file")
        node.wait_screen(rid, "Do you want to proceed?")
        # the supervisor's call in flight passed its deadline unanswered
        log = node.state_dir / "sessions" / rid / "supervisor.log"
        wait_for(lambda: log_has(log, "classify-failed"), 30, "the classification call to fail")
    rec = node.wait_state(rid, "attention", timeout=30)
    assert rec["attention"] == "permission" and rec["activity"] == "attention"


def test_a_slow_start_and_a_crash(node: Node, tmp_path: Path, project: Path) -> None:
    node.up()
    slow = node.run(
        "spawn", "claude", "--cwd", str(project), *claude_env(tmp_path, "FAKE_CLAUDE_SLOW_START=2")
    )["record"]
    assert slow["state"] == "live" and slow["activity"] != "ready"
    crashed = node.run(
        "spawn", "claude", "--cwd", str(project), *claude_env(tmp_path, "FAKE_CLAUDE_CRASH=1")
    )["record"]
    gone = node.wait_state(crashed["id"], "dormant")
    assert gone["last_exit"]["code"] == 1
    activity(node, slow["id"], "ready")


def _said(path: Path) -> list[Any]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [r["message"]["content"] for r in lines if r["type"] == "user"]


def test_a_fork_stopped_before_its_first_message_is_still_the_copy(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """claude writes a fork's file with its first message: a fork stopped before one is resumed
    by forking again under its id, so its conversation still begins as the source's."""
    node.up()
    node.run("spawn", "claude", "--name", "cc", "--cwd", str(project), *claude_env(tmp_path))
    activity(node, "cc", "ready")
    node.run("prompt", "cc", "hello roost")
    node.wait_screen("cc", "You said: hello roost")
    source = node.record("cc")["provider_session"]
    node.run("stop", "cc")
    source_file = transcript(tmp_path, project, source)
    kept = source_file.read_bytes()

    fork = node.run("fork", "cc")["record"]
    new = fork["provider_session"]
    assert fork["name"] == "cc-fork" and new != source
    node.wait_screen("cc-fork", "You said: hello roost")  # the copy, read back
    activity(node, "cc-fork", "ready")

    def outcomes() -> list[tuple[str | None, str | None]]:
        events = node.run("events", "--id", fork["id"])["events"]
        return [
            (e["data"].get("outcome"), e["data"].get("fork"))
            for e in events
            if e["kind"] == "session.resume"
        ]

    wait_for(outcomes, 15, "the fork's verdict")  # ready may come a moment before it
    node.run("stop", "cc-fork")
    assert not transcript(tmp_path, project, new).exists()  # no message yet: no file
    resumed = node.run("resume", "cc-fork")["record"]
    assert resumed["provider_session"] == new
    node.wait_screen("cc-fork", "You said: hello roost")
    activity(node, "cc-fork", "ready")
    node.run("prompt", "cc-fork", "second")
    node.wait_screen("cc-fork", "You said: second")
    wait_for(
        lambda: _said(transcript(tmp_path, project, new)) == ["hello roost", "second"],
        15,
        "the fork's file: the copy and its own turn",
    )
    assert outcomes() == [("resumed", source)] * 2
    assert source_file.read_bytes() == kept
