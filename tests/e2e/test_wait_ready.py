"""What ``spawn`` and ``resume`` report: what is known when they answer
(``starting``: the agent runs, its screen not read yet), and with ``--wait-ready`` the outcome a
moment later: ready, needs a human, or ended, within a deadline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import FAKES, Node


def claude(tmp_path: Path, *switches: str) -> list[str]:
    pairs = [f"ROOST_CLAUDE_BIN={FAKES / 'claude'}", f"CLAUDE_CONFIG_DIR={tmp_path / 'c'}"]
    return [a for pair in [*pairs, *switches] for a in ("--env", pair)]


def test_spawn_says_starting_and_wait_ready_waits_for_ready(node: Node, project: Path) -> None:
    node.up()
    text = subprocess.run(
        [sys.executable, "-m", "roost", "spawn", "echo", "--name", "s", "--cwd", str(project)],
        env=node.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "(s): starting" in text and "live" not in text, text
    assert node.record("s")["state"] == "live"  # on the wire: the agent runs (PROTOCOL)

    doc = node.run("spawn", "echo", "--name", "w", "--cwd", str(project), "--wait-ready")
    assert doc["ready"] is True
    assert doc["record"]["state"] == "live" and doc["record"]["activity"] == "ready"
    assert "echo-ready>" in node.screen("w")
    node.run("stop", "w")
    resumed = node.run("resume", "w", "--wait-ready")["record"]
    assert resumed["activity"] == "ready" and resumed["generation"] == 2
    stream = node.run("spawn", "echo", "--mode", "stream", "--cwd", str(project), "--wait-ready")
    assert stream["record"]["state"] == "live"


def test_wait_ready_reports_a_human_needed(node: Node, tmp_path: Path, project: Path) -> None:
    node.up()
    args = ("spawn", "claude", "--name", "cc", "--cwd", str(project), "--wait-ready")
    err = node.error(*args, *claude(tmp_path, "FAKE_CLAUDE_SCREEN=login"))
    assert err["code"] == "needs-attention" and "attention (login)" in err["message"]
    assert err["detail"]["outcome"] == "attention"
    assert err["detail"]["record"]["state"] == "attention"


def test_wait_ready_reports_an_agent_that_exits(node: Node, tmp_path: Path, project: Path) -> None:
    node.up()
    args = ("spawn", "claude", "--name", "gone", "--cwd", str(project), "--wait-ready")
    err = node.error(*args, *claude(tmp_path, "FAKE_CLAUDE_CRASH=1"))
    assert err["code"] == "session-not-live" and err["detail"]["outcome"] == "exited"
    assert node.record("gone")["state"] == "dormant"


def test_wait_ready_has_a_deadline(node: Node, tmp_path: Path, project: Path) -> None:
    node.up()
    args = ("spawn", "claude", "--cwd", str(project), "--wait-ready", "--ready-timeout", "0.5")
    err = node.error(*args, *claude(tmp_path, "FAKE_CLAUDE_SLOW_START=30"))
    assert err["code"] == "timeout" and err["detail"]["outcome"] == "timeout"
    assert "not ready within 0.5 s" in err["message"]
