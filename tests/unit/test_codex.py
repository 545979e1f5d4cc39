"""The codex provider's adapter (roost.adapters.codex), on the real CLI's captured screens and
streams and on a rollout tree built in the test's tmp dir."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from roost.adapters import codex
from roost.adapters.base import (
    ATTENTION,
    ATTENTION_REASONS,
    BUSY,
    EXITED,
    READY,
    SHELL,
    STARTING,
    LaunchContext,
    SessionView,
)
from roost.adapters.codex import CodexAdapter
from roost.adapters.codex_rollout import uuid7_time
from roost.adapters.evidence import Evidence, ProcessInfo
from roost.adapters.registry import adapters
from roost.wire.errors import RoostError
from tests.unit.captures import CAPTURES, capture, screens

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "fakes" / "codex"
# The captures of the real CLIs (tests/fixtures/provider-captures).
CTX = LaunchContext(cwd="/srv/work/proj3", mode="pty", env={}, data_dir="/data/codex")
ADAPTER = CodexAdapter({})


# -- launches ------------------------------------------------------------------------------------


def test_fresh_runs_the_tui_without_the_daemon_and_learns_its_id_later() -> None:
    launch = ADAPTER.fresh(CTX)
    assert launch.argv == ["codex", "--no-daemon", *codex.NOTIFY_ARGS]
    assert launch.provider_session is None and launch.env == {}


def test_resume_names_the_thread() -> None:
    launch = ADAPTER.resume("01a22acc-1207-7de3-a35d-56fcd1fb0061", CTX)
    assert launch.argv == [
        "codex",
        "resume",
        "01a22acc-1207-7de3-a35d-56fcd1fb0061",
        "--no-daemon",
        *codex.NOTIFY_ARGS,
    ]
    assert launch.provider_session == "01a22acc-1207-7de3-a35d-56fcd1fb0061"


def test_first_turn_starts_a_thread_and_later_turns_resume_it() -> None:
    first = ADAPTER.turn(None, "-v is a prompt", CTX, first=True)
    assert first.argv == [
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--",
        "-v is a prompt",
    ]
    assert first.provider_session is None
    later = ADAPTER.turn("01a2", "again", CTX, first=False)
    assert later.argv == [
        "codex",
        "exec",
        "resume",
        "01a2",
        "--json",
        "--skip-git-repo-check",
        "--",
        "again",
    ]
    assert later.provider_session == "01a2"


def test_a_later_turn_without_the_thread_id_is_refused_not_started_afresh() -> None:
    with pytest.raises(RoostError) as err:
        ADAPTER.turn(None, "again", CTX, first=False)
    assert err.value.code == "no-provider-session"


def test_the_binary_comes_from_the_record_env_then_the_node_env() -> None:
    ctx = LaunchContext(cwd="/", mode="pty", env={"ROOST_CODEX_BIN": "/opt/codex"}, data_dir="/d")
    assert ADAPTER.fresh(ctx).argv[0] == "/opt/codex"
    assert ADAPTER.turn(None, "x", ctx, first=True).argv[0] == "/opt/codex"
    node_wide = CodexAdapter({"ROOST_CODEX_BIN": "/usr/local/bin/codex"})
    assert node_wide.resume("id", CTX).argv[0] == "/usr/local/bin/codex"
    assert node_wide.fresh(ctx).argv[0] == "/opt/codex"


def test_turn_deadlines_default_and_come_from_the_environment() -> None:
    assert ADAPTER.turn_silence_s == 300.0 and ADAPTER.turn_deadline_s == 3600.0
    tuned = CodexAdapter({"ROOST_CODEX_TURN_SILENCE_S": "2", "ROOST_CODEX_TURN_DEADLINE_S": "0"})
    assert tuned.turn_silence_s == 2.0 and tuned.turn_deadline_s is None
    assert CodexAdapter({"ROOST_CODEX_TURN_SILENCE_S": "soon"}).turn_silence_s == 300.0


def test_the_registry_offers_codex() -> None:
    assert isinstance(adapters()["codex"], CodexAdapter)


# -- screens -------------------------------------------------------------------------------------

EXPECTED_SCREENS: dict[str, tuple[str, str | None]] = {
    "codex-mock-approve.txt": (ATTENTION, "permission"),
    "codex-mock-busy.txt": (BUSY, None),
    "codex-mock-done.txt": (READY, None),
    "codex-mock-exit.txt": (STARTING, None),  # the hint, but not yet reaped
    "codex-mock-resume.txt": (READY, None),
    # the screen alone: streaming text under a composer reads ready (the title and the rollout
    # say busy: test_codex_evidence.py), and a resume still loading shows a composer too
    "codex-mock-long.txt": (READY, None),
    "codex-mock-long-done.txt": (READY, None),
    "codex-mock-resume-lost.txt": (READY, None),
    "codex-mock-resume-lost-exit.txt": (STARTING, None),  # the error; the TUI gone, not reaped
    "codex-mock-s1.txt": (ATTENTION, "trust"),
    "codex-mock-s2.txt": (READY, None),
    "codex-screen1-apikey.txt": (ATTENTION, "login"),
    "codex-screen1-chatgpt.txt": (ATTENTION, "login"),
    "codex-screen1-other.txt": (ATTENTION, "login"),
    "codex-screen1.txt": (ATTENTION, "login"),
    # a usage limit (LIMITTEST: usage_limit_reached), then "continue" typed after its reset
    "codex-limit.txt": (ATTENTION, "rate-limit"),
    "codex-limit-continued.txt": (READY, None),
}


def test_every_codex_screen_capture_has_an_expectation() -> None:
    assert screens("codex") == set(EXPECTED_SCREENS)


@pytest.mark.parametrize(("name", "expected"), sorted(EXPECTED_SCREENS.items()))
def test_classify_a_real_screen(name: str, expected: tuple[str, str | None]) -> None:
    seen = ADAPTER.classify(capture(name), exited=False)
    assert (seen.state, seen.reason) == expected
    assert seen.reason is None or seen.reason in ATTENTION_REASONS


@pytest.mark.parametrize("name", sorted(EXPECTED_SCREENS))
def test_any_screen_of_an_exited_process_is_exited(name: str) -> None:
    assert ADAPTER.classify(capture(name), exited=True).state == EXITED


def test_details_name_what_is_asked_and_what_runs() -> None:
    apikey = ADAPTER.classify(capture("codex-screen1-apikey.txt"), exited=False)
    assert apikey.detail == "Paste or type your API key"
    approve = ADAPTER.classify(capture("codex-mock-approve.txt"), exited=False)
    assert approve.detail == "$ touch /srv/work/outside_by_mock.txt"
    busy = ADAPTER.classify(capture("codex-mock-busy.txt"), exited=False)
    assert busy.detail == "\u2022 Working (4s \u2022 esc to interrupt)"


HEADER = "  >_ OpenAI Codex (v0.171.0)\n     /srv/work/proj3\n"
FOOTER = "  gpt-mock default \u00b7 /srv/work/proj3\n  \u2190 for agents \u00b7 ? for shortcuts\n"
COMPOSER = "\u203a Ask Codex to do anything\n"


def turn_screen(*body: str, composer: str = COMPOSER) -> str:
    return HEADER + "\u203a please do it\n" + "".join(f"{b}\n" for b in body) + composer + FOOTER


@pytest.mark.parametrize(
    ("screen", "state", "reason"),
    [
        ("", STARTING, None),
        ("\n\n   \n", STARTING, None),
        (HEADER, STARTING, None),
        (turn_screen("\u2022 Hello."), READY, None),
        (turn_screen(composer="\u203a Ask a follow-up question\n"), READY, None),
        (turn_screen("\u2022 Hello.", composer="\u203a half typed\n"), READY, None),
        (turn_screen("\u2022 Working (12s \u2022 esc to interrupt)"), BUSY, None),
        (
            turn_screen("\u2022 Reconnecting... 2/5 (9s \u2022 esc to interrupt)"),
            ATTENTION,
            "offline",
        ),
        (
            turn_screen("\u25a0 stream disconnected before completion: error sending request"),
            ATTENTION,
            "offline",
        ),
        (
            turn_screen("\u25a0 You've hit your usage limit. Try again at 3:28 PM."),
            ATTENTION,
            "rate-limit",
        ),
        (
            turn_screen("\u25a0 unexpected status 401 Unauthorized: Incorrect API key provided"),
            ATTENTION,
            "login",
        ),
        (turn_screen("\u25a0 Conversation interrupted - use /feedback"), READY, None),
        # words of a dialog inside the conversation, above the composer, ask nothing
        (
            turn_screen("\u2022 Codex asks: Would you like to run the following command?"),
            READY,
            None,
        ),
        (turn_screen("\u2022 Choose Sign in with ChatGPT, then Trust this folder?"), READY, None),
        (
            HEADER + "\u2022 Proposed Change\n  Would you like to make the following edits?\n"
            "\u203a 1. Yes, proceed (y)\n  2. No, and tell Codex what to do differently (esc)\n"
            "  Press enter to confirm or esc to cancel\n",
            ATTENTION,
            "permission",
        ),
        (
            "\u2728 Update available! 0.171.0 -> 0.172.0\n\u203a 1. Update now (runs `npm install"
            " -g @openai/codex`)\n  2. Skip\n  3. Skip until next version\n"
            "  Press enter to continue\n",
            ATTENTION,
            "update",
        ),
        (
            "  Codex just got an upgrade\n\u203a 1. Try the new model\n  2. Use the existing one\n",
            ATTENTION,
            "picker",
        ),
    ],
)
def test_classify_synthetic_screens(screen: str, state: str, reason: str | None) -> None:
    seen = ADAPTER.classify(screen, exited=False)
    assert (seen.state, seen.reason) == (state, reason)


def proc(pid: int, name: str, ppid: int = 1, pgid: int | None = None) -> ProcessInfo:
    return ProcessInfo(
        pid=pid, ppid=ppid, pgid=pgid or pid, name=name, exe="", cmdline=(name,), start_time=1.0
    )


def test_evidence_without_the_agent_means_exited() -> None:
    gone = Evidence(agent=None, foreground_pgid=None)
    assert ADAPTER.classify(COMPOSER, exited=False, evidence=gone).state == EXITED


def test_an_idle_shell_in_the_foreground_is_a_shell_not_codex() -> None:
    shell = proc(10, "bash")
    idle = Evidence(agent=shell, foreground_pgid=10)
    assert ADAPTER.classify("$ ", exited=False, evidence=idle).state == SHELL
    running = Evidence(agent=shell, foreground_pgid=11, descendants=(proc(11, "codex", 10),))
    assert ADAPTER.classify(COMPOSER, exited=False, evidence=running).state == READY
    parent = Evidence(agent=shell, foreground_pgid=10, descendants=(proc(11, "codex", 10, 10),))
    assert ADAPTER.classify(COMPOSER, exited=False, evidence=parent).state == READY


# -- exec --json lines ---------------------------------------------------------------------------


def parse_file(name: str, stream: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every line of a capture through the parser, facts merged as the supervisor does."""
    events: list[dict[str, Any]] = []
    facts: dict[str, Any] = {}
    for line in capture(name).splitlines():
        got, learned = ADAPTER.parse(line, stream)
        events += got
        facts.update(learned)
    return events, facts


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["kind"] for e in events]


