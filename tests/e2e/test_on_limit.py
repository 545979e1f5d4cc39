"""Resume after a usage limit, end to end: a real node driving the stand-in ``tests/fakes/codex``,
whose prompt ``LIMITTEST`` shows codex 0.171.0's usage-limit cell with the reset time the fake is
given (``FAKE_CODEX_LIMIT_AT``, shown to the minute as the real one shows it)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Node, activity, wait_for
from tests.e2e.test_codex_fake import codex_env, events

CONTINUED = "Hello from the fake codex: continue"


def spawn(node: Node, project: Path, tmp_path: Path, limit_at: float, *policy: str) -> str:
    env = codex_env(tmp_path, f"FAKE_CODEX_LIMIT_AT={limit_at}")
    rec = node.run("spawn", "codex", "--cwd", str(project), *policy, *env)["record"]
    return str(rec["id"])


def limited(node: Node, rid: str) -> dict[str, object]:
    rec = wait_for(
        lambda: r if (r := node.record(rid))["attention"] == "rate-limit" else None,
        15,
        "attention (rate-limit)",
    )
    assert rec["state"] == "attention" and isinstance(rec["reset_at"], float)
    return rec


def minute_start(t: float) -> float:
    return t - time.localtime(t).tm_sec - (t % 1)


def test_the_continue_is_typed_once_after_the_reset(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    past = time.time() - 120  # a reset two minutes ago: due at once
    rid = spawn(node, project, tmp_path, past, "--on-limit", "continue")
    assert node.record(rid)["on_limit"] == "continue"
    activity(node, rid, "ready")
    node.run("prompt", rid, "LIMITTEST one")
    node.wait_screen(rid, "try again at")
    node.wait_screen(rid, CONTINUED)
    done = wait_for(lambda: events(node, rid, "session.limit-continued"), 15, "the event")
    reset = minute_start(past) + 60  # the end of the minute shown
    assert [e["data"]["reset_at"] for e in done] == [reset]
    typed = [e for e in events(node, rid, "session.input") if e["data"].get("text") == "continue"]
    assert [e["seq"] for e in typed] == [done[0]["data"]["seq"]]  # committed, then typed
    activity(node, rid, "ready")
    assert node.record(rid)["reset_at"] is None  # out of the limit

    # the same reset shown again: the same operation, answered with the first outcome, and
    # nothing typed a second time
    node.run("prompt", rid, "LIMITTEST two")
    limited(node, rid)
    tries = wait_for(lambda: continues(node) if len(continues(node)) == 2 else None, 15, "again")
    assert [t["duplicate"] for t in tries] == [False, True]
    assert node.screen(rid).count(CONTINUED) == 1
    assert len(events(node, rid, "session.limit-continued")) == 1
    assert node.record(rid)["attention"] == "rate-limit"


def continues(node: Node) -> list[dict[str, Any]]:
    """The node log's ``limit-continued`` lines: one per continue it put through the inputs."""
    path = node.state_dir / "logs" / "node.log"
    lines = [json.loads(line) for line in path.read_text().splitlines() if "limit-cont" in line]
    return [line for line in lines if line.get("event") == "limit-continued"]


def test_a_changed_screen_or_the_policy_wait_types_nothing(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    now = time.time()
    if time.localtime(now).tm_sec > 45:  # the reset shown must lie a few seconds ahead
        wait_for(lambda: time.localtime().tm_sec < 5 or None, 20, "a new minute")
        now = time.time()
    rid = spawn(node, project, tmp_path, now, "--on-limit", "continue")
    waiting = spawn(node, project, tmp_path, now - 120)  # the default policy: wait
    for ref in (rid, waiting):
        activity(node, ref, "ready")
        node.run("prompt", ref, "LIMITTEST")
    rec = limited(node, rid)
    assert limited(node, waiting)["on_limit"] == "wait"
    node.run("send", rid, "x")  # the screen changes before the reset
    node.wait_screen(rid, "\u203a x")
    reset = float(str(rec["reset_at"]))
    assert reset == minute_start(now) + 60
    wait_for(lambda: time.time() > reset + 4 or None, 75, "the reset to pass")
    for ref in (rid, waiting):
        assert events(node, ref, "session.limit-continued") == []
        assert CONTINUED not in node.screen(ref)


def test_a_node_restarted_before_the_reset_still_continues(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """The supervisor re-attaching names its verdict and the screen it read: the restarted node
    arms the continue again."""
    node.up()
    now = time.time()
    if time.localtime(now).tm_sec > 40:  # the reset shown must lie past the restart
        wait_for(lambda: time.localtime().tm_sec < 5 or None, 25, "a new minute")
        now = time.time()
    rid = spawn(node, project, tmp_path, now, "--on-limit", "continue")
    activity(node, rid, "ready")
    node.run("prompt", rid, "LIMITTEST")
    reset = float(str(limited(node, rid)["reset_at"]))
    node.run("node", "stop")
    node.up()
    assert time.time() < reset  # restarted before the reset
    done = wait_for(lambda: events(node, rid, "session.limit-continued"), 90, "the continue")
    assert [e["data"]["reset_at"] for e in done] == [reset]
    node.wait_screen(rid, CONTINUED)
