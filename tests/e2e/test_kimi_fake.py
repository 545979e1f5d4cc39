"""The kimi provider end to end: a real node runs the stand-in tests/fakes/kimi (argv, files and
output shapes of Kimi Code CLI 2.1.0) in a real PTY or, in stream mode, one process per turn.

Each test gives the fake its own ``KIMI_CODE_HOME`` and project folder; a folder is trusted
beforehand, as a user who ran kimi there once would have it, unless the test is about trust.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ptyprocess
import pytest

from roost.actors.supervisor.terminal import Terminal
from roost.adapters.base import LaunchContext
from roost.adapters.kimi import KimiAdapter, work_dir_key
from tests.e2e.conftest import Node, assert_resume_failed_before_exit, wait_for

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "kimi"


@dataclass
class Kimi:
    home: Path
    cwd: Path

    def env(self, **extra: str) -> list[str]:
        pairs = {"ROOST_KIMI_BIN": str(FAKE), "KIMI_CODE_HOME": str(self.home), **extra}
        return [arg for key, value in pairs.items() for arg in ("--env", f"{key}={value}")]

    def spawn(self, node: Node, *args: str, **extra: str) -> dict[str, Any]:
        cmd = ("spawn", "kimi", "--cwd", str(self.cwd), *args, *self.env(**extra))
        record: dict[str, Any] = node.run(*cmd)["record"]
        return record

    def trust(self) -> None:
        trust = self.home / "workspace-trust" / work_dir_key(str(self.cwd))
        trust.parent.mkdir(parents=True, exist_ok=True)
        trust.write_text(json.dumps({"root": str(self.cwd), "trustedAt": int(time.time() * 1000)}))

    def sessions(self) -> list[dict[str, Any]]:
        index = self.home / "session_index.jsonl"
        lines = index.read_text().splitlines() if index.exists() else []
        return [json.loads(line) for line in lines]


@pytest.fixture
def kimi(tmp_path_factory: pytest.TempPathFactory) -> Kimi:
    return Kimi(tmp_path_factory.mktemp("kimi-home"), tmp_path_factory.mktemp("proj").resolve())


def _inputs(node: Node, rid: str) -> list[dict[str, Any]]:
    return [e for e in node.events() if e["kind"] == "session.input" and e["record"] == rid]


def _resume_verdict(node: Node, rid: str, generation: int) -> dict[str, Any] | None:
    wanted = ("session.resume", rid, generation)
    events = node.events()
    found = [e["data"] for e in events if (e["kind"], e["record"], e["generation"]) == wanted]
    return found[0] if found else None


def _activity(node: Node, rid: str, activity: str) -> dict[str, Any]:
    return wait_for(
        lambda: r if (r := node.record(rid))["activity"] == activity else None,
        15,
        f"{rid} to be classified {activity}",
    )


# -- pty mode ------------------------------------------------------------------------------------


def test_a_pty_session_goes_live_and_answers(node: Node, kimi: Kimi) -> None:
    kimi.trust()
    node.up()
    rec = kimi.spawn(node, "--name", "moon")
    assert rec["state"] == "live" and rec["provider"] == "kimi" and rec["mode"] == "pty"
    assert rec["provider_session"] is None  # kimi names a session at its first message
    node.wait_screen("moon", "Welcome to Kimi Code!")
    _activity(node, "moon", "ready")
    assert kimi.sessions() == []
    node.run("prompt", "moon", "hello kimi")
    node.wait_screen("moon", "● You said: hello kimi")
    _activity(node, "moon", "ready")
    [session] = kimi.sessions()  # made by the first message, for the record's cwd
    assert session["workDir"] == rec["cwd"] == str(kimi.cwd)
    assert [e["data"]["text"] for e in _inputs(node, rec["id"])] == ["hello kimi"]
    stopped = node.run("stop", "moon")["record"]
    assert stopped["state"] == "dormant"


def test_the_pty_identity_is_discovered_and_the_session_resumed_by_it(
    node: Node, kimi: Kimi
) -> None:
    kimi.trust()
    node.up()
    rid = kimi.spawn(node)["id"]
    node.wait_screen(rid, "Welcome to Kimi Code!")
    node.run("prompt", rid, "hello kimi")
    node.wait_screen(rid, "● You said: hello kimi")
    sid = wait_for(kimi.sessions, 10, "kimi's session")[0]["sessionId"]
    learned = wait_for(
        lambda: r if (r := node.record(rid))["provider_session"] else None, 10, "the identity"
    )
    assert learned["provider_session"] == sid
    identities = [e for e in node.events() if e["kind"] == "session.identity"]
    assert [e["data"]["provider_session"] for e in identities] == [sid]

    node.run("stop", rid)
    resumed = node.run("resume", rid)["record"]
    assert resumed["state"] == "live" and resumed["generation"] == 2
    assert resumed["provider_session"] == sid and resumed["cwd"] == str(kimi.cwd)
    node.wait_screen(rid, f"Session:   {sid}")  # the welcome box of a resumed session
    node.wait_screen(rid, "● You said: hello kimi")  # and its history
    verdict = wait_for(lambda: _resume_verdict(node, rid, 2), 15, "the resume verdict")
    assert verdict["outcome"] == "resumed"
    node.run("prompt", rid, "and again")
    node.wait_screen(rid, "● You said: and again")
    assert [s["sessionId"] for s in kimi.sessions()] == [sid]  # one conversation, continued


def test_a_slow_start_is_not_ready_until_the_composer_shows(node: Node, kimi: Kimi) -> None:
    kimi.trust()
    node.up()
    rec = kimi.spawn(node, FAKE_KIMI_SLOW_START="1.5")
    assert rec["state"] == "live" and node.record(rec["id"])["activity"] in (None, "starting")
    _activity(node, rec["id"], "ready")


def test_a_kimi_dying_mid_turn_leaves_the_record_dormant(node: Node, kimi: Kimi) -> None:
    kimi.trust()
    node.up()
    rid = kimi.spawn(node, FAKE_KIMI_CRASH="1")["id"]
    _activity(node, rid, "ready")
    node.run("prompt", rid, "hello kimi")
    gone = node.wait_state(rid, "dormant")
    assert gone["last_exit"]["code"] == 1
    assert [e["data"]["text"] for e in _inputs(node, rid)] == ["hello kimi"]


def test_a_resume_kimi_cannot_do_ends_the_generation_and_starts_nothing_new(
    node: Node, kimi: Kimi
) -> None:
    kimi.trust()
    node.up()
    rid = kimi.spawn(node)["id"]
    _activity(node, rid, "ready")
    node.run("prompt", rid, "hello kimi")
    sid = wait_for(lambda: node.record(rid)["provider_session"], 15, "the identity")
    node.run("stop", rid)
    (kimi.home / "session_index.jsonl").write_text("")  # the user deleted it in kimi meanwhile
    node.run("resume", rid)
    gone = node.wait_state(rid, "dormant")
    assert gone["generation"] == 2 and gone["provider_session"] == sid
    assert gone["last_exit"]["code"] == 1
    shown = node.run("show", rid, "--screen")["last_screen"]
    assert f'Session "{sid}" not found.' in shown
    assert kimi.sessions() == []  # no fresh conversation in its place
    assert_resume_failed_before_exit(node, rid)


def test_an_untrusted_folder_needs_attention_and_nothing_is_typed(node: Node, kimi: Kimi) -> None:
    node.up()
    rid = kimi.spawn(node)["id"]
    rec = node.wait_state(rid, "attention")
    assert rec["attention"] == "trust" and rec["activity"] == "attention"
    node.wait_screen(rid, "Trust this folder?")
    classified = [e for e in node.events() if e["kind"] == "session.classified"]
    assert classified[-1]["data"]["reason"] == "trust"
    time.sleep(0.5)  # a while for anything that would answer the dialog to do so; none may
    assert "Trust this folder?" in node.screen(rid)
    assert _inputs(node, rid) == []
    assert not (kimi.home / "workspace-trust").exists()
    assert node.run("stop", rid)["record"]["state"] == "dormant"


def test_no_model_and_a_command_approval_need_attention(node: Node, kimi: Kimi) -> None:
    kimi.trust()
    node.up()
    unset = kimi.spawn(node, FAKE_KIMI_SCREEN="login")["id"]
    assert node.wait_state(unset, "attention")["attention"] == "login"
    asking = kimi.spawn(node, FAKE_KIMI_SCREEN="permission")["id"]
    _activity(node, asking, "ready")
    node.run("prompt", asking, "run it")
    assert node.wait_state(asking, "attention")["attention"] == "permission"
    node.wait_screen(asking, "Run this command?")
    node.run("key", asking, "enter")  # approving is the user's act, not roost's
    node.wait_screen(asking, "● Tool said hi.")
    node.wait_state(asking, "live")


# -- stream mode ---------------------------------------------------------------------------------


def _stream_record(node: Node, kimi: Kimi, **extra: str) -> str:
    node.up()
    rid: str = kimi.spawn(node, "--mode", "stream", **extra)["id"]
    return rid


def test_a_stream_turn_with_a_tool_call_reports_kimis_session(node: Node, kimi: Kimi) -> None:
    rid = _stream_record(node, kimi)
    done = node.run("turn", rid, "/tool echo hi", "--wait")
    turn = done["turn"]
    assert turn["state"] == "completed", turn
    [session] = kimi.sessions()
    assert turn["result"]["provider_session"] == session["sessionId"]
    assert turn["result"]["result"] == "Tool said hi." and turn["result"]["is_error"] is False
    assert session["workDir"] == str(kimi.cwd)
    assert node.record(rid)["provider_session"] == session["sessionId"]  # the resume hint's id
    by_kind = {e["kind"]: e["data"] for e in done["events"]}
    assert by_kind["session.tool_call"]["name"] == "Bash"
    assert by_kind["session.tool_call"]["input"] == {"command": "echo hi"}
    assert by_kind["session.tool_result"]["content"] == "hi\n"
    assert by_kind["session.output"]["text"] == "Tool said hi."
    kinds = [e["kind"] for e in done["events"]]
    assert kinds.index("session.tool_call") < kinds.index("session.tool_result")
    assert kinds.index("session.tool_result") < kinds.index("session.output")


def test_a_failed_stream_turn_carries_kimis_error(node: Node, kimi: Kimi) -> None:
    rid = _stream_record(node, kimi, FAKE_KIMI_SCREEN="login")
    turn = node.run("turn", rid, "hi", "--wait")["turn"]
    assert turn["state"] == "failed" and turn["result"]["exit"] == 1
    assert turn["result"]["is_error"] is True and "provider_session" not in turn["result"]


def test_a_second_stream_turn_continues_the_same_kimi_session(node: Node, kimi: Kimi) -> None:
    rid = _stream_record(node, kimi)
    first = node.run("turn", rid, "one", "--wait")["turn"]
    second = node.run("turn", rid, "two", "--wait")["turn"]
    assert second["state"] == "completed"
    assert second["result"]["provider_session"] == first["result"]["provider_session"]
    assert node.record(rid)["provider_session"] == first["result"]["provider_session"]
    assert len(kimi.sessions()) == 1


# -- the fake alone, in a PTY, read by the adapter -----------------------------------------------


@pytest.fixture
def pty_kimi(kimi: Kimi) -> Iterator[tuple[ptyprocess.PtyProcess, Terminal]]:
    env = {**os.environ, "KIMI_CODE_HOME": str(kimi.home), "TERM": "xterm-256color"}
    agent = ptyprocess.PtyProcess.spawn(
        [str(FAKE)], cwd=str(kimi.cwd), env=env, dimensions=(40, 120)
    )
    try:
        yield agent, Terminal(40, 120)
    finally:
        agent.terminate(force=True)


def _until(agent: ptyprocess.PtyProcess, term: Terminal, state: str, timeout: float = 10.0) -> str:
    """Feed the fake's output to the screen until the adapter reads ``state`` there."""
    adapter, deadline = KimiAdapter(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([agent.fd], [], [], 0.05)[0]:
            with contextlib.suppress(EOFError):  # gone: what it printed last is on the screen
                term.feed(agent.read(65536))
        if adapter.classify(term.text(), exited=False).state == state:
            return term.text()
    raise AssertionError(f"no {state} screen; last:\n{term.text()}")


def _feed(agent: ptyprocess.PtyProcess, term: Terminal) -> bool:
    """Feed what the fake printed (a wait_for step that never decides by itself)."""
    if select.select([agent.fd], [], [], 0.05)[0]:
        with contextlib.suppress(EOFError):
            term.feed(agent.read(65536))
    return False


def test_the_fake_in_a_pty_walks_the_real_screens(
    kimi: Kimi, pty_kimi: tuple[ptyprocess.PtyProcess, Terminal]
) -> None:
    agent, term = pty_kimi
    since = time.time()
    assert "Trust this folder?" in _until(agent, term, "attention")
    agent.write(b"\r")
    _until(agent, term, "ready")
    assert (kimi.home / "workspace-trust" / work_dir_key(str(kimi.cwd))).exists()
    agent.write(b"hello kimi\r")  # one read: a paste, as kimi 2.1.0 takes it
    wait_for(lambda: "│ > hello kimi" in term.text() or _feed(agent, term), 10, "the paste")
    assert not kimi.sessions() and "You said" not in term.text()  # in the composer, unsent
    agent.write(b"\r")  # an Enter of its own submits
    _until(agent, term, "busy")
    assert "● You said: hello kimi" in _until(agent, term, "ready")
    ctx = LaunchContext(str(kimi.cwd), "pty", {"KIMI_CODE_HOME": str(kimi.home)}, "/d")
    [session] = kimi.sessions()
    assert KimiAdapter().discover_identity(term.text(), ctx, since=since) == session["sessionId"]
    agent.write(b"/exit")
    wait_for(lambda: "│ > /exit" in term.text() or _feed(agent, term), 10, "/exit typed")
    agent.write(b"\r")
    shown = _until(agent, term, "exited")
    assert f"To resume this session: kimi -r {session['sessionId']}" in shown
    assert KimiAdapter().discover_identity(shown, ctx, since=time.time()) == session["sessionId"]