STREAM_CAPTURES = {
    "codex-401.err",
    "codex-401.jsonl",
    "codex-exec-noauth.stderr",
    "codex-exec-noauth.stdout",
    "codex-mock1.err",
    "codex-mock1.jsonl",
    "codex-mock2.err",
    "codex-mock2.jsonl",
    "codex-noauth2.err",
    "codex-noauth2.jsonl",
}


# Not exec output: a TUI turn's raw PTY bytes and its rollout file (test_codex_evidence.py).
EVIDENCE_CAPTURES = {
    "codex-mock-long-head.pty",
    "codex-mock-long-tail.pty",
    "codex-mock-long-rollout.jsonl",
}


def test_every_codex_stream_capture_is_covered() -> None:
    found = {p.name for p in CAPTURES.glob("codex-*") if p.suffix != ".txt"}
    assert found == STREAM_CAPTURES | EVIDENCE_CAPTURES


def test_a_plain_answer() -> None:
    events, facts = parse_file("codex-mock1.jsonl", "stdout")
    assert kinds(events) == ["session.stderr", "session.output"]
    assert events[0]["data"]["line"].startswith("warning: Model metadata for `gpt-mock`")
    assert events[1]["data"] == {"text": "Hello from the mock."}
    assert facts == {
        "session_id": "01a22acb-2aa9-7123-8eec-d98df7fb1486",
        "result": "Hello from the mock.",
        "is_error": False,
        "error": None,
        "completed": True,
        # turn.completed's usage: 10 input tokens (none cached), 5 output
        "usage": {"input": 10, "output": 5, "cache_read": 0, "cache_write": 0},
    }


