"""The real claude / codex / kimi CLIs, headless, against the loopback model stand-in.

Each test starts a first turn ("hello"), reads the CLI's session id from its JSON output,
resumes that session with "RECALL" and checks that the answer is "hello": the stand-in echoes
the previous user prompt it finds in the request, so this proves the CLI resent the earlier
turn. A second test per CLI does one shell tool round trip (TOOLTEST -> ``echo hi`` -> result).
Skipped when the CLIs are not installed (``make test-real`` installs them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_api import (
    HELLO,
    TOOL_DONE,
    ModelApi,
    Turn,
    anthropic_turns,
    chat_turns,
    responses_turns,
)
from tests.real.harness import (
    Cli,
    Run,
    claude_env,
    codex_env,
    kimi_env,
    new_session_id,
    run_cli,
)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    return cwd


def events_of(run: Run, key: str, value: str) -> list[dict[str, Any]]:
    return [e for e in run.events if e.get(key) == value]


def user_prompts(turns: list[Turn]) -> list[str]:
    return [t.prompt for t in turns if t.role == "user" and t.prompt]


def assistant_texts(turns: list[Turn]) -> list[str]:
    return [t.all_text for t in turns if t.role == "assistant" and t.texts]


# -- claude --------------------------------------------------------------------------------------

CLAUDE_HEADLESS = ["-p", "--output-format", "stream-json", "--verbose"]


def claude_result(run: Run) -> dict[str, Any]:
    assert run.rc == 0, run.describe()
    results = events_of(run, "type", "result")
    assert len(results) == 1, run.describe()
    # subtype is "success" even on API errors: is_error is the field to check.
    assert results[0]["is_error"] is False, run.describe()
    return results[0]


def test_claude_headless_session_and_resume(
    claude: Cli, model_api: ModelApi, project: Path, tmp_path: Path
) -> None:
    env = claude_env(tmp_path, model_api, project)
    sid = new_session_id()

    first = run_cli(claude, [*CLAUDE_HEADLESS, "--session-id", sid, "--", "hello"], env, project)
    assert claude_result(first)["result"] == HELLO
    assert {e.get("session_id") for e in first.events} == {sid}, first.describe()
    assert events_of(first, "subtype", "init")[0]["cwd"] == str(project)

    second = run_cli(claude, [*CLAUDE_HEADLESS, "-r", sid, "--", "RECALL"], env, project)
    assert claude_result(second)["result"] == "hello", second.describe()
    assert {e.get("session_id") for e in second.events} == {sid}, second.describe()

    # The stand-in saw the earlier turn: claude resends the whole history on resume
    # (POST /v1/messages?beta=true, stream=true; system reminders ride in the user turns).
    last = model_api.bodies("/v1/messages")[-1]
    turns = anthropic_turns(last)
    assert user_prompts(turns) == ["hello", "RECALL"]
    assert HELLO in assistant_texts(turns)
    headers = model_api.requests[-1]["headers"]
    assert headers["authorization"] == "Bearer mock-token"
    assert headers["x-claude-code-session-id"] == sid


def test_claude_tool_round_trip(
    claude: Cli, model_api: ModelApi, project: Path, tmp_path: Path
) -> None:
    env = claude_env(tmp_path, model_api, project)
    run = run_cli(
        claude,
        [*CLAUDE_HEADLESS, "--allowedTools", "Bash(echo *)", "--", "TOOLTEST"],
        env,
        project,
    )
    assert claude_result(run)["result"] == TOOL_DONE
    uses = [
        block
        for e in events_of(run, "type", "assistant")
        for block in e["message"]["content"]
        if block.get("type") == "tool_use"
    ]
    assert [(u["name"], u["input"]) for u in uses] == [("Bash", {"command": "echo hi"})]
    results = [
        block
        for e in events_of(run, "type", "user")
        for block in e["message"]["content"]
        if block.get("type") == "tool_result"
    ]
    assert results and results[0]["content"] == "hi" and results[0]["is_error"] is False


# -- codex ---------------------------------------------------------------------------------------

# `codex exec` refuses a cwd outside a git repository without --skip-git-repo-check.
CODEX_EXEC = ["--json", "--skip-git-repo-check"]


def codex_answer(run: Run) -> tuple[str, str]:
    """(thread_id, last agent_message text) of a successful ``codex exec --json`` run."""
    assert run.rc == 0, run.describe()
    started = events_of(run, "type", "thread.started")
    assert len(started) == 1, run.describe()
    assert events_of(run, "type", "turn.completed"), run.describe()
    assert not events_of(run, "type", "turn.failed"), run.describe()
    messages = [
        e["item"]["text"]
        for e in events_of(run, "type", "item.completed")
        if e["item"].get("type") == "agent_message"
    ]
    assert messages, run.describe()
    return str(started[0]["thread_id"]), messages[-1]


def test_codex_exec_session_and_resume(
    codex: Cli, model_api: ModelApi, project: Path, tmp_path: Path
) -> None:
    env = codex_env(tmp_path, model_api, project)

    first = run_cli(codex, ["exec", *CODEX_EXEC, "--", "hello"], env, project)
    thread_id, text = codex_answer(first)
    assert text == HELLO

    second = run_cli(
        codex, ["exec", "resume", thread_id, *CODEX_EXEC, "--", "RECALL"], env, project
    )
    resumed_id, text = codex_answer(second)
    assert resumed_id == thread_id
    assert text == "hello", second.describe()

    # Only POST /v1/responses (stream=true) with the custom provider; no WebSocket attempts.
    assert {(r["method"], r["path"]) for r in model_api.requests} == {("POST", "/v1/responses")}
    last = model_api.bodies("/v1/responses")[-1]
    turns = responses_turns(last)
    assert user_prompts(turns) == ["hello", "RECALL"]
    assert HELLO in assistant_texts(turns)
    headers = model_api.requests[-1]["headers"]
    assert headers["authorization"] == "Bearer sk-mock"
    assert headers["session-id"] == thread_id


def test_codex_tool_round_trip(
    codex: Cli, model_api: ModelApi, project: Path, tmp_path: Path
) -> None:
    env = codex_env(tmp_path, model_api, project)
    run = run_cli(codex, ["exec", *CODEX_EXEC, "--", "TOOLTEST"], env, project)
    _, text = codex_answer(run)
    assert text == TOOL_DONE
    commands = [
        e["item"]
        for e in events_of(run, "type", "item.completed")
        if e["item"].get("type") == "command_execution"
    ]
    assert len(commands) == 1, run.describe()
    assert "echo hi" in commands[0]["command"]
    assert commands[0]["aggregated_output"] == "hi\n" and commands[0]["exit_code"] == 0
    # codex 0.171.0 offers exec_command ({"cmd"}); the stand-in picked it from the tools list.
    second = model_api.bodies("/v1/responses")[-1]
    call = next(i for i in second["input"] if i.get("type") == "function_call")
    assert call["name"] == "exec_command"
    output = next(i for i in second["input"] if i.get("type") == "function_call_output")
    assert output["call_id"] == call["call_id"] and output["output"].endswith("hi\n")


# -- kimi ----------------------------------------------------------------------------------------

KIMI_HEADLESS = ["--output-format", "stream-json"]


def kimi_answer(run: Run) -> tuple[str, str]:
    """(session id, last assistant text) of a successful ``kimi -p ... stream-json`` run."""
    assert run.rc == 0, run.describe()
    hints = events_of(run, "type", "session.resume_hint")  # the id is only in the last line
    assert len(hints) == 1 and run.events[-1] is hints[0], run.describe()
    texts = [
        e["content"]
        for e in events_of(run, "role", "assistant")
        if isinstance(e.get("content"), str)
    ]
    assert texts, run.describe()
    return str(hints[0]["session_id"]), texts[-1]


def test_kimi_prompt_session_and_resume(
    kimi: Cli, model_api: ModelApi, project: Path, tmp_path: Path
) -> None:
    env = kimi_env(tmp_path, model_api, project)

    first = run_cli(kimi, ["-p", "hello", *KIMI_HEADLESS], env, project)
    session_id, text = kimi_answer(first)
    assert session_id.startswith("session_")
    assert text == HELLO

    # Resume must run in the session's original cwd.
    second = run_cli(kimi, ["-p", "RECALL", "-S", session_id, *KIMI_HEADLESS], env, project)
    resumed_id, text = kimi_answer(second)
    assert resumed_id == session_id
    assert text == "hello", second.describe()

    # POST /v1/chat/completions (stream=true, stream_options.include_usage); kimi appends its
    # <system-reminder> notes as separate user messages after the prompt.
    last = model_api.bodies("/v1/chat/completions")[-1]
    turns = chat_turns(last)
    assert user_prompts(turns) == ["hello", "RECALL"]
    assert HELLO in assistant_texts(turns)
    assert model_api.requests[-1]["headers"]["authorization"] == "Bearer sk-mock"


def test_kimi_tool_round_trip(
    kimi: Cli, model_api: ModelApi, project: Path, tmp_path: Path
) -> None:
    env = kimi_env(tmp_path, model_api, project)
    run = run_cli(kimi, ["-p", "TOOLTEST", *KIMI_HEADLESS], env, project)
    _, text = kimi_answer(run)
    assert text == TOOL_DONE
    calls = [c for e in events_of(run, "role", "assistant") for c in e.get("tool_calls") or []]
    assert [c["function"]["name"] for c in calls] == ["Bash"]
    tool_lines = events_of(run, "role", "tool")
    assert len(tool_lines) == 1 and tool_lines[0]["tool_call_id"] == calls[0]["id"]
    assert tool_lines[0]["content"].strip() == "hi"
