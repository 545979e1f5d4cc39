"""Opt-in live canary: the real CLIs through roost against the real vendor services.

Runs only with ``ROOST_LIVE_CANARY=1`` and real logins (the CLIs' own homes, as the operator uses
them); otherwise it is skipped with the reason. The challenge's answer does not appear in the
prompt, so only a real model answering in the same conversation passes:

    ROOST_LIVE_CANARY=1 .venv/bin/pytest -q tests/real/test_live_canary.py
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import Node, wait_for
from tests.real.harness import MODULES

CHALLENGE = "What is 17 multiplied by 23? Reply with the number only."
ANSWER = "391"
FOLLOW_UP = "Repeat the number you answered last time, with 1000 added. Number only."
FOLLOW_UP_ANSWER = "1391"
BINVARS = {"claude": "ROOST_CLAUDE_BIN", "codex": "ROOST_CODEX_BIN", "kimi": "ROOST_KIMI_BIN"}

pytestmark = pytest.mark.skipif(
    os.environ.get("ROOST_LIVE_CANARY") != "1",
    reason="live canary: set ROOST_LIVE_CANARY=1 (needs network and real vendor logins)",
)


def _binary(provider: str) -> str:
    found = shutil.which(provider) or str(MODULES / ".bin" / provider)
    if not Path(found).exists():
        pytest.skip(f"{provider} is not installed (PATH or {MODULES})")
    return found


def _answered(node: Node, ref: str, answer: str, after: str) -> None:
    wait_for(lambda: answer in node.screen(ref).split(after, 1)[-1], 180, f"{answer} from {ref}")


@pytest.mark.parametrize("provider", ["claude", "codex", "kimi"])
def test_live_pty_resume_and_stream(node: Node, provider: str, tmp_path: Path) -> None:
    env = ["--env", f"{BINVARS[provider]}={_binary(provider)}"]
    cwd = tmp_path / "proj"
    cwd.mkdir()
    node.up()
    node.run("spawn", provider, "--name", "live", "--cwd", str(cwd), *env)
    wait_for(lambda: node.record("live")["activity"] == "ready", 120, "ready")
    node.run("prompt", "live", CHALLENGE)
    _answered(node, "live", ANSWER, after="17 multiplied")
    identity = wait_for(lambda: node.record("live")["provider_session"], 120, "session id")
    node.run("stop", "live")
    node.run("node", "stop")
    node.up()
    assert node.run("resume", "live")["record"]["provider_session"] == identity
    wait_for(lambda: node.record("live")["activity"] == "ready", 120, "ready after resume")
    node.run("prompt", "live", FOLLOW_UP)
    _answered(node, "live", FOLLOW_UP_ANSWER, after="1000 added")
    node.run("stop", "live")

    node.run("spawn", provider, "--name", "stream", "--mode", "stream", "--cwd", str(cwd), *env)
    first = node.run("turn", "stream", CHALLENGE, "--wait", "--wait-timeout", "300")
    assert first["turn"]["state"] == "completed" and ANSWER in str(first["turn"]["result"])
    second = node.run("turn", "stream", FOLLOW_UP, "--wait", "--wait-timeout", "300")
    assert FOLLOW_UP_ANSWER in str(second["turn"]["result"])