def test_a_command_is_a_tool_call_and_its_result() -> None:
    events, facts = parse_file("codex-mock2.jsonl", "stdout")
    assert kinds(events) == [
        "session.stderr",
        "session.tool_call",
        "session.tool_result",
        "session.output",
    ]
    assert events[1]["data"] == {
        "id": "item_1",
        "name": "command_execution",
        "input": {"command": "/bin/bash -lc 'echo hi'"},
    }
    assert events[2]["data"] == {"id": "item_1", "is_error": False, "content": "hi\n"}
    assert facts["result"] == "Tool said hi." and facts["is_error"] is False
    assert facts["session_id"] == "01a22acb-3a5d-7533-84c1-05c49ae53e29"


@pytest.mark.parametrize("name", ["codex-401.jsonl", "codex-noauth2.jsonl"])
def test_a_refused_key_fails_the_turn_after_the_retries(name: str) -> None:
    events, facts = parse_file(name, "stdout")
    assert facts["is_error"] is True and "result" not in facts
    assert facts["error"].startswith("unexpected status 401 Unauthorized")
    assert facts["session_id"].startswith("01a22acb-")
    assert {e["kind"] for e in events} == {"session.stderr"}


def test_reconnecting_is_not_a_failure_by_itself() -> None:
    events, facts = parse_file("codex-exec-noauth.stdout", "stdout")
    assert facts == {
        "session_id": "01a22ac4-c147-7c01-8a10-77cf55ce8feb",
        "error": "Reconnecting... waiting for network (Connection failed: error sending request)",
    }
    assert events[-1]["data"]["line"].startswith("Reconnecting... waiting for network")


