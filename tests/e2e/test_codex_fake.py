"""The codex provider end to end: a real node driving the stand-in ``tests/fakes/codex``.

The record's env names the binary (``ROOST_CODEX_BIN``) and a private ``CODEX_HOME``, so nothing
here reads or writes the user's own ~/.codex. Codex chooses its own thread id: roost learns it
from the rollout file (pty) or the ``thread.started`` line (stream).
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import psutil

from roost.wire import signals as ws
from tests.e2e.conftest import FAKES, TURN_KINDS, Node, activity, wait_for

FAKE = FAKES / "codex"


def codex_env(tmp_path: Path, *extra: str) -> list[str]:
    pairs = [f"ROOST_CODEX_BIN={FAKE}", f"CODEX_HOME={tmp_path / 'codex'}", *extra]
    return [arg for pair in pairs for arg in ("--env", pair)]


def spawn(node: Node, project: Path, tmp_path: Path, *extra: str, mode: str = "pty") -> str:
    args = ["spawn", "codex", "--cwd", str(project), "--mode", mode, *codex_env(tmp_path, *extra)]
    rec = node.run(*args)["record"]
    assert rec["state"] == "live" and rec["provider_session"] is None  # codex picks it later
    return str(rec["id"])


def rollouts(tmp_path: Path) -> dict[str, Path]:
    """Thread id -> rollout file, as codex names them."""
    found = (tmp_path / "codex" / "sessions").glob("*/*/*/rollout-*.jsonl")
    return {path.name.removesuffix(".jsonl")[-36:]: path for path in found}


def user_messages(path: Path) -> list[str]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        obj["payload"]["content"][0]["text"]
        for obj in lines
        if obj["type"] == "response_item" and obj["payload"].get("role") == "user"
    ]


def identity(node: Node, ref: str) -> str:
    rec = wait_for(
        lambda: r if (r := node.record(ref))["provider_session"] else None,
        15,
        f"the provider session of {ref}",
    )
    return str(rec["provider_session"])


def inputs(node: Node, rid: str) -> list[dict[str, Any]]:
    return [e for e in node.run("events", "--id", rid)["events"] if e["kind"] == "session.input"]


def events(node: Node, rid: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in node.run("events", "--id", rid)["events"] if e["kind"] == kind]


def offline_fakes(node: Node) -> list[int]:
    found = []
    for proc in node.processes():
        with contextlib.suppress(psutil.Error):
            if "FAKE_CODEX_OFFLINE" in proc.environ():
                found.append(proc.pid)
    return found


# -- pty -----------------------------------------------------------------------------------------


def test_a_pty_session_learns_its_id_answers_stops_and_resumes(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    rid = spawn(node, project, tmp_path)
    activity(node, rid, "ready")
    node.run("prompt", rid, "SLOW hello codex")
    # busy may be brief: the log keeps every classification, the record only the latest
    wait_for(
        lambda: any(
            e["data"].get("state") == "busy" for e in events(node, rid, "session.classified")
        ),
        15,
        "busy",
    )
    node.wait_screen(rid, "Hello from the fake codex: SLOW hello codex")
    activity(node, rid, "ready")

    # like codex >= 0.151 the rollout appears with the first turn; roost reads the id from it
    sid = identity(node, rid)
    assert list(rollouts(tmp_path)) == [sid]
    assert [e["data"]["provider_session"] for e in events(node, rid, "session.identity")] == [sid]

    stopped = node.run("stop", rid)["record"]
    assert stopped["state"] == "dormant" and stopped["provider_session"] == sid
    resumed = node.run("resume", rid)["record"]
    assert resumed["state"] == "live" and resumed["generation"] == 2
    assert resumed["provider_session"] == sid
    node.wait_screen(rid, "Hello from the fake codex: SLOW hello codex")  # read back by codex
    activity(node, rid, "ready")
    verdicts = wait_for(lambda: events(node, rid, "session.resume"), 15, "the resume verdict")
    assert [v["data"]["outcome"] for v in verdicts] == ["resumed"]
    node.run("prompt", rid, "second")
    node.wait_screen(rid, "Hello from the fake codex: second")
    assert user_messages(rollouts(tmp_path)[sid]) == ["SLOW hello codex", "second"]
    assert node.record(rid)["provider_session"] == sid


def turn_ends(node: Node, rid: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events(node, rid, "session.classified") if e["data"].get("turn_end")]


def agent_env(node: Node) -> dict[str, str]:
    """The environment of the fake codex the node's supervisor runs."""
    for proc in node.processes():
        with contextlib.suppress(psutil.Error):
            if any(str(FAKE) in part for part in proc.cmdline()):
                return dict(proc.environ())
    return {}


