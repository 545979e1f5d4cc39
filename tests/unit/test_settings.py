"""roost/adapters/settings.py: what the config file and the node's environment add to a launch."""

from __future__ import annotations

from pathlib import Path

from roost.adapters.base import LaunchContext
from roost.adapters.claude import ClaudeAdapter
from roost.adapters.settings import binary, with_settings
from roost.config import Config, load


def cfg(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load(path)


def ctx(env: dict[str, str]) -> LaunchContext:
    return LaunchContext(cwd="/w", mode="pty", env=env, data_dir="/d")


FILE = """[providers.claude]
bin = "/file/claude"
env = { CLAUDE_CONFIG_DIR = "/file/home", X = "1" }
"""


def test_the_file_env_goes_under_the_records_and_the_binary_is_filled_in(tmp_path: Path) -> None:
    config = cfg(tmp_path, FILE)
    seen, added = with_settings("claude", ctx({"X": "record"}), config, {})
    assert seen.env == {
        "X": "record",
        "CLAUDE_CONFIG_DIR": "/file/home",
        "ROOST_CLAUDE_BIN": "/file/claude",
    }
    assert added == {"CLAUDE_CONFIG_DIR": "/file/home", "ROOST_CLAUDE_BIN": "/file/claude"}
    assert ClaudeAdapter().fresh(seen).argv[0] == "/file/claude"


def test_the_nodes_variable_wins_over_the_file_and_the_records_over_both(tmp_path: Path) -> None:
    config = cfg(tmp_path, FILE)
    node = {"ROOST_CLAUDE_BIN": "/node/claude"}
    assert (
        with_settings("claude", ctx({}), config, node)[0].env["ROOST_CLAUDE_BIN"] == "/node/claude"
    )
    mine = ctx({"ROOST_CLAUDE_BIN": "/mine"})
    seen, added = with_settings("claude", mine, config, node)
    assert seen.env["ROOST_CLAUDE_BIN"] == "/mine" and "ROOST_CLAUDE_BIN" not in added


def test_no_file_adds_nothing(tmp_path: Path) -> None:
    config = load(tmp_path / "none.toml")
    seen, added = with_settings("codex", ctx({"A": "b"}), config, {})
    assert seen.env == {"A": "b"} and added == {}


def test_binary_says_what_is_looked_for_and_whether_it_is_there(tmp_path: Path) -> None:
    config = load(tmp_path / "none.toml")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    assert binary("kimi", config, {"PATH": str(bindir)}) == {
        "looked_for": "kimi",
        "from": "default",
        "path": None,
        "missing": True,
    }
    (bindir / "kimi").write_text("#!/bin/sh\n")
    (bindir / "kimi").chmod(0o755)
    found = binary("kimi", config, {"PATH": str(bindir)})
    assert found["path"] == str(bindir / "kimi") and found["missing"] is False
    named = binary("kimi", config, {"ROOST_KIMI_BIN": "/no/kimi", "PATH": str(bindir)})
    assert named["missing"] is True and named["from"] == "env ROOST_KIMI_BIN"
