"""Tokens through roost from the real CLIs, offline: the figures roost keeps equal what the
loopback model stand-in reported (``ModelApi.usage_reported``) for the requests of the turn.

Stream mode: claude's result and codex's ``turn.completed`` carry the turn's usage (claude also
its cost); kimi's headless output carries none, so its wire file's ``usage.record`` lines are read
after the turn. Pty mode: codex's rollout ``token_count``, kimi's wire file and claude's
transcript, read after the screen leaves busy. The stand-in counts input tokens the way each
vendor's API does (Anthropic leaves the cache out, the OpenAI APIs count it in); roost's
``input`` never counts it, so each expected figure is converted the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Node, wait_for
from tests.fakes.model_api import ModelApi
from tests.real.harness import MODULES, Cli, claude_env, codex_env, kimi_env

pytestmark = pytest.mark.timeout(300)


def _env_args(env: dict[str, str]) -> list[str]:
    return [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]


def expected(api: ModelApi, *, conversation_only: bool = False) -> dict[str, int]:
    """The sum of what the stand-in reported, in roost's terms (``conversation_only``: only the
    requests that offered tools, leaving out a CLI's side requests: a title, a quota check)."""
    total = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}
    for entry in api.usage_reported:
        if conversation_only and not entry["tools"]:
            continue
        used: dict[str, Any] = entry["usage"]
        if entry["api"] == "anthropic":
            cached, written = used["cache_read_input_tokens"], used["cache_creation_input_tokens"]
            prompt, output = used["input_tokens"] + cached + written, used["output_tokens"]
        elif entry["api"] == "responses":
            cached, written = used["input_tokens_details"]["cached_tokens"], 0
            prompt, output = used["input_tokens"], used["output_tokens"]
        else:
            cached, written = used["prompt_tokens_details"]["cached_tokens"], 0
            prompt, output = used["prompt_tokens"], used["completion_tokens"]
        total["input"] += prompt - cached - written
        total["output"] += output
        total["cache_read"] += cached
        total["cache_write"] += written
    return total


def tokens(usage: dict[str, Any] | None) -> dict[str, int] | None:
    return None if usage is None else {k: v for k, v in usage.items() if k != "cost_usd"}


def _stream_turn(node: Node, cli: Cli, binvar: str, env: dict[str, str], cwd: Path) -> Any:
    node.up()
    args = _env_args({**env, binvar: cli.argv[-1]})
    node.run("spawn", cli.name, "--name", "s", "--mode", "stream", "--cwd", str(cwd), *args)
    done = node.run("turn", "s", "TOOLTEST now", "--wait", "--wait-timeout", "120")
    assert done["turn"]["state"] == "completed", done
    return done["turn"]


def _pty_prompt(
    node: Node, cli: Cli, binvar: str, env: dict[str, str], cwd: Path, api: ModelApi
) -> None:
    node.up()
    args = _env_args({**env, binvar: cli.argv[-1]})
    node.run("spawn", cli.name, "--name", "p", "--cwd", str(cwd), *args)
    wait_for(lambda: node.record("p")["activity"] == "ready", 60, "ready")
    node.run("prompt", "p", "hello")
    node.wait_screen("p", "Hello from the mock.", timeout=90)


def _settles_on(node: Node, ref: str, want: dict[str, int]) -> dict[str, Any]:
    """``show``'s usage once its tokens are ``want`` (the last seen in the failure)."""
    seen: list[Any] = []

    def equal() -> dict[str, Any] | None:
        shown = node.run("show", ref)
        seen.append(shown["usage"])
        return shown["usage"] if tokens(shown["usage"]) == want else None

    try:
        return wait_for(equal, 60, "the usage the stand-in reported")
    except AssertionError:
        raise AssertionError(f"usage {seen[-1] if seen else None}, expected {want}") from None


def test_claude_stream_turn_usage_and_cost(
    node: Node, claude: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = claude_env(tmp_path / "homes", model_api, cwd)
    turn = _stream_turn(node, claude, "ROOST_CLAUDE_BIN", env, cwd)
    used = turn["result"]["usage"]
    assert tokens(used) == expected(model_api) and used["cache_write"] > 0
    assert used["cost_usd"] > 0  # claude's own price for its model
    assert node.run("usage")["total"] == used


def test_codex_stream_turn_usage(
    node: Node, codex: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = codex_env(tmp_path / "homes", model_api, cwd)
    turn = _stream_turn(node, codex, "ROOST_CODEX_BIN", env, cwd)
    assert turn["result"]["usage"] == expected(model_api)  # no cost: codex reports none
    assert node.run("usage")["total"] == turn["result"]["usage"]


def test_kimi_stream_turn_usage_from_its_wire_file(
    node: Node, kimi: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = kimi_env(tmp_path / "homes", model_api, cwd)
    turn = _stream_turn(
        node, Cli("kimi", [str(MODULES / ".bin" / "kimi")]), "ROOST_KIMI_BIN", env, cwd
    )
    assert "usage" not in turn["result"]  # kimi's headless output has none
    _settles_on(node, "s", expected(model_api))
    follow = [e for e in node.events() if e["kind"] == "session.usage"]
    assert follow and follow[-1]["data"]["source"] == "files"
    assert follow[-1]["data"]["turn"] == turn["id"]


def test_codex_pty_usage_from_its_rollout(
    node: Node, codex: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = codex_env(tmp_path / "homes", model_api, cwd)
    _pty_prompt(node, codex, "ROOST_CODEX_BIN", env, cwd, model_api)
    _settles_on(node, "p", expected(model_api, conversation_only=True))
    node.run("stop", "p")


def test_kimi_pty_usage_from_its_wire_file(
    node: Node, kimi: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = kimi_env(tmp_path / "homes", model_api, cwd)
    kimi_bin = Cli("kimi", [str(MODULES / ".bin" / "kimi")])
    _pty_prompt(node, kimi_bin, "ROOST_KIMI_BIN", env, cwd, model_api)
    _settles_on(node, "p", expected(model_api, conversation_only=True))
    node.run("stop", "p")


def test_claude_pty_usage_from_its_transcript(
    node: Node, claude: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    """The transcript holds the conversation's answers; claude's side requests (no tools
    offered) are not in it."""
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = claude_env(tmp_path / "homes", model_api, cwd)
    _pty_prompt(node, claude, "ROOST_CLAUDE_BIN", env, cwd, model_api)
    _settles_on(node, "p", expected(model_api, conversation_only=True))
    node.run("stop", "p")