def test_codexs_osc9_notifications_are_signals_named_as_the_evidence(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    rid = spawn(node, project, tmp_path)
    activity(node, rid, "ready")
    env = wait_for(lambda: agent_env(node), 15, "the agent's environment")
    socket = Path(env[ws.ENV_SOCKET])
    assert env[ws.ENV_RECORD] == rid and env[ws.ENV_GENERATION] == "1" and socket.exists()
    node.run("prompt", rid, "hello codex")
    node.wait_screen(rid, "Hello from the fake codex: hello codex")
    # the turn's end, told once, on the evidence of the screen and of codex's OSC 9 together
    (end,) = wait_for(lambda: turn_ends(node, rid), 15, "the turn's end")
    assert end["state"] == "ready" and end["via"] in ("both", "signal")
    shown = node.run("show", rid)
    assert shown["classification"]["state"] == "ready"
    assert shown["classification"]["via"] in ("both", "signal")
    node.run("prompt", rid, "again")
    wait_for(lambda: len(turn_ends(node, rid)) == 2, 15, "the second turn's end")
    node.run("stop", rid)
    assert not socket.exists()  # the channel goes with its supervisor
    assert len(turn_ends(node, rid)) == 2


def test_an_interrupted_turn_ends_once_on_the_screen_alone(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    rid = spawn(node, project, tmp_path)
    activity(node, rid, "ready")
    node.run("prompt", rid, "SLOW and then interrupted")
    activity(node, rid, "busy")
    node.run("key", rid, "escape")  # codex sends no notification for an interrupted turn
    node.wait_screen(rid, "Conversation interrupted")
    (end,) = wait_for(lambda: turn_ends(node, rid), 15, "the interrupted turn's end")
    assert end["state"] == "ready" and end["via"] == "screen"
    time.sleep(1.5)  # nothing more comes: the turn ended once
    assert len(turn_ends(node, rid)) == 1


def test_codexs_approval_notification_bears_out_the_permission_screen(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    rid = spawn(node, project, tmp_path, "FAKE_CODEX_SCREEN=permission")
    activity(node, rid, "ready")
    node.run("prompt", rid, "touch /outside")
    rec = node.wait_state(rid, "attention")
    assert rec["attention"] == "permission"
    verdict = wait_for(
        lambda: c if (c := node.run("show", rid)["classification"])["via"] != "screen" else None,
        15,
        "the approval's signal",
    )
    assert verdict["state"] == "attention" and verdict["via"] in ("both", "signal")
    assert turn_ends(node, rid) == []  # an approval is no turn's end


def test_a_session_stopped_before_its_first_turn_has_no_id_to_resume_by(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    rid = spawn(node, project, tmp_path)
    activity(node, rid, "ready")
    stopped = node.run("stop", rid)["record"]
    assert stopped["state"] == "dormant" and stopped["provider_session"] is None
    assert rollouts(tmp_path) == {}  # codex wrote nothing: there is no conversation
    assert node.error("resume", rid)["code"] == "no-provider-session"


def resume_a_lost_rollout(
    node: Node, tmp_path: Path, project: Path, resuming_s: float
) -> tuple[str, str]:
    """A session with one turn, stopped, its rollout deleted and resumed: codex shows
    "Resuming session…" for ``resuming_s`` and then gives up. Returns (record, thread id)."""
    node.up()
    rid = spawn(node, project, tmp_path, f"FAKE_CODEX_RESUMING_S={resuming_s:g}")
    activity(node, rid, "ready")
    node.run("prompt", rid, "remember me")
    sid = identity(node, rid)
    node.run("stop", rid)
    rollouts(tmp_path)[sid].unlink()
    node.run("resume", rid)
    return rid, sid


def test_a_resume_whose_rollout_is_gone_ends_with_codexs_error(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """Codex draws "Resuming session…" above a composer before it gives up;
    that composer is no verdict, a prompt sent meanwhile is never accepted and lost, and the
    verdict is resume_failed (before the exit)."""
    rid, sid = resume_a_lost_rollout(node, tmp_path, project, resuming_s=3)
    refused = node.error("prompt", rid, "PING two")  # while codex shows "Resuming session…"
    assert refused["code"] in ("session-not-live", "resume-pending"), refused
    gone = node.wait_state(rid, "dormant")
    assert gone["generation"] == 2 and gone["last_exit"]["code"] == 1
    assert gone["provider_session"] == sid  # kept: never swapped for a fresh conversation
    shown = node.run("show", rid, "--screen")
    assert f"no rollout found for thread id {sid}" in (shown["last_screen"] or "")
    later = [e for e in node.run("events", "--id", rid)["events"] if e["generation"] == 2]
    assert not [e for e in later if e["kind"] == "session.input"]  # PING two: never typed
    verdicts = [e["data"] for e in later if e["kind"] == "session.resume"]
    assert [(v["outcome"], v["reason"]) for v in verdicts] == [("resume_failed", "not-found")]
    assert "/codex/sessions" not in verdicts[0]["detail"]
    kinds = [e["kind"] for e in later]
    assert kinds.index("session.resume") < kinds.index("session.exited")


def test_a_stop_before_the_verdict_is_reported_as_stopped(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """An operator's stop while codex still shows "Resuming session…" is not the CLI failing
    to resume: the verdict says ``stopped``, and the record keeps its provider session."""
    # codex holds "Resuming session…" for 30 s, then gives up
    rid, sid = resume_a_lost_rollout(node, tmp_path, project, resuming_s=30)
    node.wait_screen(rid, "Resuming session")
    stopped = node.run("stop", rid)["record"]
    assert stopped["state"] == "dormant" and stopped["provider_session"] == sid
    later = [e for e in node.run("events", "--id", rid)["events"] if e["generation"] == 2]
    verdicts = [e["data"] for e in later if e["kind"] == "session.resume"]
    assert [(v["outcome"], v["reason"]) for v in verdicts] == [("resume_failed", "stopped")]


def test_a_login_screen_is_reported_and_nothing_is_typed(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    rid = spawn(node, project, tmp_path, "FAKE_CODEX_SCREEN=login")
    rec = node.wait_state(rid, "attention")
    assert rec["attention"] == "login" and rec["activity"] == "attention"
    assert "Sign in with ChatGPT" in node.screen(rid)
    assert inputs(node, rid) == []
    assert node.record(rid)["state"] == "attention"


def test_a_trust_screen_waits_for_a_human(node: Node, tmp_path: Path, project: Path) -> None:
    node.up()
    rid = spawn(node, project, tmp_path, "FAKE_CODEX_SCREEN=trust")
    rec = node.wait_state(rid, "attention")
    assert rec["attention"] == "trust" and inputs(node, rid) == []
    node.run("key", rid, "enter")  # "1. Trust and continue", by a human
    activity(node, rid, "ready")
    assert node.record(rid)["state"] == "live"


def test_a_command_approval_waits_for_a_human(node: Node, tmp_path: Path, project: Path) -> None:
    node.up()
    rid = spawn(node, project, tmp_path, "FAKE_CODEX_SCREEN=permission")
    activity(node, rid, "ready")
    node.run("prompt", rid, "touch /outside")
    rec = node.wait_state(rid, "attention")
    assert rec["attention"] == "permission"
    assert [e["data"]["text"] for e in inputs(node, rid)] == ["touch /outside"]
    node.run("key", rid, "enter")  # "1. Yes, proceed"
    node.wait_screen(rid, "Hello from the fake codex: touch /outside")
    node.wait_state(rid, "live")


def test_a_slow_start_and_a_crash(node: Node, tmp_path: Path, project: Path) -> None:
    node.up()
    slow = spawn(node, project, tmp_path, "FAKE_CODEX_SLOW_START=2")
    assert node.record(slow)["activity"] != "ready"
    crashed = spawn(node, project, tmp_path, "FAKE_CODEX_CRASH=1")
    gone = node.wait_state(crashed, "dormant")
    assert gone["last_exit"]["code"] == 101  # a Rust panic
    assert "panicked" in (node.run("show", crashed, "--screen")["last_screen"] or "")
    activity(node, slow, "ready")


# -- stream ----------------------------------------------------------------------------------------


def test_a_stream_turn_with_a_tool_call_learns_the_thread_and_continues_it(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    rid = spawn(node, project, tmp_path, mode="stream")
    done = node.run("turn", rid, "/tool echo hi", "--wait")
    assert done["turn"]["state"] == "completed"
    assert [e["kind"] for e in done["events"]] == TURN_KINDS  # codex's stderr noise is dropped
    call, result, output = (e["data"] for e in done["events"][1:4])
    assert call["name"] == "command_execution"
    assert call["input"] == {"command": "/bin/bash -lc 'echo hi'"}
    assert result["content"] == "hi\n" and result["id"] == call["id"]
    assert output["text"] == "Tool said hi."
    sid = identity(node, rid)
    assert done["turn"]["result"]["provider_session"] == sid
    assert list(rollouts(tmp_path)) == [sid]

    again = node.run("turn", rid, "--wait", "--", "-and again")  # codex exec resume <sid>
    assert again["turn"]["state"] == "completed"
    texts = [e["data"]["text"] for e in again["events"] if e["kind"] == "session.output"]
    assert texts == ["Hello from the fake codex: -and again"]
    assert user_messages(rollouts(tmp_path)[sid]) == ["/tool echo hi", "-and again"]
    assert node.record(rid)["provider_session"] == sid


def test_a_stream_turn_uses_the_binary_named_in_the_record_env(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    rid = spawn(node, project, tmp_path, "PATH=/usr/bin:/bin", mode="stream")  # no codex there
    done = node.run("turn", rid, "hi", "--wait")
    assert done["turn"]["state"] == "completed"


def test_roosts_deadlines_end_an_offline_turn_and_a_silent_one(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """Offline, codex exec prints "Reconnecting..." for ever: the lines keep the silence clock
    from running out, so the wall-clock deadline ends the turn; a quiet one meets the silence."""
    node.env.update(ROOST_CODEX_TURN_SILENCE_S="1.5", ROOST_CODEX_TURN_DEADLINE_S="4")
    node.up()
    offline = spawn(node, project, tmp_path, "FAKE_CODEX_OFFLINE=1", mode="stream")
    quiet = spawn(node, project, tmp_path, "FAKE_CODEX_STREAM_DELAY_MS=5000", mode="stream")
    started = time.monotonic()
    node.run("turn", quiet, "anyone there?")
    done = node.run("turn", offline, "hi", "--wait", "--wait-timeout", "30")
    assert done["turn"]["state"] == "failed"
    assert done["turn"]["result"]["reason"] == "turn-deadline"
    assert not done["turn"]["result"]["is_error"]  # "Reconnecting..." alone is no verdict
    assert done["turn"]["result"]["provider_error"].startswith(
        "Reconnecting... waiting for network"
    )
    assert time.monotonic() - started < 20
    stderr = [e["data"]["line"] for e in done["events"] if e["kind"] == "session.stderr"]
    assert stderr[0].startswith("Reconnecting... 1/5") and len(stderr) > 5
    assert done["turn"]["result"]["provider_session"] == node.record(offline)["provider_session"]
    assert not offline_fakes(node)

    silent = node.run("turn", quiet, "--wait", "--wait-timeout", "30")
    assert silent["turn"]["state"] == "failed"
    assert silent["turn"]["result"]["reason"] == "silence-deadline"


# -- fork ----------------------------------------------------------------------------------------


def test_a_fork_learns_a_thread_of_its_own_and_leaves_the_source_alone(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """codex chooses the fork's id: roost learns it from the new rollout, verifies the fork
    only then, and the source's rollout is only read."""
    node.up()
    rid = spawn(node, project, tmp_path)
    activity(node, rid, "ready")
    node.run("prompt", rid, "one")
    source = identity(node, rid)
    node.run("stop", rid)
    kept = rollouts(tmp_path)[source].read_bytes()

    fork = node.run("fork", rid, "--name", "f")["record"]
    assert fork["provider_session"] is None  # codex picks it
    new = identity(node, "f")
    assert new != source and set(rollouts(tmp_path)) == {source, new}
    verdicts = wait_for(lambda: events(node, fork["id"], "session.resume"), 15, "the verdict")
    assert [(v["data"]["outcome"], v["data"]["fork"]) for v in verdicts] == [("resumed", source)]
    node.wait_screen("f", "Hello from the fake codex: one")  # the copied history
    activity(node, "f", "ready")
    node.run("prompt", "f", "two")
    node.wait_screen("f", "Hello from the fake codex: two")
    wait_for(
        lambda: user_messages(rollouts(tmp_path)[new]) == ["one", "two"], 15, "the fork's turn"
    )
    assert rollouts(tmp_path)[source].read_bytes() == kept

    # stream mode: the fork's first turn is codex exec fork; thread.started names the new id
    sid = spawn(node, project, tmp_path, mode="stream")
    node.run("turn", sid, "alpha", "--wait")
    stream_source = identity(node, sid)
    node.run("fork", sid, "--name", "t")
    done = node.run("turn", "t", "beta", "--wait")
    assert done["turn"]["state"] == "completed", done
    stream_new = identity(node, "t")
    assert stream_new != stream_source
    assert user_messages(rollouts(tmp_path)[stream_new]) == ["alpha", "beta"]
    assert user_messages(rollouts(tmp_path)[stream_source]) == ["alpha"]
