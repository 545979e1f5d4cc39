"""``roost fork`` through a real node with the echo agent, whose fork copies its session file as
claude's does: a new record, its own provider session id, the source's conversation untouched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.conftest import FAKES, Node, project, wait_for
from tests.e2e.test_generic_fake import provider

QUILL = FAKES / "quill"

__all__ = ["project"]


def _conversation(node: Node, provider_session: str) -> Path:
    return node.state_dir / "providers" / "echo" / "sessions" / f"{provider_session}.jsonl"


def _said(path: Path) -> list[str]:
    return [json.loads(line)["user"] for line in path.read_text().splitlines() if line.strip()]


def _verdicts(node: Node, record: str) -> list[dict[str, Any]]:
    return [
        e["data"] for e in node.events() if e["kind"] == "session.resume" and e["record"] == record
    ]


def test_a_pty_fork_copies_the_conversation_and_leaves_the_source_alone(
    node: Node, project: Path
) -> None:
    node.up()
    node.run("spawn", "echo", "--name", "src", "--cwd", str(project))
    node.wait_screen("src", "echo-ready>")
    node.run("prompt", "src", "one")
    source_file = _conversation(node, node.record("src")["provider_session"])
    wait_for(lambda: _said(source_file) == ["one"], 15, "the source's first turn")
    before = node.record("src")
    kept = source_file.read_bytes()

    doc = node.run("fork", "src")
    fork = doc["record"]
    assert fork["name"] == "src-fork" and fork["state"] == "live" and fork["generation"] == 1
    assert fork["provider"] == "echo" and fork["mode"] == "pty" and fork["cwd"] == str(project)
    new = fork["provider_session"]
    assert new and new != before["provider_session"]
    assert doc["source"] == {"record": before["id"], "provider_session": before["provider_session"]}
    node.wait_screen("src-fork", f"resumed {new} (1 turns)")
    verdict = wait_for(lambda: _verdicts(node, fork["id"]), 15, "the fork's verdict")
    assert verdict == [
        {"outcome": "resumed", "reason": None, "detail": "", "fork": before["provider_session"]}
    ]
    created = [e for e in node.events() if e["kind"] == "record.created"]
    assert created[-1]["data"]["fork"] == doc["source"]

    # the source: its record and its conversation as they were
    after = node.record("src")
    assert (after["generation"], after["provider_session"], after["state"]) == (
        before["generation"],
        before["provider_session"],
        before["state"],
    )
    assert source_file.read_bytes() == kept

    # the fork goes on from the copy; the source goes on without the fork's turn
    node.run("prompt", "src-fork", "two")
    fork_file = _conversation(node, new)
    wait_for(lambda: _said(fork_file) == ["one", "two"], 15, "the fork's turn after the copy")
    assert source_file.read_bytes() == kept
    node.run("prompt", "src", "three")
    wait_for(lambda: _said(source_file) == ["one", "three"], 15, "the source's next turn")
    assert _said(fork_file) == ["one", "two"]

    # a second fork takes the next derived name; --name chooses one
    assert node.run("fork", "src")["record"]["name"] == "src-fork-2"
    named = node.run("fork", "src-fork", "--name", "branch b")["record"]
    assert named["name"] == "branch b"
    node.wait_screen("branch b", f"resumed {named['provider_session']} (2 turns)")
    assert node.error("fork", "src", "--name", "branch b")["code"] == "name-taken"

    # an operation id: a repeated fork is the first one's outcome, not a second fork
    first = node.run("fork", "src", "--op", "fork-op-1")
    again = node.run("fork", "src", "--op", "fork-op-1")
    assert again["record"]["id"] == first["record"]["id"]
    names = [r["name"] for r in node.run("ls")["records"]]
    assert names.count("src-fork-3") == 1 and "src-fork-4" not in names


def test_a_stream_fork_s_first_turn_copies_the_conversation(node: Node, project: Path) -> None:
    node.up()
    node.run("spawn", "echo", "--name", "s", "--mode", "stream", "--cwd", str(project))
    # no turn ran: there is no conversation to copy yet, and nothing is written
    err = node.error("fork", "s")
    assert err["code"] == "no-provider-session"
    assert [r["name"] for r in node.run("ls")["records"]] == ["s"]

    node.run("turn", "s", "one", "--wait")
    source = node.record("s")
    source_file = _conversation(node, source["provider_session"])
    kept = source_file.read_bytes()
    fork = node.run("fork", "s", "--name", "t")["record"]
    assert fork["mode"] == "stream" and fork["provider_session"] != source["provider_session"]
    # stopped and resumed before its first turn, the fork still makes its copy at that turn
    node.run("stop", "t")
    node.run("resume", "t")

    done = node.run("turn", "t", "two", "--wait")
    assert done["turn"]["state"] == "completed", done
    new = node.record("t")["provider_session"]
    assert new == fork["provider_session"] and new != source["provider_session"]
    assert _said(_conversation(node, new)) == ["one", "two"]
    assert source_file.read_bytes() == kept
    again = node.run("turn", "t", "three", "--wait")  # the next turn resumes the fork itself
    assert again["turn"]["state"] == "completed", again
    assert _said(_conversation(node, new)) == ["one", "two", "three"]
    assert _said(source_file) == ["one"]


def test_fork_refuses_an_unknown_record(node: Node) -> None:
    node.up()
    assert node.error("fork", "nothing-here")["code"] == "not-found"


def test_a_fork_that_continues_its_source_is_a_failure_said_as_such(
    node: Node, project: Path
) -> None:
    """ROOST_ECHO_FORK_SAME=1: the agent's fork goes on in the source's own conversation, as a
    CLI that ignored its fork flag would."""
    node.up()
    env = ("--env", "ROOST_ECHO_FORK_SAME=1")
    node.run("spawn", "echo", "--name", "src", "--cwd", str(project), *env)
    node.wait_screen("src", "echo-ready>")
    source = node.record("src")["provider_session"]
    node.run("stop", "src")
    fork = node.run("fork", "src")["record"]
    failed = node.wait_state("src-fork", "attention", timeout=30)
    assert failed["attention"] == "resume-unverified"
    verdicts = _verdicts(node, fork["id"])
    assert [(v["outcome"], v["fork"]) for v in verdicts] == [("resume_failed", source)]
    assert "source's provider session id" in verdicts[0]["detail"]
    assert failed["provider_session"] != source  # never taken as the fork's

    # in stream mode the source's id comes back in the turn's lines: refused the same way
    node.run("spawn", "echo", "--name", "s", "--mode", "stream", "--cwd", str(project), *env)
    node.run("turn", "s", "one", "--wait")
    stream_source = node.record("s")["provider_session"]
    t = node.run("fork", "s", "--name", "t")["record"]
    node.run("turn", "t", "two", "--wait", check=False)
    wait_for(lambda: _verdicts(node, t["id"]), 15, "the stream fork's failure")
    assert [v["outcome"] for v in _verdicts(node, t["id"])] == ["resume_failed"]
    assert node.record("t")["provider_session"] != stream_source


def test_a_provider_without_a_fork_is_refused_and_nothing_is_written(
    node: Node, project: Path, tmp_path: Path
) -> None:
    """A provider the configuration file defines has no fork (its table says none)."""
    home = tmp_path / "quill-home"
    node.config.write_text(provider("quill", str(QUILL), home))
    node.up()
    node.run("spawn", "quill", "--name", "q", "--cwd", str(project))
    wait_for(lambda: node.record("q")["provider_session"], 15, "the id roost gave")
    err = node.error("fork", "q")
    assert err["code"] == "provider-cannot-fork" and err["detail"] == {"provider": "quill"}
    assert [(r["name"], r["generation"]) for r in node.run("ls")["records"]] == [("q", 1)]
    assert not [e for e in node.events() if e["kind"] == "record.created" and "fork" in e["data"]]
