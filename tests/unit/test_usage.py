"""Usage figures: one shape for every provider, each CLI's own output and files read on real
captures (tests/fixtures/usage/README.md), running totals turned into what is new, and WHEN."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from roost.adapters import stream_json
from roost.adapters.base import LaunchContext
from roost.adapters.claude import ClaudeAdapter
from roost.adapters.codex import CodexAdapter
from roost.adapters.kimi import KimiAdapter
from roost.adapters.usage_files import claude_totals, codex_totals, kimi_totals
from roost.wire import usage as u
from roost.wire.errors import RoostError

CAPTURES = Path(__file__).parent.parent / "fixtures" / "usage"


def reported(name: str) -> list[dict[str, Any]]:
    """What the stand-in reported for each request of a capture's run."""
    return [r["usage"] for r in json.loads((CAPTURES / f"{name}.reported.json").read_text())]


def anthropic_sum(name: str) -> u.Usage:
    total = u.zero()
    for r in reported(name):
        got = u.from_anthropic(r)
        assert got is not None
        total = u.add(total, got)
    return total


def turn_facts(parse: Any, name: str) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for line in (CAPTURES / name).read_text().splitlines():
        facts.update(parse(line, "stdout")[1])
    return facts


def test_claude_stream_result_sums_the_turns_requests_and_its_cost() -> None:
    facts = turn_facts(ClaudeAdapter().parse, "claude-stream.jsonl")
    expected = anthropic_sum("claude-stream")
    assert expected == {"input": 2565 + 2633, "output": 20, "cache_read": 14, "cache_write": 10}
    assert {k: v for k, v in facts["usage"].items() if k != "cost_usd"} == expected
    assert facts["usage"]["cost_usd"] == pytest.approx(0.0212448)


def test_codex_exec_turn_completed_counts_the_cached_tokens_apart() -> None:
    facts = turn_facts(CodexAdapter().parse, "codex-exec.jsonl")
    sent = reported("codex-stream")
    prompt = sum(r["input_tokens"] for r in sent)  # OpenAI's input counts the cached in
    cached = sum(r["input_tokens_details"]["cached_tokens"] for r in sent)
    assert facts["usage"] == {
        "input": prompt - cached,
        "output": sum(r["output_tokens"] for r in sent),
        "cache_read": cached,
        "cache_write": 0,
    }
    assert "cost_usd" not in facts["usage"]  # codex reports no cost


def test_kimis_headless_output_reports_no_usage() -> None:
    assert "usage" not in turn_facts(KimiAdapter().parse, "kimi-stream.jsonl")


def test_the_echo_agents_synthetic_usage_parses_like_claudes() -> None:
    line = json.dumps(
        {
            "type": "result",
            "is_error": False,
            "result": "echo: hi",
            "usage": {"input_tokens": 2, "output_tokens": 8},
            "total_cost_usd": 1e-05,
        }
    )
    assert stream_json.parse_line(line)[1]["usage"] == {
        "input": 2,
        "output": 8,
        "cache_read": 0,
        "cache_write": 0,
        "cost_usd": 1e-05,
    }


def test_codex_rollout_totals_are_its_last_token_count() -> None:
    sent = reported("codex-stream")
    cached = sum(r["input_tokens_details"]["cached_tokens"] for r in sent)
    assert codex_totals(CAPTURES / "codex-rollout.jsonl") == {
        "input": sum(r["input_tokens"] for r in sent) - cached,
        "output": 20,
        "cache_read": cached,
        "cache_write": 0,
    }
    assert codex_totals(CAPTURES / "missing.jsonl") is None


def test_kimi_wire_totals_sum_every_usage_record(tmp_path: Path) -> None:
    session = tmp_path / "session_x"
    (session / "agents" / "main").mkdir(parents=True)
    shutil.copy(CAPTURES / "kimi-wire.jsonl", session / "agents" / "main" / "wire.jsonl")
    sent = reported("kimi-stream")
    cached = sum(r["prompt_tokens_details"]["cached_tokens"] for r in sent)
    assert kimi_totals(session) == {
        "input": sum(r["prompt_tokens"] for r in sent) - cached,
        "output": sum(r["completion_tokens"] for r in sent),
        "cache_read": cached,
        "cache_write": 0,
    }
    assert kimi_totals(tmp_path / "none") is None


def test_claude_transcript_totals_count_each_answer_once() -> None:
    """The pty run's requests were the conversation's three answers plus claude's own side
    requests (70 input tokens each: not in the transcript)."""
    sent = [r for r in reported("claude-pty") if r["input_tokens"] != 70]
    total = u.zero()
    for r in sent:
        got = u.from_anthropic(r)
        assert got is not None
        total = u.add(total, got)
    assert claude_totals(CAPTURES / "claude-transcript.jsonl") == total