@pytest.mark.parametrize("name", ["codex-401.err", "codex-mock1.err", "codex-mock2.err"])
def test_known_stderr_noise_is_dropped(name: str) -> None:
    assert parse_file(name, "stderr") == ([], {})


@pytest.mark.parametrize("name", ["codex-exec-noauth.stderr", "codex-noauth2.err"])
def test_other_stderr_lines_are_kept_and_do_not_fail_the_turn(name: str) -> None:
    events, facts = parse_file(name, "stderr")
    assert len(events) == 7 and facts == {}
    assert "failed to connect to Responses WebSocket" in events[0]["data"]["line"]


def test_fatal_stderr_lines_fail_the_turn() -> None:
    line = (
        "Error: thread/resume: thread/resume failed: no rollout found for thread id "
        "01a22acb-0000-7000-8000-000000000000 (code -32600)"
    )
    events, facts = ADAPTER.parse(line, "stderr")
    assert kinds(events) == ["session.stderr"]
    assert facts["is_error"] is True and facts["error"].startswith("thread/resume: ")
    _, untrusted = ADAPTER.parse(
        "Not inside a trusted directory and --skip-git-repo-check was not specified.", "stderr"
    )
    assert untrusted["is_error"] is True


def test_a_turn_that_completes_after_a_reconnect_keeps_no_error() -> None:
    facts: dict[str, Any] = {}
    for line in (
        '{"type":"error","message":"Reconnecting... 1/5 (stream disconnected)"}',
        '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"ok"}}',
        '{"type":"turn.completed","usage":{}}',
    ):
        facts.update(ADAPTER.parse(line, "stdout")[1])
    assert facts == {"result": "ok", "is_error": False, "error": None, "completed": True}


