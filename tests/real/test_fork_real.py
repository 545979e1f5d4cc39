"""``roost fork`` of each real vendor CLI, offline, against the loopback model stand-in.

For each CLI, in pty mode: a conversation with one turn, stopped; its fork verified (a
``session.resume`` verdict ``resumed`` naming the source), stopped before its first message and
resumed (verified again); a prompt ``RECALL`` in the fork, which
the stand-in answers with the previous user prompt, sends the source's earlier turn; the fork
has a provider session id of its own; the source's conversation file is byte-identical after
the fork's turns; the source, resumed, does not send the fork's turn. Then in stream mode: a
fork's first turn (the CLI's headless fork) sends the earlier turn, under an id of its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Node, wait_for
from tests.fakes.model_api import ModelApi
from tests.real.harness import MODULES, Cli, claude_env, codex_env, kimi_env
from tests.real.test_roost_real import _activity, _env_args

# where each CLI keeps a conversation: (its env, the provider session id) -> the file
Locate = Callable[[dict[str, str], str], Path]


def _only(found: list[Path], what: str) -> Path:
    assert len(found) == 1, f"{what}: {found}"
    return found[0]


def claude_file(env: dict[str, str], sid: str) -> Path:
    return _only(list(Path(env["CLAUDE_CONFIG_DIR"]).rglob(f"projects/*/{sid}.jsonl")), sid)


def codex_file(env: dict[str, str], sid: str) -> Path:
    return _only(list((Path(env["CODEX_HOME"]) / "sessions").rglob(f"rollout-*-{sid}.jsonl")), sid)


def kimi_file(env: dict[str, str], sid: str) -> Path:
    sessions = Path(env["KIMI_CODE_HOME"]) / "sessions"
    return _only(list(sessions.glob(f"*/{sid}/agents/main/wire.jsonl")), sid)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _requests_with(api: ModelApi, text: str) -> list[str]:
    return [str(req.get("body")) for req in api.requests if text in str(req.get("body"))]


def _identity(node: Node, ref: str) -> str:
    found: str = wait_for(lambda: node.record(ref)["provider_session"], 60, f"{ref}'s id")
    return found


def _fork_by_content(
    node: Node, cli: Cli, binvar: str, env: dict[str, str], cwd: Path, api: ModelApi, at: Locate
) -> None:
    node.up()
    args = _env_args({**env, binvar: cli.argv[-1]})
    node.run("spawn", cli.name, "--name", "src", "--cwd", str(cwd), *args)
    _activity(node, "src", "ready")
    node.run("prompt", "src", "hello")
    node.wait_screen("src", "Hello from the mock.", timeout=60)
    source = _identity(node, "src")
    node.run("stop", "src")
    source_file = at(env, source)
    kept = _digest(source_file)

    doc = node.run("fork", "src", "--name", "f")
    assert doc["source"]["provider_session"] == source
    fork_id = doc["record"]["id"]
    _activity(node, "f", "ready")

    def verdicts() -> list[dict[str, Any]]:
        return [
            e["data"]
            for e in node.events()
            if e["kind"] == "session.resume" and e["record"] == fork_id
        ]

    # ready can come before the verdict (codex names the fork's id a moment later)
    wait_for(verdicts, 60, "the fork's verdict")
    # stopped before its first message and resumed, it is still the copy (claude writes a
    # fork's file only at its first message: its resume forks again under the same id)
    node.run("stop", "f")
    node.run("resume", "f")
    _activity(node, "f", "ready")
    wait_for(lambda: len(verdicts()) > 1, 60, "the resumed fork's verdict")
    node.run("prompt", "f", "RECALL")
    # the fork resent the source's turn: the stand-in answers RECALL with the prompt before it
    wait_for(lambda: _requests_with(api, "RECALL"), 60, "the fork's RECALL request")
    assert "hello" in _requests_with(api, "RECALL")[-1]
    wait_for(
        lambda: "hello" in node.screen("f").split("RECALL", 1)[-1], 60, "the earlier turn recalled"
    )
    seen = verdicts()
    assert [(v["outcome"], v["fork"]) for v in seen] == [("resumed", source)] * 2, seen
    node.run("prompt", "f", "FORKONLY")
    wait_for(lambda: _requests_with(api, "FORKONLY"), 60, "the fork's own turn")
    node.wait_screen("f", "Hello from the mock.", timeout=60)
    forked = _identity(node, "f")
    assert forked != source
    assert at(env, forked) != source_file
    node.run("stop", "f")
    assert _digest(source_file) == kept, "the fork wrote the source's conversation"

    # the source goes on without the fork's turn
    node.run("resume", "src")
    _activity(node, "src", "ready")
    before = len(_requests_with(api, "RECALL"))
    node.run("prompt", "src", "RECALL")
    wait_for(lambda: len(_requests_with(api, "RECALL")) > before, 60, "the source's RECALL")
    last = _requests_with(api, "RECALL")[-1]
    assert "hello" in last and "FORKONLY" not in last
    assert node.record("src")["provider_session"] == source
    node.run("stop", "src")

    # stream mode: the fork's first turn is the CLI's headless fork
    node.run("spawn", cli.name, "--name", "s", "--mode", "stream", "--cwd", str(cwd), *args)
    first = node.run("turn", "s", "STREAMHELLO", "--wait", "--wait-timeout", "120")
    assert first["turn"]["state"] == "completed", first
    stream_source = _identity(node, "s")
    stream_file = at(env, stream_source)
    kept = _digest(stream_file)
    node.run("fork", "s", "--name", "t")
    again = node.run("turn", "t", "RECALL", "--wait", "--wait-timeout", "120")
    assert again["turn"]["state"] == "completed", again
    output = [e["data"] for e in again["events"] if e["kind"] == "session.output"]
    assert any("STREAMHELLO" in str(d.get("text")) for d in output), again["events"]
    stream_fork = _identity(node, "t")
    assert stream_fork != stream_source
    assert _digest(stream_file) == kept


def test_claude_fork(node: Node, claude: Cli, model_api: ModelApi, tmp_path: Path) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = claude_env(tmp_path / "homes", model_api, cwd)
    _fork_by_content(node, claude, "ROOST_CLAUDE_BIN", env, cwd, model_api, claude_file)


def test_codex_fork(node: Node, codex: Cli, model_api: ModelApi, tmp_path: Path) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = codex_env(tmp_path / "homes", model_api, cwd)
    _fork_by_content(node, codex, "ROOST_CODEX_BIN", env, cwd, model_api, codex_file)


def test_kimi_fork(node: Node, kimi: Cli, model_api: ModelApi, tmp_path: Path) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = kimi_env(tmp_path / "homes", model_api, cwd)
    shim = Cli("kimi", [str(MODULES / ".bin" / "kimi")])  # its ``env node`` finds Node 22 on PATH
    _fork_by_content(node, shim, "ROOST_KIMI_BIN", env, cwd, model_api, kimi_file)
