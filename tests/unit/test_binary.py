"""Looking up a provider CLI's program, and the ``provider-missing`` error it gives when absent."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, cast

import pytest

from roost.actors.adapter_host import AdapterActor
from roost.adapters.binary import find_program, missing
from roost.adapters.claude import ClaudeAdapter
from roost.adapters.codex import CodexAdapter
from roost.adapters.echo import EchoAdapter
from roost.adapters.kimi import KimiAdapter
from roost.wire import protocol as p
from roost.wire.errors import RoostError


def _program(directory: Path, name: str, mode: int = 0o755) -> Path:
    path = directory / name
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


def test_a_name_is_looked_up_on_the_path_given(tmp_path: Path) -> None:
    found = _program(tmp_path, "claude")
    assert find_program("claude", {"PATH": str(tmp_path)}, "/") == str(found)
    assert find_program("claude", {"PATH": str(tmp_path / "none")}, "/") is None


def test_a_path_must_be_an_executable_file(tmp_path: Path) -> None:
    _program(tmp_path, "claude")
    _program(tmp_path, "plain", 0o644)
    assert find_program(str(tmp_path / "claude"), {}, "/") == str(tmp_path / "claude")
    assert find_program(str(tmp_path / "plain"), {}, "/") is None
    assert find_program(str(tmp_path), {}, "/") is None  # a directory
    assert find_program("./claude", {}, str(tmp_path)) == os.path.join(str(tmp_path), "./claude")


@pytest.mark.parametrize(
    ("adapter", "env", "install"),
    [
        (ClaudeAdapter(), "ROOST_CLAUDE_BIN", "@anthropic-ai/claude-code"),
        (CodexAdapter({}), "ROOST_CODEX_BIN", "@openai/codex"),
        (KimiAdapter(), "ROOST_KIMI_BIN", "@moonshot-ai/kimi-code"),
    ],
)
def test_each_vendor_names_its_variable_and_its_install(
    adapter: Any, env: str, install: str
) -> None:
    err = missing(adapter.provider, adapter.provider, adapter.bin_env, adapter.install)
    assert err.code == "provider-missing"
    assert env in err.message and install in err.message and "on PATH" in err.message
    assert err.detail == {
        "provider": adapter.provider,
        "program": adapter.provider,
        "env": env,
        "install": adapter.install,
    }


def _launch(actor: AdapterActor, env: dict[str, str], mode: str = "pty") -> dict[str, Any]:
    body = {"mode": mode, "cwd": "/", "env": env, "data_dir": "/d"}
    header = cast(p.Header, None)  # the handler reads nothing of it
    return asyncio.run(actor.launch(header, body))


@pytest.mark.parametrize("mode", ["pty", "stream"])
def test_the_host_refuses_a_launch_whose_program_is_missing(tmp_path: Path, mode: str) -> None:
    actor = AdapterActor(ClaudeAdapter(), cast(Any, type("P", (), {"handlers": {}})()))
    with pytest.raises(RoostError) as err:
        _launch(actor, {"PATH": str(tmp_path)}, mode)
    assert err.value.code == "provider-missing" and err.value.detail["program"] == "claude"
    fake = _program(tmp_path, "claude")
    assert _launch(actor, {"PATH": str(tmp_path)}, mode)["argv"][0] == "claude"
    pointed = {"PATH": "", "ROOST_CLAUDE_BIN": str(fake)}
    assert _launch(actor, pointed, mode)["argv"][0] == str(fake)
    with pytest.raises(RoostError) as gone:
        _launch(actor, {"ROOST_CLAUDE_BIN": str(tmp_path / "nothing")}, mode)
    assert "ROOST_CLAUDE_BIN" in gone.value.message and "on PATH" not in gone.value.message


def test_echo_is_always_there() -> None:
    actor = AdapterActor(EchoAdapter(), cast(Any, type("P", (), {"handlers": {}})()))
    assert _launch(actor, {"PATH": ""})["argv"][0]
