"""The kimi provider: its adapter (roost.adapters.kimi) read against the real CLI's captures
(in the repository: tests/fixtures/provider-captures), and the stand-in program tests/fakes/kimi
held to the same shapes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from roost.adapters.base import (
    ATTENTION,
    ATTENTION_REQUIRED,
    BUSY,
    EXITED,
    READY,
    RESUME_FAILED,
    RESUMED,
    SHELL,
    STARTING,
    LaunchContext,
    verify_fork,
)
from roost.adapters.evidence import Evidence, ProcessInfo
from roost.adapters.kimi import KimiAdapter, work_dir_key
from roost.adapters.registry import adapters
from roost.wire.errors import RoostError
from tests.unit.captures import capture, screens

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "kimi"
CTX = LaunchContext(cwd="/srv/work/proj4", mode="pty", env={}, data_dir="/data/kimi")
ADAPTER = KimiAdapter()
SID = "session_e2e5fa5d-2216-45bd-b742-506d61563be4"  # the one in the exit and resume captures
BOX = [" ╭" + "─" * 40 + "╮", " │ >" + " " * 37 + "│", " ╰" + "─" * 40 + "╯"]
STATUS = [" mock-model  /srv/work/proj4", "   context: 1% (15/128k)"]

SCREENS: dict[str, tuple[str, str | None]] = {
    "kimi-mock-approve.txt": (ATTENTION, "permission"),
    "kimi-mock-busy.txt": (BUSY, None),  # the moon-phase spinner
    "kimi-mock-done.txt": (READY, None),
    "kimi-mock-exit.txt": (EXITED, None),  # "Bye!" and the resume hint, the process leaving
    "kimi-mock-idle.txt": (READY, None),
    "kimi-mock-resume.txt": (READY, None),
    # kimi -S of a deleted session: its error, the process not reaped yet
    "kimi-mock-resume-lost-exit.txt": (STARTING, None),
    # text and Enter typed in one burst: a paste, the text left in the composer over a new line
    "kimi-mock-paste.txt": (READY, None),
    "kimi-screen-login.txt": (ATTENTION, "login"),  # the platform picker of /login
    "kimi-screen1.txt": (ATTENTION, "trust"),
    "kimi-screen2.txt": (ATTENTION, "login"),  # composer, but "Model: not set"
    "kimi-screen3.txt": (ATTENTION, "login"),  # "Error: LLM not set"
    # no model; the status line shows the cwd shortened to "…/runs/kimi-noauth/proj"
    "kimi-nomodel-idle.txt": (ATTENTION, "login"),
    # a 429 with retry-after (LIMITTEST): kimi waits and retries by itself, "Retrying (2/10) ·
    # APIProviderRateLimitError · in 70s" under the spinner; nothing for a person to do
    "kimi-limit-retry.txt": (BUSY, None),
}


def screen(*middle: str) -> str:
    """A configured kimi screen: ``middle`` above the composer, the status line below."""
    return "\n".join([*middle, *BOX, *STATUS])


def proc(pid: int, name: str, pgid: int | None = None) -> ProcessInfo:
    return ProcessInfo(pid, 1, pgid or pid, name, f"/bin/{name}", (name,), 100.0)


def fold(lines: list[str], stream: str = "stdout") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Parse lines as the supervisor does: events in order, facts merged across the turn."""
    events: list[dict[str, Any]] = []
    facts: dict[str, Any] = {}
    for line in lines:
        more, learned = ADAPTER.parse(line, stream)
        events += more
        facts.update(learned)
    return events, facts


# -- launches ------------------------------------------------------------------------------------


def test_the_registry_offers_kimi() -> None:
    assert isinstance(adapters()["kimi"], KimiAdapter)


def test_fresh_runs_kimi_bare_with_no_identity_yet() -> None:
    launch = ADAPTER.fresh(CTX)
    assert launch.argv == ["kimi"] and launch.provider_session is None and launch.env == {}


