"""The real vendor CLIs driven through roost, offline, against the loopback model stand-in.

For each CLI: spawn in pty mode, the screen classified ready, a prompt answered on screen, the
provider session id captured, stop, node restart, cold resume by id, a second prompt answered in the
same conversation (the stand-in sees the earlier turn in its request); then the same in stream
mode with a tool call; and an unauthenticated start classified attention(login) with nothing typed.
Screens that need a human: claude's permission prompt while the adapter host is stopped
(SIGSTOP) long enough for its classification to fail; claude's start-up question in manual mode;
claude without credentials and kimi without a model, attention at once with nothing typed.
"""

from __future__ import annotations

import contextlib
import functools
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roost.actors.supervisor import classifying
from tests.e2e.conftest import Node, log_has, stopped, wait_for
from tests.fakes.model_api import LONG_END, ModelApi
from tests.real.harness import MODULES, Cli, base_env, claude_env, codex_env, kimi_env


def _env_args(env: dict[str, str]) -> list[str]:
    return [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]


def _activity(node: Node, ref: str, want: str, timeout: float = 60) -> dict[str, Any]:
    return wait_for(
        lambda: r if (r := node.record(ref))["activity"] == want else None,
        timeout,
        f"{ref} classified {want}",
    )


def _saw_in_request(api: ModelApi, text: str) -> bool:
    return any(text in str(req.get("body")) for req in api.requests)


def _spawn_pty_resume_and_stream(
    node: Node, cli: Cli, binvar: str, env: dict[str, str], cwd: Path, api: ModelApi
) -> None:
    node.up()
    args = _env_args({**env, binvar: cli.argv[-1]})
    rec = node.run("spawn", cli.name, "--name", "real", "--cwd", str(cwd), *args)["record"]
    _activity(node, "real", "ready")
    node.run("prompt", "real", "hello")
    node.wait_screen("real", "Hello from the mock.", timeout=60)
    identity = wait_for(lambda: node.record("real")["provider_session"], 60, "the session id")
    assert rec["provider_session"] in (None, identity)
    node.run("stop", "real")
    node.run("node", "stop")
    node.up()
    resumed = node.run("resume", "real")["record"]
    assert resumed["generation"] == 2 and resumed["provider_session"] == identity
    _activity(node, "real", "ready")
    node.run("prompt", "real", "RECALL")
    wait_for(lambda: _saw_in_request(api, "RECALL"), 60, "the RECALL request")
    # the stand-in answers RECALL with the previous user prompt: only a resumed conversation
    # sends it, so "hello" after RECALL proves the same conversation went on
    wait_for(
        lambda: "hello" in node.screen("real").split("RECALL", 1)[-1],
        60,
        "the earlier turn recalled",
    )
    resume_verdicts = [e for e in node.events() if e["kind"] == "session.resume"]
    assert resume_verdicts and resume_verdicts[-1]["data"]["outcome"] == "resumed"
    node.run("stop", "real")

    node.run("spawn", cli.name, "--name", "stream", "--mode", "stream", "--cwd", str(cwd), *args)
    first = node.run("turn", "stream", "TOOLTEST", "--wait", "--wait-timeout", "120")
    kinds = [e["kind"] for e in first["events"]]
    assert first["turn"]["state"] == "completed", first
    assert "session.tool_call" in kinds and "session.tool_result" in kinds
    assert any("Tool said hi." in str(e["data"]) for e in first["events"])
    again = node.run("turn", "stream", "RECALL", "--wait", "--wait-timeout", "120")
    assert again["turn"]["state"] == "completed"
    assert any(
        "TOOLTEST" in str(e["data"].get("text"))
        for e in again["events"]
        if e["kind"] == "session.output"
    )


def _needs_a_human_at_start(
    node: Node, cli: Cli, binvar: str, env: dict[str, str], cwd: Path, reason: str = "login"
) -> None:
    """The screen needs a human from the start: attention with ``reason``, nothing typed."""
    node.up()
    args = _env_args({**env, binvar: cli.argv[-1]})
    node.run("spawn", cli.name, "--name", "fresh", "--cwd", str(cwd), *args)
    seen = wait_for(
        lambda: r if (r := node.record("fresh"))["state"] == "attention" else None, 60, "attention"
    )
    assert seen["attention"] == reason, seen
    assert not [e for e in node.events() if e["kind"] == "session.input"]


def test_claude_through_roost(node: Node, claude: Cli, model_api: ModelApi, tmp_path: Path) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = claude_env(tmp_path / "homes", model_api, cwd)
    _spawn_pty_resume_and_stream(node, claude, "ROOST_CLAUDE_BIN", env, cwd, model_api)