def test_failed_turns_and_fatal_errors() -> None:
    failed = {"type": "turn.failed", "error": {"message": "boom"}}
    assert ADAPTER.parse(json.dumps(failed), "stdout") == ([], {"is_error": True, "error": "boom"})
    events, facts = ADAPTER.parse('{"type":"error","message":"stream ended"}', "stdout")
    assert facts == {"is_error": True, "error": "stream ended"} and len(events) == 1


@pytest.mark.parametrize(
    ("item", "is_error", "content"),
    [
        (
            {"type": "command_execution", "aggregated_output": "no", "exit_code": 2},
            True,
            "no",
        ),
        ({"type": "command_execution", "status": "declined", "exit_code": None}, True, ""),
        (
            {
                "type": "file_change",
                "changes": [{"path": "a", "kind": "add"}],
                "status": "completed",
            },
            False,
            '{"changes": [{"path": "a", "kind": "add"}]}',
        ),
        (
            {"type": "mcp_tool_call", "server": "s", "tool": "t", "error": {"message": "x"}},
            True,
            '{"server": "s", "tool": "t", "error": {"message": "x"}}',
        ),
    ],
)
def test_tool_results(item: dict[str, Any], is_error: bool, content: str) -> None:
    line = json.dumps({"type": "item.completed", "item": {"id": "item_3", **item}})
    events, facts = ADAPTER.parse(line, "stdout")
    assert events == [
        {
            "kind": "session.tool_result",
            "data": {"id": "item_3", "is_error": is_error, "content": content},
        }
    ]
    assert facts == {}


def test_an_mcp_call_names_its_server_and_tool() -> None:
    started = {"type": "mcp_tool_call", "server": "s", "tool": "t", "arguments": {"a": 1}}
    line = json.dumps({"type": "item.started", "item": {"id": "item_4", **started}})
    events, _ = ADAPTER.parse(line, "stdout")
    assert events[0]["data"]["input"] == {"server": "s", "tool": "t", "arguments": {"a": 1}}


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"turn.started"}',
        '{"type":"item.completed","item":{"id":"i","type":"reasoning","text":"hm"}}',
        '{"type":"item.updated","item":{"id":"i","type":"todo_list","items":[]}}',
        "[1, 2]",
        "",
    ],
)
def test_lines_without_events(line: str) -> None:
    assert ADAPTER.parse(line, "stdout") == ([], {})


def test_a_stdout_line_that_is_not_json_is_kept() -> None:
    assert ADAPTER.parse("panic!", "stdout") == (
        [{"kind": "session.stderr", "data": {"line": "panic!"}}],
        {},
    )


# -- identity ------------------------------------------------------------------------------------


def uuid7_at(when: float, tail: str = "7000-8000-000000000001") -> str:
    ms = f"{int(when * 1000):012x}"
    return f"{ms[:8]}-{ms[8:]}-{tail}"


def rollout(
    home: Path, ident: str, cwd: str, *, source: Any = "cli", day: dt.date | None = None
) -> Path:
    day = day or dt.date.today()
    folder = home / "sessions" / f"{day:%Y}" / f"{day:%m}" / f"{day:%d}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rollout-{day:%Y-%m-%d}T10-00-00-{ident}.jsonl"
    payload = {"id": ident, "session_id": ident, "cwd": cwd, "source": source}
    path.write_text(json.dumps({"type": "session_meta", "payload": payload}) + "\n")
    return path


def ctx_for(home: Path, cwd: str = "/srv/work/proj3", mode: str = "pty") -> LaunchContext:
    return LaunchContext(cwd=cwd, mode=mode, env={"CODEX_HOME": str(home)}, data_dir="/d")


def test_uuid7_time_reads_the_milliseconds() -> None:
    when = uuid7_time("01a22ac4-c147-7c01-8a10-77cf55ce8feb")  # rollout-2026-11-30T04-44-27-...
    assert when == dt.datetime(2026, 11, 30, 4, 44, 27, 335000, dt.UTC).timestamp()
    assert uuid7_time("6ba7b810-9dad-11d1-80b4-00c04fd430c8") is None  # a v1 uuid