def test_the_binary_comes_from_roost_kimi_bin() -> None:
    ctx = LaunchContext(cwd="/p", mode="pty", env={"ROOST_KIMI_BIN": "/opt/k/kimi"}, data_dir="/d")
    assert ADAPTER.fresh(ctx).argv == ["/opt/k/kimi"]
    assert ADAPTER.resume(SID, ctx).argv == ["/opt/k/kimi", "-S", SID]


def test_resume_names_the_session() -> None:
    launch = ADAPTER.resume(SID, CTX)
    assert launch.argv == ["kimi", "-S", SID] and launch.provider_session == SID


def test_a_first_turn_lets_kimi_assign_the_id() -> None:
    launch = ADAPTER.turn(None, "hi there", CTX, first=True)
    assert launch.argv == ["kimi", "-p", "hi there", "--output-format", "stream-json"]
    assert launch.provider_session is None


def test_a_later_turn_continues_the_session() -> None:
    launch = ADAPTER.turn(SID, "-and more", CTX, first=False)
    assert launch.argv == ["kimi", "-p", "-and more", "--output-format", "stream-json", "-S", SID]
    assert launch.provider_session == SID


def test_a_later_turn_without_an_id_is_refused_rather_than_starting_afresh() -> None:
    with pytest.raises(RoostError) as refused:
        ADAPTER.turn(None, "more", CTX, first=False)
    assert refused.value.code == "no-provider-session"


# -- the directory key ---------------------------------------------------------------------------


def sha12(path: str) -> str:
    return hashlib.sha256(path.encode()).hexdigest()[:12]


@pytest.mark.parametrize(
    ("cwd", "key"),
    [
        ("/srv/proj", "wd_proj_6b9af143446a"),
        ("/srv/proj/", "wd_proj_6b9af143446a"),  # trailing slashes trimmed before hashing
        ("/home/me/My Project (v2)", f"wd_my-project-v2_{sha12('/home/me/My Project (v2)')}"),
        ("/x/!!!", f"wd_workspace_{sha12('/x/!!!')}"),
        ("/x/..", f"wd_workspace_{sha12('/x/..')}"),
        ("/x/" + "a" * 39 + "-bcd", f"wd_{'a' * 39}_{sha12('/x/' + 'a' * 39 + '-bcd')}"),
        ("C:\\Users\\me\\Proj", f"wd_proj_{sha12('C:/Users/me/Proj')}"),
        ("/x/a.b_c-d", f"wd_a.b_c-d_{sha12('/x/a.b_c-d')}"),
    ],
)
def test_work_dir_key(cwd: str, key: str) -> None:
    assert work_dir_key(cwd) == key


# -- screens of the real CLI ---------------------------------------------------------------------


def test_every_kimi_capture_has_an_expected_classification() -> None:
    assert screens("kimi") == set(SCREENS)


@pytest.mark.parametrize(("name", "expected"), sorted(SCREENS.items()))
def test_every_capture_is_classified(name: str, expected: tuple[str, str | None]) -> None:
    seen = ADAPTER.classify(capture(name), exited=False)
    assert (seen.state, seen.reason) == expected
    if seen.state == ATTENTION:
        assert seen.detail and "│" not in seen.detail


@pytest.mark.parametrize("name", sorted(SCREENS))
def test_an_exited_process_is_exited_whatever_the_screen(name: str) -> None:
    assert ADAPTER.classify(capture(name), exited=True).state == EXITED


def test_the_login_picker_names_itself() -> None:
    assert ADAPTER.classify(capture("kimi-screen-login.txt"), exited=False).detail == (
        "Select a platform"
    )


# -- synthetic screens ---------------------------------------------------------------------------


@pytest.mark.parametrize("spinner", [*"🌑🌒🌓🌔🌕🌖🌗🌘", "⠋ Working…", "⠏ Working…"])
def test_spinners_above_the_composer_are_busy(spinner: str) -> None:
    seen = ADAPTER.classify(screen("✨ SLOW please answer", f"  {spinner} · Tip: x"), exited=False)
    assert seen.state == BUSY