def test_claude_unauthenticated_start_needs_a_human(
    node: Node, claude: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = claude_env(tmp_path / "homes", model_api, cwd, onboarded=False)
    # a first start that reaches the API walks through onboarding to the login
    _needs_a_human_at_start(node, claude, "ROOST_CLAUDE_BIN", env, cwd)


def test_claude_logged_out_idle_screen_is_login(
    node: Node, claude: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    """Onboarded, no credentials: only the idle footer says "Not logged in"."""
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = claude_env(tmp_path / "homes", model_api, cwd, token=False)
    _needs_a_human_at_start(node, claude, "ROOST_CLAUDE_BIN", env, cwd)
    assert "Not logged in" in node.screen("fresh")


def test_claude_start_up_question_needs_a_human(
    node: Node, claude: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    """Settings that choose manual mode make claude ask about auto mode first."""
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = claude_env(tmp_path / "homes", model_api, cwd, manual=True, asks_auto_mode=True)
    _needs_a_human_at_start(node, claude, "ROOST_CLAUDE_BIN", env, cwd, reason="question")
    assert "Make auto mode your default permission mode?" in node.screen("fresh")


def test_claude_permission_prompt_is_reported_after_a_failed_classification(
    node: Node, claude: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    """The prompt appears while the adapter host is stopped; the classification call
    in flight fails (its deadline passes unanswered); the prompt is still reported."""
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = claude_env(tmp_path / "homes", model_api, cwd, manual=True)
    adapters = node.up()["actors"]["adapters"]["pid"]
    args = _env_args({**env, "ROOST_CLAUDE_BIN": claude.argv[-1]})
    rid = node.run("spawn", "claude", "--name", "perm", "--cwd", str(cwd), *args)["record"]["id"]
    _activity(node, "perm", "ready")
    with stopped(adapters):
        node.run("prompt", "perm", "please PERMTEST")
        node.wait_screen("perm", "Do you want to proceed?", timeout=60)
        # The broker drops a stopped actor on ipc only after 30 s (ZMTP heartbeats), so the
        # supervisor's call in flight passes its deadline unanswered.
        log = node.state_dir / "sessions" / rid / "supervisor.log"
        wait_for(lambda: log_has(log, "classify-failed"), 45, "the classification call to fail")
    seen = wait_for(
        lambda: r if (r := node.record("perm"))["state"] == "attention" else None, 60, "attention"
    )
    assert seen["attention"] == "permission", seen
    assert not (cwd / "made_by_mock.txt").exists()  # nobody answered it
    node.run("stop", "perm")


def test_codex_through_roost(node: Node, codex: Cli, model_api: ModelApi, tmp_path: Path) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = codex_env(tmp_path / "homes", model_api, cwd)
    _spawn_pty_resume_and_stream(node, codex, "ROOST_CODEX_BIN", env, cwd, model_api)


def test_codex_unauthenticated_start_needs_a_human(
    node: Node, codex: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    home = tmp_path / "homes" / "codex"
    home.mkdir(parents=True)  # no config, no credentials: codex asks how to sign in
    env = {**base_env(tmp_path / "homes" / "home"), "CODEX_HOME": str(home)}
    _needs_a_human_at_start(node, codex, "ROOST_CODEX_BIN", env, cwd)


def _kimi_bin(kimi: Cli) -> Cli:
    """Roost runs one program: the npm shim, whose ``env node`` finds Node 22 first on PATH."""
    return Cli("kimi", [str(MODULES / ".bin" / "kimi")])


def test_kimi_through_roost(node: Node, kimi: Cli, model_api: ModelApi, tmp_path: Path) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = kimi_env(tmp_path / "homes", model_api, cwd)
    _spawn_pty_resume_and_stream(node, _kimi_bin(kimi), "ROOST_KIMI_BIN", env, cwd, model_api)


def test_kimi_without_a_model_is_login(
    node: Node, kimi: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    """No model configured: "Model: not set", and the status line starts with the
    cwd (shortened to "…/..." for a deep one), not a model name."""
    cwd = tmp_path / "runs" / "kimi-noauth" / "proj"
    cwd.mkdir(parents=True)
    env = kimi_env(tmp_path / "homes", model_api, cwd, model=False)
    _needs_a_human_at_start(node, _kimi_bin(kimi), "ROOST_KIMI_BIN", env, cwd)
    assert "Model:     not set" in node.screen("fresh")


# -- a lost conversation, kimi's submit, codex streaming -----------------------------------------


def _answered(node: Node, n: int) -> bool:
    """The mock's answer is on the kimi session's screen ``n`` times."""
    return node.screen("k").count("Hello from the mock.") >= n


@contextlib.contextmanager
def cpu_load(burners: int = 3) -> Iterator[None]:
    """Busy loops on every core (and one more) for the block: the load the testers saw."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(burners)
    ]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


@pytest.mark.timeout(400)
def test_kimi_prompts_submit_under_load(
    node: Node, kimi: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    """`roost prompt` alone submits to kimi in pty mode (no `roost key enter`), with
    the machine's cores busy."""
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = kimi_env(tmp_path / "homes", model_api, cwd)
    node.up()
    args = _env_args({**env, "ROOST_KIMI_BIN": _kimi_bin(kimi).argv[-1]})
    node.run("spawn", "kimi", "--name", "k", "--cwd", str(cwd), *args)
    _activity(node, "k", "ready", timeout=90)
    with cpu_load():
        for n in range(1, 4):
            node.run("prompt", "k", f"hello number {n}")
            wait_for(
                functools.partial(_answered, node, n),
                60,
                f"answer {n}",
            )
    sent = [e for e in node.events() if e["kind"] == "session.input"]
    assert [e["data"]["input"] for e in sent] == ["prompt"] * 3  # no key of ours in between
    asked = [str(b) for b in model_api.bodies("/chat/completions")]
    assert all(any(f"hello number {n}" in b for b in asked) for n in range(1, 4))


@pytest.mark.timeout(400)
def test_codex_streaming_a_long_answer_is_busy(node: Node, codex: Cli, tmp_path: Path) -> None:
    """While codex prints a long answer (its "Working" line erased), roost says busy,
    and ready once it is done."""
    cwd = tmp_path / "proj"
    cwd.mkdir()
    with ModelApi(log_path=tmp_path / "api.jsonl", slow_seconds=30.0).start() as api:
        env = codex_env(tmp_path / "homes", api, cwd)
        node.up()
        args = _env_args({**env, "ROOST_CODEX_BIN": codex.argv[-1]})
        node.run("spawn", "codex", "--name", "c", "--cwd", str(cwd), *args)
        _activity(node, "c", "ready")
        node.run("prompt", "c", "Please give a LONG answer")
        node.wait_screen("c", "Sentence 1 of the long answer", timeout=60)
        # while output flows, a verdict comes about once a FLOWING_S (plus its call): from then
        # on, to the end of the answer, every sample must say busy
        settled = time.monotonic() + classifying.FLOWING_S + classifying.CALL_TIMEOUT_S
        samples: list[tuple[bool, str]] = []
        while True:
            shown = node.run("show", "c", "--screen")
            if LONG_END in str(shown.get("screen")):
                break
            samples.append((time.monotonic() >= settled, str(shown["record"]["activity"])))
        later = [activity for after, activity in samples if after]
        assert len(later) >= 5 and set(later) == {"busy"}, samples
        _activity(node, "c", "ready")


@pytest.mark.timeout(400)
def test_codex_resume_of_a_lost_conversation_fails_and_loses_no_prompt(
    node: Node, codex: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    """The rollout file deleted, codex draws "Resuming session…" above a composer and
    then gives up; roost reports resume_failed, and a prompt sent meanwhile is never accepted."""
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = codex_env(tmp_path / "homes", model_api, cwd)
    node.up()
    args = _env_args({**env, "ROOST_CODEX_BIN": codex.argv[-1]})
    rid = node.run("spawn", "codex", "--name", "c", "--cwd", str(cwd), *args)["record"]["id"]
    _activity(node, "c", "ready")
    node.run("prompt", "c", "hello")
    node.wait_screen("c", "Hello from the mock.", timeout=60)
    sid = wait_for(lambda: node.record("c")["provider_session"], 60, "the thread id")
    node.run("stop", "c")
    [rollout] = (tmp_path / "homes" / "codex" / "sessions").glob(f"*/*/*/rollout-*-{sid}.jsonl")
    rollout.unlink()
    node.run("resume", "c")
    refused = node.run("prompt", "c", "PING two", check=False)
    assert refused.get("error", {}).get("code") in ("resume-pending", "session-not-live"), refused
    gone = node.wait_state("c", "dormant", timeout=60)
    assert gone["provider_session"] == sid and gone["last_exit"]["code"] == 1
    later = [e for e in node.run("events", "--id", rid)["events"] if e["generation"] == 2]
    assert not [e for e in later if e["kind"] == "session.input"]
    verdicts = [e["data"] for e in later if e["kind"] == "session.resume"]
    assert [(v["outcome"], v["reason"]) for v in verdicts] == [("resume_failed", "not-found")]
    assert not [r for r in model_api.requests if "PING two" in str(r.get("body"))]