def test_the_exit_hint_names_the_session() -> None:
    found = ADAPTER.discover_identity(capture("codex-mock-exit.txt"), CTX, since=0.0)
    assert found == "01a22acc-1207-7de3-a35d-56fcd1fb0061"


def test_the_thread_started_since_the_launch_in_this_cwd(tmp_path: Path) -> None:
    since = time.time()
    ours = uuid7_at(since + 0.2)
    rollout(tmp_path, uuid7_at(since - 60), "/srv/work/proj3")  # an older session here
    rollout(tmp_path, uuid7_at(since + 0.1, "7000-8000-000000000002"), "/elsewhere")
    rollout(
        tmp_path, uuid7_at(since + 0.1, "7000-8000-000000000003"), "/srv/work/proj3", source="exec"
    )
    sub = {"subagent": "review"}
    rollout(
        tmp_path, uuid7_at(since + 0.1, "7000-8000-000000000004"), "/srv/work/proj3", source=sub
    )
    assert ADAPTER.discover_identity("", ctx_for(tmp_path), since=since) is None
    rollout(tmp_path, ours, "/srv/work/proj3")
    assert ADAPTER.discover_identity("", ctx_for(tmp_path), since=since) == ours


def test_of_two_new_threads_in_one_cwd_the_older_is_ours(tmp_path: Path) -> None:
    since = time.time()
    first, second = uuid7_at(since + 1), uuid7_at(since + 2, "7000-8000-000000000009")
    rollout(tmp_path, second, "/srv/work/proj3")
    rollout(tmp_path, first, "/srv/work/proj3")
    assert ADAPTER.discover_identity("", ctx_for(tmp_path), since=since) == first
    assert ADAPTER.discover_identity("", ctx_for(tmp_path), since=since + 1.5) == second


def test_the_screen_hint_wins_over_files(tmp_path: Path) -> None:
    since = time.time()
    rollout(tmp_path, uuid7_at(since + 1), "/srv/work/proj3")
    hint = "To reconnect, run:\n  codex resume 01a22acc-1207-7de3-a35d-56fcd1fb0061\n"
    found = ADAPTER.discover_identity(hint, ctx_for(tmp_path), since=since)
    assert found == "01a22acc-1207-7de3-a35d-56fcd1fb0061"


def test_a_folder_a_day_either_side_is_read(tmp_path: Path) -> None:
    since = time.time()
    ident = uuid7_at(since + 1)
    rollout(tmp_path, ident, "/srv/work/proj3", day=dt.date.today() + dt.timedelta(days=1))
    assert ADAPTER.discover_identity("", ctx_for(tmp_path), since=since) == ident


def test_day_folders_before_the_launch_are_not_read(tmp_path: Path) -> None:
    since = time.time()
    ident = uuid7_at(since + 1)  # a name that fits, in a folder codex would not have used
    rollout(tmp_path, ident, "/srv/work/proj3", day=dt.date.today() - dt.timedelta(days=3))
    assert ADAPTER.discover_identity("", ctx_for(tmp_path), since=since) is None
    assert ADAPTER.discover_identity("", ctx_for(tmp_path), since=0.0) == ident