def test_a_moon_in_an_answer_is_not_a_spinner() -> None:
    shown = screen("✨ what is up there?", "● 🌕 the full moon")
    assert ADAPTER.classify(shown, exited=False).state == READY


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        ("Error: provider.rate_limit: 429 Too Many Requests", "rate-limit"),
        ("Error: provider.auth_error: 403 You have reached your monthly usage limit", "rate-limit"),
        ("Error: provider.connection_error: fetch failed", "offline"),
        ("Error: connect ECONNREFUSED 127.0.0.1:443", "offline"),
        ("Error: provider.auth_error: 401 Incorrect API key provided", "login"),
        ('Error: LLM not set, send "/login" to login', "login"),
    ],
)
def test_an_error_of_the_latest_turn_needs_attention(error: str, reason: str) -> None:
    seen = ADAPTER.classify(screen("✨ hello", f"  {error}"), exited=False)
    assert (seen.state, seen.reason, seen.detail) == (ATTENTION, reason, error)


def test_an_error_of_an_earlier_turn_is_history() -> None:
    shown = screen("✨ hello", "  Error: provider.rate_limit: 429", "✨ again", "● Hello.")
    assert ADAPTER.classify(shown, exited=False).state == READY


def test_an_unknown_error_leaves_the_session_ready() -> None:
    assert (
        ADAPTER.classify(screen("✨ x", "  Error: context.overflow"), exited=False).state == READY
    )


def test_no_model_in_the_status_line_is_login_even_with_the_welcome_box_gone() -> None:
    shown = "\n".join(["✨ hi", *BOX, " /srv/work/proj  master [±]", "  context: 0%"])
    assert ADAPTER.classify(shown, exited=False).reason == "login"


@pytest.mark.parametrize("cwd", ["~/proj", "~", "…/runs/kimi-noauth/proj", "/srv/work/proj"])
def test_a_status_line_that_starts_with_the_cwd_has_no_model(cwd: str) -> None:
    """kimi shortens the cwd to ``~/...`` under HOME and to its last segments after ``…/``."""
    shown = "\n".join(
        ["✨ hi", *BOX, f" {cwd}     /goal next to queue follow-up work", "  context: 0%"]
    )
    seen = ADAPTER.classify(shown, exited=False)
    assert (seen.state, seen.reason) == (ATTENTION, "login")


def test_a_model_set_after_the_welcome_box_was_drawn_is_ready() -> None:
    shown = screen(" │  Model:     not set, run /login or /provider   │", "● Logged in.")
    assert ADAPTER.classify(shown, exited=False).state == READY


def test_dialog_words_in_the_history_do_not_count_while_the_composer_shows() -> None:
    shown = screen("✨ say it", "● Trust this folder? Run this command? Approve once")
    assert ADAPTER.classify(shown, exited=False).state == READY


@pytest.mark.parametrize(
    ("dialog", "reason"),
    [
        (["  Update available: 2.1.0 → 2.2.0", "  ↑↓ navigate · Enter select"], "update"),
        (["  Select a session", "  ↑↓ navigate · Enter select · Esc cancel"], "picker"),
        (["  ▶ Run this command?", "  $ rm -rf build", "  ▶ 1. Approve once"], "permission"),
    ],
)
def test_dialogs_in_place_of_the_composer(dialog: list[str], reason: str) -> None:
    shown = "\n".join(["✨ do it", " " + "─" * 40, *dialog, " " + "─" * 40, *STATUS])
    seen = ADAPTER.classify(shown, exited=False)
    assert (seen.state, seen.reason) == (ATTENTION, reason)


def test_a_dialog_answered_long_ago_is_not_looked_at() -> None:
    shown = "\n".join(["● Running a command · $ ls", "  ▶ Run this command?", "✨ next", "● ok"])
    assert ADAPTER.classify(shown, exited=False).state == STARTING


@pytest.mark.parametrize("shown", ["", "\n  \n", " ╭" + "─" * 40 + "╮\n │  ▐█▛█▛█▌  Welcome"])
def test_a_screen_being_drawn_is_starting(shown: str) -> None:
    assert ADAPTER.classify(shown, exited=False).state == STARTING


def test_evidence_of_a_gone_agent_is_exited() -> None:
    gone = Evidence(agent=None, foreground_pgid=None)
    assert ADAPTER.classify(screen("● hi"), exited=False, evidence=gone).state == EXITED


