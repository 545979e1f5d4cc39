"""roost/adapters/doctor.py: a provider's report from what its CLI answers (a fake runner)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from roost.adapters.base import Runner
from roost.adapters.doctor import probe
from roost.config import Config, load

Answers = dict[tuple[str, ...], tuple[int | None, str]]


@pytest.fixture
def bindir(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    for name in ("claude", "codex", "kimi"):
        (d / name).write_text("#!/bin/sh\n")
        (d / name).chmod(0o755)
    return d


def none(tmp_path: Path) -> Config:
    return load(tmp_path / "none.toml")


def runner(answers: Answers) -> Runner:
    def run(argv: list[str], env: dict[str, str]) -> tuple[int | None, str]:
        return answers.get(tuple(argv[1:]), (127, "unknown command"))

    return run


def levels(report: dict[str, Any]) -> list[str]:
    return [f["level"] for f in report["findings"]]


def test_a_known_logged_in_claude(tmp_path: Path, bindir: Path) -> None:
    answers: Answers = {
        ("--version",): (0, "2.1.332 (Claude Code)\n"),
        ("auth", "status"): (0, '{"loggedIn": true, "authMethod": "oauth", "email": "me@x"}'),
    }
    rep = probe("claude", none(tmp_path), {"PATH": str(bindir)}, runner(answers))
    assert rep["version"] == "2.1.332" and rep["login"] == "logged-in"
    assert rep["login_how"] == "claude auth status: oauth" and levels(rep) == ["ok", "ok"]
    assert "me@x" not in repr(rep)


def test_codex_logged_out_and_a_key_tail_never_kept(tmp_path: Path, bindir: Path) -> None:
    env = {"PATH": str(bindir)}
    out: Answers = {
        ("--version",): (0, "codex-cli 0.171.0"),
        ("login", "status"): (1, "Not logged in"),
    }
    assert probe("codex", none(tmp_path), env, runner(out))["login"] == "logged-out"
    key = "Logged in using an API key - sk-proj-***ABCD"
    inn: Answers = {("--version",): (0, "codex-cli 0.171.0"), ("login", "status"): (0, key)}
    rep = probe("codex", none(tmp_path), env, runner(inn))
    assert rep["login"] == "logged-in" and "ABCD" not in repr(rep)


def test_versions_roost_does_not_know_and_the_legacy_kimi(tmp_path: Path, bindir: Path) -> None:
    env = {"PATH": str(bindir), "KIMI_CODE_HOME": str(tmp_path / "kimi-home")}
    newer: Answers = {("--version",): (0, "3.0.1 (Claude Code)"), ("auth", "status"): (1, "{}")}
    rep = probe("claude", none(tmp_path), env, runner(newer))
    assert (
        levels(rep) == ["warn", "warn"]
        and "not a version roost knows" in rep["findings"][0]["what"]
    )
    legacy: Answers = {("--version",): (0, "kimi, version 1.52.0\nkimi-cli is deprecated")}
    rep = probe("kimi", none(tmp_path), env, runner(legacy))
    assert levels(rep) == ["error"] and "legacy" in rep["findings"][0]["what"]
    broken: Answers = {("--version",): (None, "no answer within 8 s")}
    assert levels(probe("codex", none(tmp_path), env, runner(broken))) == ["error"]


def test_kimi_login_is_read_from_its_home(tmp_path: Path, bindir: Path) -> None:
    home = tmp_path / "kimi-home"
    env = {"PATH": str(bindir), "KIMI_CODE_HOME": str(home)}
    answers: Answers = {("--version",): (0, "2.1.0")}
    assert probe("kimi", none(tmp_path), env, runner(answers))["login"] == "logged-out"
    home.mkdir()
    (home / "config.toml").write_text('default_model = "k2"\n')
    assert probe("kimi", none(tmp_path), env, runner(answers))["login"] == "logged-in"


def test_missing_is_a_warning_unless_the_binary_was_named(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    rep = probe("codex", none(tmp_path), {"PATH": str(empty)}, runner({}))
    assert rep["missing"] and levels(rep) == ["warn"] and "npm install" in rep["findings"][0]["fix"]
    named = {"PATH": str(empty), "ROOST_CODEX_BIN": "/nowhere/codex"}
    assert levels(probe("codex", none(tmp_path), named, runner({}))) == ["error"]