def test_the_cwd_is_compared_as_a_directory(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    since = time.time()
    ident = uuid7_at(since + 1)
    rollout(tmp_path / "home", ident, str(real))
    ctx = ctx_for(tmp_path / "home", cwd=str(tmp_path / "link") + "/")
    assert ADAPTER.discover_identity("", ctx, since=since) == ident


def test_unreadable_or_foreign_files_are_skipped(tmp_path: Path) -> None:
    since = time.time()
    good = rollout(tmp_path, uuid7_at(since + 1), "/srv/work/proj3")
    folder = good.parent
    (folder / f"rollout-x-{uuid7_at(since + 0.5, '7000-8000-00000000000a')}.jsonl").write_text("")
    (folder / f"rollout-x-{uuid7_at(since + 0.6, '7000-8000-00000000000b')}.jsonl").write_text(
        '{"type":"turn_context","payload":{}}\n'
    )
    (folder / "rollout-not-an-id.jsonl").write_text("{}\n")
    (folder / f"rollout-x-{uuid7_at(since + 0.7, '7000-8000-00000000000c')}.jsonl").write_bytes(
        b"\xff\xfe\n"
    )
    found = ADAPTER.discover_identity("", ctx_for(tmp_path), since=since)
    assert found == good.name[-len("00000000-0000-0000-0000-000000000000.jsonl") : -6]


def test_codex_home_comes_from_the_env_then_home(tmp_path: Path) -> None:
    ctx = LaunchContext(cwd="/", mode="pty", env={"HOME": str(tmp_path)}, data_dir="/d")
    assert ADAPTER.codex_home(ctx) == tmp_path / ".codex"
    assert CodexAdapter({"CODEX_HOME": "/node/codex"}).codex_home(ctx) == Path("/node/codex")
    assert ADAPTER.codex_home(ctx_for(tmp_path / "h")) == tmp_path / "h"


# -- the fake follows the real formats -----------------------------------------------------------


def shape(obj: Any) -> Any:
    """Keys and value types, not values."""
    if isinstance(obj, dict):
        return {k: shape(v) for k, v in obj.items()}
    return type(obj).__name__


def test_the_fake_exec_prints_the_real_jsonl_shapes(tmp_path: Path) -> None:
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "home")}
    out = subprocess.run(
        [str(FAKE), "exec", "--json", "--skip-git-repo-check", "--", "/tool echo hi"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    fake = [json.loads(line) for line in out.stdout.splitlines()]
    real = [json.loads(line) for line in capture("codex-mock2.jsonl").splitlines()]
    real = [obj for obj in real if (obj.get("item") or {}).get("type") != "error"]  # a warning
    assert [shape(obj) for obj in fake] == [shape(obj) for obj in real]
    assert parse_lines(out.stdout)["result"] == "Tool said hi."
    assert all(not ADAPTER.parse(line, "stderr")[0] for line in out.stderr.splitlines())


def parse_lines(text: str) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for line in text.splitlines():
        facts.update(ADAPTER.parse(line, "stdout")[1])
    return facts


def test_fork_is_codex_s_own_and_the_new_id_is_discovered() -> None:
    src = "01a22acc-1207-7de3-a35d-56fcd1fb0061"
    launch = ADAPTER.fork(src, CTX)
    assert launch.argv == ["codex", "fork", src, "--no-daemon"]
    assert launch.provider_session is None  # codex chooses it
    turn = ADAPTER.fork_turn(src, None, "-x", CTX)
    assert turn.argv == [
        "codex",
        "exec",
        "fork",
        src,
        "--json",
        "--skip-git-repo-check",
        "--",
        "-x",
    ]
    assert turn.provider_session is None


# -- usage limits ----------------------------------------------------------------------------------


def test_a_usage_limit_reads_the_reset_from_its_wrapped_cell() -> None:
    """ "... or try again at 6:30 PM." (the cell wraps inside a URL at 120 columns): the reset is
    the end of that minute in codex's local time, the next 6:30 PM after half a day ago."""
    seen = ADAPTER.classify(capture("codex-limit.txt"), exited=False)
    assert (seen.state, seen.reason) == (ATTENTION, "rate-limit")
    assert seen.reset_at is not None and not seen.self_continues
    at = dt.datetime.fromtimestamp(seen.reset_at)
    assert (at.hour, at.minute, at.second) == (18, 31, 0)
    # the next such time after half a day ago: within a day of that, whatever the hour now
    assert time.time() - 12 * 3600 <= seen.reset_at <= time.time() + 12 * 3600 + 86400


def test_the_reset_is_read_in_the_sessions_time_zone() -> None:
    """A ``TZ`` in the record's environment is codex's zone: 6:30 PM in Tokyo is 09:31 UTC."""
    ctx = LaunchContext(cwd="/srv/work/proj", mode="pty", env={"TZ": "Asia/Tokyo"}, data_dir="/d")
    view = SessionView(ctx=ctx)
    seen = ADAPTER.classify_session(
        capture("codex-limit.txt"), exited=False, evidence=None, view=view
    )
    assert seen.reason == "rate-limit" and seen.reset_at is not None
    at = dt.datetime.fromtimestamp(seen.reset_at, dt.UTC)
    assert (at.hour, at.minute) == (9, 31)
