"""A provider CLI that is not installed: ``spawn`` and ``resume`` refuse
with ``provider-missing`` in both modes, naming the program, its ``ROOST_<PROVIDER>_BIN`` and how
to install it, and leave nothing that blocks the retry once it is installed."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import FAKES, Node


@pytest.fixture
def bare(node: Node, tmp_path: Path) -> Node:
    """A node whose PATH has no vendor CLI on it (only the Python running the tests)."""
    empty = tmp_path / "bin"
    empty.mkdir()
    node.env["PATH"] = os.pathsep.join([str(empty), os.path.dirname(sys.executable)])
    node.up()
    return node


@pytest.mark.parametrize("mode", ["pty", "stream"])
def test_a_missing_cli_is_refused_at_spawn_and_the_retry_works(
    bare: Node, tmp_path: Path, project: Path, mode: str
) -> None:
    args = ("spawn", "claude", "--name", "cc", "--mode", mode, "--cwd", str(project))
    err = bare.error(*args)
    assert err["code"] == "provider-missing", err
    assert "ROOST_CLAUDE_BIN" in err["message"] and "npm install" in err["message"]
    assert err["detail"]["program"] == "claude" and err["detail"]["env"] == "ROOST_CLAUDE_BIN"
    assert bare.run("ls")["records"] == []  # nothing holds the name
    assert not any(e["kind"] == "record.created" for e in bare.events())

    pointed = ("--env", f"ROOST_CLAUDE_BIN={FAKES / 'claude'}")
    config = ("--env", f"CLAUDE_CONFIG_DIR={tmp_path / 'claude'}")
    rec = bare.run(*args, *pointed, *config)["record"]  # the same name, at once
    assert rec["name"] == "cc" and rec["state"] in ("live", "attention")


def test_a_binary_named_by_the_variable_must_exist(bare: Node, project: Path) -> None:
    err = bare.error(
        "spawn", "codex", "--cwd", str(project), "--env", "ROOST_CODEX_BIN=/nonexistent/codex"
    )
    assert err["code"] == "provider-missing" and "'/nonexistent/codex'" in err["message"]
    assert "ROOST_CODEX_BIN" in err["message"] and "@openai/codex" in err["message"]


def test_a_cli_gone_since_is_refused_at_resume(bare: Node, tmp_path: Path, project: Path) -> None:
    copy = tmp_path / "claude-copy"
    shutil.copy(FAKES / "claude", copy)
    env = ["--env", f"ROOST_CLAUDE_BIN={copy}", "--env", f"CLAUDE_CONFIG_DIR={tmp_path / 'c'}"]
    rid = bare.run("spawn", "claude", "--name", "gone", "--cwd", str(project), *env)["record"]["id"]
    bare.run("stop", rid)
    copy.unlink()
    err = bare.error("resume", rid)
    assert err["code"] == "provider-missing" and str(copy) in err["message"]
    assert bare.record(rid)["state"] == "dormant"  # resumable once the CLI is back


def test_a_spawn_that_fails_to_launch_gives_its_name_up(
    bare: Node, tmp_path: Path, project: Path
) -> None:
    """A program that is there but cannot run (no valid executable format): ``launch-failed``,
    and the failed record keeps no name a retry would collide with."""
    broken = tmp_path / "broken-claude"
    broken.write_bytes(b"\x00\x01 not a program")
    broken.chmod(0o755)
    args = ("spawn", "claude", "--name", "cc", "--cwd", str(project))
    err = bare.error(*args, "--env", f"ROOST_CLAUDE_BIN={broken}")
    assert err["code"] == "launch-failed", err
    (failed,) = bare.run("ls")["records"]
    assert failed["state"] == "failed" and failed["name"] is None
    assert failed["last_exit"]["name"] == "cc"
    assert (
        bare.run("spawn", "echo", "--name", "cc", "--cwd", str(project))["record"]["name"] == "cc"
    )