def test_a_shell_in_the_foreground_without_kimi_on_screen_is_a_shell() -> None:
    bash = proc(20, "bash")
    sample = Evidence(agent=proc(10, "node"), foreground_pgid=20, descendants=(bash,))
    assert ADAPTER.classify("$ ", exited=False, evidence=sample).state == SHELL
    own = Evidence(agent=proc(10, "node"), foreground_pgid=10)
    assert ADAPTER.classify("$ ", exited=False, evidence=own).state == STARTING


# -- resume verification -------------------------------------------------------------------------


def test_a_resume_showing_its_session_is_resumed() -> None:
    check = ADAPTER.verify_resume(capture("kimi-mock-resume.txt"), SID, [])
    assert check.outcome == RESUMED


def test_a_resume_showing_another_session_failed() -> None:
    other = f"session_{uuid.uuid4()}"
    check = ADAPTER.verify_resume(capture("kimi-mock-resume.txt"), other, [])
    assert (check.outcome, check.reason) == (RESUME_FAILED, "identity")


def test_a_resume_stopped_by_the_trust_dialog_needs_attention() -> None:
    check = ADAPTER.verify_resume(capture("kimi-screen1.txt"), SID, [])
    assert (check.outcome, check.reason) == (ATTENTION_REQUIRED, "trust")


# -- headless output of the real CLI -------------------------------------------------------------


def test_a_plain_answer() -> None:
    events, facts = fold(capture("kimi-mock1.jsonl").splitlines())
    assert events == [{"kind": "session.output", "data": {"text": "Hello from the mock."}}]
    assert facts == {
        "result": "Hello from the mock.",
        "session_id": "session_1e626b55-3ef6-4f63-b58d-44f8eeeec7b8",
        "is_error": False,
    }


def test_a_tool_call_its_result_and_the_answer() -> None:
    events, facts = fold(capture("kimi-mock2.jsonl").splitlines())
    assert events == [
        {
            "kind": "session.tool_call",
            "data": {"id": "call_mock_dce1f6b6", "name": "Bash", "input": {"command": "echo hi"}},
        },
        {
            "kind": "session.tool_result",
            "data": {"id": "call_mock_dce1f6b6", "is_error": False, "content": "hi\n"},
        },
        {"kind": "session.output", "data": {"text": "Tool said hi."}},
    ]
    assert facts["result"] == "Tool said hi." and facts["is_error"] is False
    assert facts["session_id"] == "session_6577334c-2dbf-4b91-90c1-1630a90ffe42"


def test_tool_output_on_stderr_is_no_error() -> None:
    events, facts = fold(capture("kimi-mock2.err").splitlines(), "stderr")
    assert events == [{"kind": "session.stderr", "data": {"line": "hi"}}] and facts == {}


def test_a_401_is_an_error_line_on_stderr_not_json() -> None:
    out_events, out_facts = fold(capture("kimi-401.jsonl").splitlines())
    assert out_events == [] and out_facts == {}
    events, facts = fold(capture("kimi-401.err").splitlines(), "stderr")
    assert [e["kind"] for e in events] == ["session.stderr", "session.stderr"]
    assert events[1]["data"]["line"].startswith("See log: ")
    assert facts["is_error"] is True
    assert facts["error"].startswith("provider.auth_error: 401 Incorrect API key provided")


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("error: Cannot combine --prompt with --yolo.", "Cannot combine --prompt with --yolo."),
        (
            '\x1b[33merror: failed to run prompt: Session "s" not found.\x1b[39m',
            'Session "s" not found.',
        ),
    ],
)
def test_stderr_error_lines(line: str, error: str) -> None:
    events, facts = ADAPTER.parse(line, "stderr")
    assert facts == {"is_error": True, "error": error}
    assert "\x1b" not in events[0]["data"]["line"]


def test_blank_stderr_is_nothing() -> None:
    assert ADAPTER.parse("   ", "stderr") == ([], {})


