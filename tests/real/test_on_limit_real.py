"""Usage limits of the real CLIs through roost, offline: the stand-in answers ``LIMITTEST`` with
each vendor's usage-limit 429 until ``limit_seconds`` after the first such request.

* codex 0.171.0 (``usage_limit_reached`` with ``resets_at``) shows "You've hit your usage limit
  ... or try again at 6:30 PM." and waits: ``attention (rate-limit)`` with the reset read from the
  screen (the end of the minute shown); with ``--on-limit continue`` roost types ``continue``
  after it and codex carries on.
* claude 2.1.332 with a subscriber's login (an OAuth token) shows "You've hit your 5-hour limit ·
  resets 6:34pm (UTC)" and continues by itself after the reset ("Continuing automatically at
  ...", then "Usage limit reset · Continuing automatically"); roost reports the reset and types
  nothing. With an API key it shows "API Error: Request
  rejected (429) · ..." and no reset time: reported, nothing typed.
* kimi 2.1.0 retries a 429 by itself after its ``retry-after`` ("Retrying (2/10) ·
  APIProviderRateLimitError · in 5s"): busy, then the answer; nothing to continue.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Node, wait_for
from tests.fakes.model_api import HELLO, ModelApi
from tests.real.harness import Cli, claude_env, codex_env, kimi_env


def _env_args(env: dict[str, str]) -> list[str]:
    return [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]


def _kinds(node: Node, kind: str) -> list[dict[str, Any]]:
    return [e for e in node.events() if e["kind"] == kind]


def _spawn(node: Node, cli: Cli, binvar: str, env: dict[str, str], cwd: Path) -> None:
    node.up()
    args = _env_args({**env, binvar: cli.argv[-1]})
    node.run("spawn", cli.name, "--name", "lim", "--cwd", str(cwd), "--on-limit", "continue", *args)
    wait_for(lambda: node.record("lim")["activity"] == "ready" or None, 90, "ready")


def _limited(node: Node, timeout: float = 60) -> dict[str, Any]:
    return wait_for(
        lambda: r if (r := node.record("lim"))["attention"] == "rate-limit" else None,
        timeout,
        "attention (rate-limit)",
    )


def test_codex_usage_limit_is_continued_after_its_reset(
    node: Node, codex: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    model_api.limit_seconds = 5.0
    _spawn(node, codex, "ROOST_CODEX_BIN", codex_env(tmp_path / "homes", model_api, cwd), cwd)
    node.run("prompt", "lim", "LIMITTEST please")
    rec = _limited(node)
    until = model_api.limit_until
    assert until is not None and rec["state"] == "attention"
    # the end of the minute the screen shows: after the real reset, less than a minute after
    assert until <= rec["reset_at"] < until + 61
    assert "try again at" in node.screen("lim")
    done = wait_for(lambda: _kinds(node, "session.limit-continued"), 120, "the continue")
    assert [e["data"]["reset_at"] for e in done] == [rec["reset_at"]]
    assert done[0]["ts"] >= rec["reset_at"]  # typed after the reset, not before
    wait_for(lambda: HELLO in node.screen("lim").split("continue")[-1] or None, 60, "the answer")
    wait_for(lambda: node.record("lim")["state"] == "live" or None, 30, "live again")
    assert len(_kinds(node, "session.limit-continued")) == 1


def test_claude_subscriber_limit_is_reported_and_claude_continues_itself(
    node: Node, claude: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    model_api.limit_seconds = 5.0
    env = claude_env(tmp_path / "homes", model_api, cwd)
    del env["ANTHROPIC_AUTH_TOKEN"]
    env["CLAUDE_CODE_OAUTH_TOKEN"] = "sk-ant-oat01-mock"  # a subscriber's login
    _spawn(node, claude, "ROOST_CLAUDE_BIN", env, cwd)
    node.run("prompt", "lim", "LIMITTEST please")
    rec = _limited(node)
    until = model_api.limit_until
    assert until is not None and until <= rec["reset_at"] < until + 61
    seen = [e["data"] for e in _kinds(node, "session.classified")]
    assert any(d.get("reason") == "rate-limit" and d.get("self_continues") for d in seen)
    assert "resets" in node.screen("lim")
    # past the reset: roost typed nothing (claude continues by itself)
    wait_for(lambda: time.time() > rec["reset_at"] + 5 or None, 90, "the reset to pass")
    assert _kinds(node, "session.limit-continued") == []
    assert not [e for e in _kinds(node, "session.input") if e["data"].get("text") == "continue"]
    # claude carries on by itself (about 70 s after the reset in 2.1.332)
    node.wait_screen("lim", "Continuing automatically", timeout=150)
    wait_for(
        lambda: HELLO in node.screen("lim").split("Continuing automatically")[-1] or None,
        60,
        "claude's own continue answered",
    )
    wait_for(lambda: node.record("lim")["state"] == "live" or None, 30, "out of the limit")
    assert node.record("lim")["reset_at"] is None
    assert _kinds(node, "session.limit-continued") == []


def test_claude_api_key_limit_shows_no_reset(
    node: Node, claude: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    _spawn(node, claude, "ROOST_CLAUDE_BIN", claude_env(tmp_path / "homes", model_api, cwd), cwd)
    node.run("prompt", "lim", "LIMITTEST please")
    rec = _limited(node)
    assert rec["reset_at"] is None
    assert "Request rejected (429)" in node.screen("lim")


def test_kimi_retries_a_limit_by_itself(
    node: Node, kimi: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    model_api.limit_seconds = 5.0
    _spawn(node, kimi, "ROOST_KIMI_BIN", kimi_env(tmp_path / "homes", model_api, cwd), cwd)
    node.run("prompt", "lim", "LIMITTEST please")
    node.wait_screen("lim", "APIProviderRateLimitError", timeout=60)
    node.wait_screen("lim", HELLO, timeout=90)  # after the retry-after, with nothing typed
    assert _kinds(node, "session.limit-continued") == []
    assert all(e["data"].get("reason") != "rate-limit" for e in _kinds(node, "session.classified"))