def test_claude_statusline_gives_the_cost_so_far_but_the_contexts_tokens() -> None:
    """What the statusline sends: ``cost.total_cost_usd`` grows over the session;
    ``context_window.total_input_tokens`` is the last request's context, not a running total
    (so roost takes the tokens from the transcript)."""
    lines = (CAPTURES / "claude-statusline.jsonl").read_text().splitlines()
    docs = [json.loads(x) for x in lines if x.strip()]
    costs = [d["cost"]["total_cost_usd"] for d in docs]
    assert costs == sorted(costs) and costs[-1] > 0
    last = docs[-1]["context_window"]
    current = last["current_usage"]
    assert last["total_input_tokens"] == sum(
        current[k]
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )


def test_adapters_find_their_files_by_provider_session(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    ident = "01a23d26-aa13-74c2-bf66-2c5dcfe124a9"
    codex_day = tmp_path / "codex" / "sessions" / "2026" / "12" / "03"
    codex_day.mkdir(parents=True)
    shutil.copy(
        CAPTURES / "codex-rollout.jsonl", codex_day / f"rollout-2026-12-03T18-24-33-{ident}.jsonl"
    )
    pty = LaunchContext(
        cwd=str(tmp_path),
        mode="pty",
        env={**env, "CODEX_HOME": str(tmp_path / "codex")},
        data_dir=str(tmp_path),
    )
    found = CodexAdapter().usage(ident, pty)
    assert found is not None and found[0] == "files" and found[1]["output"] == 20
    stream = LaunchContext(cwd=pty.cwd, mode="stream", env=pty.env, data_dir=pty.data_dir)
    assert CodexAdapter().usage(ident, stream) is None  # exec's turn.completed has them

    kimi_id = "session_ab9ccd21-9cff-4857-82cd-a6d88833f393"
    main = tmp_path / "kimi" / "sessions" / "wd_proj_4972a2895295" / kimi_id / "agents" / "main"
    main.mkdir(parents=True)
    shutil.copy(CAPTURES / "kimi-wire.jsonl", main / "wire.jsonl")
    ctx = LaunchContext(
        cwd=str(tmp_path),
        mode="stream",
        env={"KIMI_CODE_HOME": str(tmp_path / "kimi")},
        data_dir=str(tmp_path),
    )
    found = KimiAdapter().usage(kimi_id, ctx)
    assert found is not None and found[0] == "files" and found[1]["output"] == 20
    assert KimiAdapter().usage("*", ctx) is None  # an id, never a pattern

    claude_id = "53d8e096-9841-4f84-9646-ae1be5df0ae1"
    project = tmp_path / "claude" / "projects" / "-tmp-proj"
    project.mkdir(parents=True)
    shutil.copy(CAPTURES / "claude-transcript.jsonl", project / f"{claude_id}.jsonl")
    ctx = LaunchContext(
        cwd=str(tmp_path),
        mode="pty",
        env={"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")},
        data_dir=str(tmp_path),
    )
    found = ClaudeAdapter().usage(claude_id, ctx)
    assert found is not None and found[0] == "files" and found[1]["output"] == 30


def test_running_totals_give_what_is_new() -> None:
    before = u.make(100, 10, 7, 5, 0.5)
    now = u.make(150, 30, 14, 5, 0.75)
    assert u.since(now, before) == u.make(50, 20, 7, 0, 0.25)
    assert u.since(now, None) == now
    assert u.since(before, now) == before  # a count that went down started again
    assert u.empty(u.since(now, now))


def test_make_and_check_refuse_nonsense() -> None:
    assert u.make(-5, "x", None, True, "free") == u.zero()
    assert u.check(None) is None
    assert u.check({"input": 3, "cost_usd": 0.25}) == {**u.make(3), "cost_usd": 0.25}


@pytest.mark.parametrize(
    ("when", "back"),
    [("90s", 90), ("30m", 1800), ("12h", 43200), ("7d", 7 * 86400), ("2w", 14 * 86400)],
)
def test_since_takes_a_span(when: str, back: int) -> None:
    assert u.parse_since(when, 1_000_000.0) == 1_000_000.0 - back


def test_since_takes_an_iso_date_in_utc_unless_it_says() -> None:
    assert u.parse_since("2026-12-01", 0) == 1796083200.0
    assert u.parse_since("2026-12-01T01:00+01:00", 0) == 1796083200.0


@pytest.mark.parametrize("when", ["yesterday", "7", "7y", "-3d", "2026-13-01", ""])
def test_since_refuses_anything_else_clearly(when: str) -> None:
    with pytest.raises(RoostError) as info:
        u.parse_since(when, 0)
    assert info.value.code == "bad-request" and info.value.detail == {"field": "since"}
    assert "7d" in info.value.message and "ISO date" in info.value.message