def test_content_parts_tool_arguments_that_are_not_json_and_stray_stdout() -> None:
    parts = {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "x"}]}
    assert ADAPTER.parse(json.dumps(parts), "stdout")[1] == {"result": "a"}
    call = {"type": "function", "id": "c1", "function": {"name": "Bash", "arguments": "{oops"}}
    events, _ = ADAPTER.parse(json.dumps({"role": "assistant", "tool_calls": [call]}), "stdout")
    assert events[0]["data"]["input"] == "{oops"
    events, facts = ADAPTER.parse("kimi version 2.1.0", "stdout")
    assert events[0]["kind"] == "session.stderr" and facts == {}
    assert ADAPTER.parse("[1, 2]", "stdout") == ([], {})


def test_a_retry_is_shown_and_does_not_end_the_turn() -> None:
    retry = {
        "role": "meta",
        "type": "turn.step.retrying",
        "failed_attempt": 1,
        "next_attempt": 2,
        "max_attempts": 5,
        "delay_ms": 2000,
        "error_name": "APIProviderRateLimitError",
        "error_message": "429",
        "status_code": 429,
    }
    events, facts = ADAPTER.parse(json.dumps(retry), "stdout")
    assert facts == {} and "attempt 2/5" in events[0]["data"]["line"]


# -- identity ------------------------------------------------------------------------------------


def test_identity_from_the_exit_hint_and_from_a_resumed_welcome_box() -> None:
    for name in ("kimi-mock-exit.txt", "kimi-mock-resume.txt"):
        assert ADAPTER.discover_identity(capture(name), CTX, since=time.time()) == SID


def test_no_identity_on_a_fresh_screen_with_no_files(tmp_path: Path) -> None:
    ctx = LaunchContext(cwd="/p", mode="pty", env={"KIMI_CODE_HOME": str(tmp_path)}, data_dir="/d")
    assert ADAPTER.discover_identity(capture("kimi-mock-idle.txt"), ctx, since=0.0) is None


def make_session(
    home: Path, cwd: str, created: Any, prompt: str = "hello", *, index_only: bool = False
) -> str:
    sid = f"session_{uuid.uuid4()}"
    where = home / ("elsewhere" if index_only else f"sessions/{work_dir_key(cwd)}") / sid
    where.mkdir(parents=True)
    state = {"id": sid, "version": 2, "cwd": cwd, "createdAt": created, "lastPrompt": prompt}
    (where / "state.json").write_text(json.dumps({**state, "title": prompt}))
    with (home / "session_index.jsonl").open("a") as fh:
        fh.write(json.dumps({"sessionId": sid, "sessionDir": str(where), "workDir": cwd}) + "\n")
    return sid


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "kimi-home"


def kctx(home: Path, cwd: str = "/srv/work/proj4") -> LaunchContext:
    return LaunchContext(cwd=cwd, mode="pty", env={"KIMI_CODE_HOME": str(home)}, data_dir="/d")


def test_identity_from_the_session_files(home: Path) -> None:
    since = time.time()
    make_session(home, "/srv/work/proj4", int((since - 60) * 1000))  # an earlier one
    make_session(home, "/srv/work/other", int((since + 1) * 1000))  # another folder's
    sid = make_session(home, "/srv/work/proj4", int((since + 1) * 1000))
    assert ADAPTER.discover_identity("✨ hello", kctx(home), since=since) == sid


def test_nothing_created_since_the_launch_is_no_identity(home: Path) -> None:
    since = time.time()
    make_session(home, "/srv/work/proj4", int((since - 1) * 1000))
    assert ADAPTER.discover_identity("", kctx(home), since=since) is None


def test_two_new_sessions_in_one_folder_are_told_apart_by_the_prompt_on_screen(
    home: Path,
) -> None:
    since, later = time.time(), int((time.time() + 1) * 1000)
    mine = make_session(home, "/srv/work/proj4", later, "fix the parser please")
    make_session(home, "/srv/work/proj4", later, "write the docs")
    shown = screen("✨ fix the parser please", "● On it.")
    assert ADAPTER.discover_identity(shown, kctx(home), since=since) == mine
    assert ADAPTER.discover_identity(screen("✨ neither"), kctx(home), since=since) is None


def test_another_kimis_new_session_in_the_folder_is_not_taken(home: Path) -> None:
    since = time.time()
    make_session(home, "/srv/work/proj4", int((since + 1) * 1000), "the user's own question")
    shown = screen("✨ roost's question", "● Thinking about it.")
    assert ADAPTER.discover_identity(shown, kctx(home), since=since) is None


def test_the_index_finds_a_session_kept_outside_the_key_directory(home: Path) -> None:
    since = time.time()
    sid = make_session(home, "/srv/work/proj4", (since + 1) * 1000, index_only=True)
    assert ADAPTER.discover_identity("", kctx(home), since=since) == sid


def test_iso_times_and_half_written_state_files(home: Path) -> None:
    since = time.time()
    iso = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(since + 5))
    sid = make_session(home, "/srv/work/proj4", iso)
    broken = home / "sessions" / work_dir_key("/srv/work/proj4") / f"session_{uuid.uuid4()}"
    broken.mkdir(parents=True)
    (broken / "state.json").write_text('{"id": "sess')
    assert ADAPTER.discover_identity("", kctx(home), since=since) == sid


def test_the_home_defaults_to_dot_kimi_code_under_home(tmp_path: Path) -> None:
    since = time.time()
    sid = make_session(tmp_path / ".kimi-code", "/p", int((since + 1) * 1000))
    ctx = LaunchContext(cwd="/p", mode="pty", env={"HOME": str(tmp_path)}, data_dir="/d")
    assert ADAPTER.discover_identity("", ctx, since=since) == sid


# -- the stand-in program ------------------------------------------------------------------------


def run_fake(
    cwd: Path, home: Path, *args: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    full = {**os.environ, "KIMI_CODE_HOME": str(home), **env}
    done = subprocess.run(
        [str(FAKE), *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=30
    )
    return done, [json.loads(line) for line in done.stdout.splitlines()]


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    return path


def test_the_fake_prints_the_real_line_shapes(proj: Path, home: Path) -> None:
    done, lines = run_fake(proj, home, "-p", "/tool echo hi", "--output-format", "stream-json")
    assert done.returncode == 0 and done.stderr == "hi\n"
    real = [json.loads(line) for line in capture("kimi-mock2.jsonl").splitlines()]
    assert [sorted(line) for line in lines] == [sorted(line) for line in real]
    assert done.stdout.splitlines()[0] == capture("kimi-mock1.jsonl").splitlines()[0]
    events, facts = fold(done.stdout.splitlines())
    assert [e["kind"] for e in events] == [
        "session.tool_call",
        "session.tool_result",
        "session.output",
    ]
    assert events[0]["data"]["input"] == {"command": "echo hi"}
    sid = facts["session_id"]
    assert facts == {"result": "Tool said hi.", "session_id": sid, "is_error": False}
    where = home / "sessions" / work_dir_key(str(proj)) / sid  # the adapter's key is the fake's
    state = json.loads((where / "state.json").read_text())
    assert state["cwd"] == str(proj) and state["lastPrompt"] == "/tool echo hi"
    index = [json.loads(x) for x in (home / "session_index.jsonl").read_text().splitlines()]
    assert index == [{"sessionId": sid, "sessionDir": str(where), "workDir": str(proj)}]


def test_the_fake_continues_a_session_only_in_its_folder(
    proj: Path, home: Path, tmp_path: Path
) -> None:
    _, first = run_fake(proj, home, "-p", "one", "--output-format", "stream-json")
    sid = first[-1]["session_id"]
    done, again = run_fake(proj, home, "-p", "two", "--output-format", "stream-json", "-S", sid)
    assert done.returncode == 0 and again[-1]["session_id"] == sid
    assert again[-2] == {"role": "assistant", "content": "You said: two"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done, _ = run_fake(elsewhere, home, "-p", "x", "--output-format", "stream-json", "-S", sid)
    assert done.returncode == 1
    assert f'Session "{sid}" was created under a different directory.' in done.stderr
    assert f'cd "{proj}" && kimi -r {sid}' in done.stderr
    assert fold(done.stderr.splitlines(), "stderr")[1]["is_error"] is True


def test_the_fake_refuses_an_unknown_session(proj: Path, home: Path) -> None:
    done, lines = run_fake(proj, home, "-p", "x", "--output-format", "stream-json", "-S", "nope")
    assert done.returncode == 1 and [line["type"] for line in lines] == ["system.version"]
    _, facts = fold(done.stderr.splitlines(), "stderr")
    assert facts == {"is_error": True, "error": 'Session "nope" not found.'}
    interactive = subprocess.run(
        [str(FAKE), "-S", "nope"],
        cwd=proj,
        env={**os.environ, "KIMI_CODE_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert interactive.returncode == 1 and 'Session "nope" not found.' in interactive.stderr


def test_the_fake_unauthenticated_and_crashing(proj: Path, home: Path) -> None:
    args = ("-p", "hi", "--output-format", "stream-json")
    done, _ = run_fake(proj, home, *args, FAKE_KIMI_SCREEN="login")
    assert done.returncode == 1
    assert "No model configured" in fold(done.stderr.splitlines(), "stderr")[1]["error"]
    done, lines = run_fake(proj, home, *args, FAKE_KIMI_CRASH="1")
    assert done.returncode == 1 and lines == lines[:1]  # system.version, then nothing
    done, _ = run_fake(proj, home, "--output-format", "stream-json")
    assert done.returncode == 1 and "only supported in prompt mode" in done.stderr


# -- fork ----------------------------------------------------------------------------------------

NEW = "session_0b6f1c7e-7d59-4f6c-9a53-2f0e4c1d8b21"
FAKE_KIMI = f"""#!/bin/sh
if [ "$1" = fork ]; then
  [ "$2" = {SID} ] || {{ echo "Session \\"$2\\" not found." >&2; exit 1; }}
  echo 'Forked to {NEW} ("Fork: {SID}") in 12ms'
  exit 0
fi
printf 'ran:'; for a in "$@"; do printf ' [%s]' "$a"; done; echo
"""


def _fake_kimi(tmp_path: Path) -> LaunchContext:
    program = tmp_path / "kimi"
    program.write_text(FAKE_KIMI)
    program.chmod(0o755)
    return LaunchContext(cwd="/p", mode="pty", env={"ROOST_KIMI_BIN": str(program)}, data_dir="/d")


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)


def test_fork_runs_kimi_fork_then_opens_the_id_it_printed(tmp_path: Path) -> None:
    ctx = _fake_kimi(tmp_path)
    launch = ADAPTER.fork(SID, ctx)
    assert launch.provider_session is None  # read from the screen once kimi shows it
    done = _run(launch.argv)
    assert done.returncode == 0 and done.stdout == f"ran: [-S] [{NEW}]\n"  # no "Forked to"
    text = 'it\'s "quoted" $HOME `x`'
    turn = _run(ADAPTER.fork_turn(SID, None, text, ctx).argv)
    want = f"ran: [-p] [{text}] [--output-format] [stream-json] [-S] [{NEW}]\n"
    assert turn.returncode == 0 and turn.stdout == want


def test_a_fork_kimi_refuses_ends_with_its_message(tmp_path: Path) -> None:
    ctx = _fake_kimi(tmp_path)
    other = "session_11111111-2222-4333-8444-555555555555"
    done = _run(ADAPTER.fork(other, ctx).argv)
    assert done.returncode == 1 and "not found" in done.stderr and "ran:" not in done.stdout
    with pytest.raises(RoostError) as err:
        ADAPTER.fork("$(reboot)", ctx)  # only kimi's own ids
    assert err.value.code == "bad-request"


def test_a_fork_showing_the_source_s_id_failed() -> None:
    shown = capture("kimi-mock-resume.txt")  # the welcome box shows SID
    same = verify_fork(ADAPTER, shown, SID, None, [])
    assert same.outcome == "resume_failed" and "source" in same.detail
    other = verify_fork(ADAPTER, shown, "session_11111111-2222-4333-8444-555555555555", None, [])
    assert other.outcome == "resumed"
