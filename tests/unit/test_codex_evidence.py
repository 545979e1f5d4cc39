"""codex's busy and resume verdicts from what its screen does not show: the window title, the
rollout file, and what codex prints when a resume's thread is gone (captures of codex 0.171.0).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from roost.actors.supervisor.terminal import Terminal
from roost.adapters.base import (
    BUSY,
    READY,
    RESUME_FAILED,
    RESUMED,
    LaunchContext,
    SessionView,
)
from roost.adapters.codex import CodexAdapter
from roost.adapters.codex_rollout import find_rollout, turn_open
from roost.adapters.evidence import Evidence
from tests.unit.captures import CAPTURES, capture, capture_bytes

ADAPTER = CodexAdapter({})
LONG_ID = "01a23151-8f7c-74f0-b6fa-47291a3e795f"  # the thread of the codex-mock-long-* captures
LOST_ID = "01a23154-b6a1-7203-abbe-74290cbb9d35"  # the thread codex-mock-resume-lost* lost
STARTED_AT = dt.datetime(2026, 12, 1, 11, 16, 0, 901000, dt.UTC).timestamp()  # its task_started


def title_after(*names: str) -> str:
    """The window title after codex's own bytes (the PTY log of the long turn)."""
    term = Terminal(40, 120)
    for name in names:
        term.feed(capture_bytes(name))
    return term.title()


def ctx_for(home: Path) -> LaunchContext:
    return LaunchContext(
        cwd="/srv/work/proj", mode="pty", env={"CODEX_HOME": str(home)}, data_dir="/d"
    )


def place_rollout(home: Path, ident: str, *, upto: str | None = None) -> Path:
    """The long turn's rollout file where codex keeps it, cut before the first line holding
    ``upto`` (e.g. ``task_complete``: the turn still running)."""
    folder = home / "sessions" / "2026" / "12" / "01"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rollout-2026-12-01T11-15-58-{ident}.jsonl"
    lines = capture("codex-mock-long-rollout.jsonl").splitlines(keepends=True)
    if upto is not None:
        lines = lines[: next(i for i, line in enumerate(lines) if upto in line)]
    path.write_text("".join(lines))
    return path


def classify(screen: str, view: SessionView) -> tuple[str, str]:
    seen = ADAPTER.classify_session(screen, exited=False, evidence=None, view=view)
    return seen.state, seen.detail


# -- busy while an answer streams ------------------------------------------------------------------


def test_streaming_text_reads_ready_on_the_screen_alone() -> None:
    """Codex erases its "Working ... esc to interrupt" line once text streams."""
    assert "esc to interrupt" not in capture("codex-mock-long.txt")
    assert ADAPTER.classify(capture("codex-mock-long.txt"), exited=False).state == READY


def test_a_spinner_leading_the_title_is_busy() -> None:
    title = title_after("codex-mock-long-head.pty")
    state, detail = classify(capture("codex-mock-long.txt"), SessionView(title=title))
    assert state == BUSY and detail == "working: Please give a LONG answer | proj"
    # the next spinner frame is the same verdict: no new classification per frame
    moved = SessionView(title="\u2819" + title[1:])
    assert classify(capture("codex-mock-long.txt"), moved) == (state, detail)


def test_the_title_without_its_spinner_is_ready() -> None:
    title = title_after("codex-mock-long-head.pty", "codex-mock-long-tail.pty")
    assert classify(capture("codex-mock-long-done.txt"), SessionView(title=title))[0] == READY
    assert classify(capture("codex-mock-long-done.txt"), SessionView())[0] == READY


def test_a_turn_started_in_the_rollout_and_not_ended_is_busy(tmp_path: Path) -> None:
    place_rollout(tmp_path, LONG_ID, upto='"task_complete"')
    view = SessionView("", LONG_ID, since=STARTED_AT - 60, ctx=ctx_for(tmp_path))
    state, detail = classify(capture("codex-mock-long.txt"), view)
    assert state == BUSY and detail.startswith("rollout:")


def test_an_ended_turn_or_one_left_open_before_the_launch_is_not(tmp_path: Path) -> None:
    path = place_rollout(tmp_path, LONG_ID)
    view = SessionView("", LONG_ID, since=STARTED_AT - 60, ctx=ctx_for(tmp_path))
    assert classify(capture("codex-mock-long-done.txt"), view)[0] == READY
    place_rollout(tmp_path, LONG_ID, upto='"task_complete"')
    # an earlier process killed mid-turn left it open; this launch came after
    later = SessionView("", LONG_ID, since=STARTED_AT + 1, ctx=ctx_for(tmp_path))
    assert classify(capture("codex-mock-long-done.txt"), later)[0] == READY
    assert find_rollout(tmp_path / "sessions", LONG_ID) == path
    assert turn_open(path, STARTED_AT - 60)


def test_screens_that_are_not_ready_keep_their_verdict(tmp_path: Path) -> None:
    title = title_after("codex-mock-long-head.pty")
    for name, state in (("codex-mock-approve.txt", "attention"), ("codex-mock-busy.txt", BUSY)):
        assert classify(capture(name), SessionView(title=title))[0] == state


def test_a_rollout_cut_mid_line_or_unreadable_is_not_evidence(tmp_path: Path) -> None:
    path = place_rollout(tmp_path, LONG_ID, upto='"task_complete"')
    path.write_text(path.read_text()[:-40])  # the last line half written
    assert turn_open(path, STARTED_AT - 60)  # the task_started line before it still counts
    path.write_text("not json\n")
    assert not turn_open(path, 0.0)
    assert not turn_open(tmp_path / "missing.jsonl", 0.0)
    assert find_rollout(tmp_path / "sessions", "not-a-uuid") is None


# -- resume verdicts -------------------------------------------------------------------------------


def test_a_resume_still_loading_is_undecided_whatever_its_composer(tmp_path: Path) -> None:
    """A screen of "Resuming session…" above a composer is no resumed session yet."""
    screen = capture("codex-mock-resume-lost.txt")
    assert ADAPTER.verify_resume(screen, LOST_ID, [], ctx_for(tmp_path)).outcome is None
    place_rollout(tmp_path, LOST_ID)  # even with its file there: not loaded yet
    assert ADAPTER.verify_resume(screen, LOST_ID, [], ctx_for(tmp_path)).outcome is None


def test_codex_giving_up_the_resume_is_resume_failed() -> None:
    check = ADAPTER.verify_resume(capture("codex-mock-resume-lost-exit.txt"), LOST_ID, [])
    assert (check.outcome, check.reason) == (RESUME_FAILED, "not-found")
    assert f"no rollout found for thread id {LOST_ID}" in check.detail
    assert "/srv/work" not in check.detail  # no host path of codex's files


def test_codexs_give_up_is_read_wherever_the_terminal_wraps_it() -> None:
    """The error's words wrap at the terminal's edge wherever its path length puts them, and a
    space at a row's end goes with the row's trailing blanks: at every width it still reads
    not-found, with the reason and no path."""
    screen = capture("codex-mock-resume-lost-exit.txt")
    rows = screen.splitlines()
    start = next(i for i, row in enumerate(rows) if "Failed to resume" in row)
    line = "".join(rows[start:]).strip()  # the capture's rows are wrapped at their full width
    assert "no rollout found" in line
    for width in range(20, len(line)):
        wrapped = [line[i : i + width].rstrip() for i in range(0, len(line), width)]
        check = ADAPTER.verify_resume("\n".join(wrapped), LOST_ID, [])
        assert (check.outcome, check.reason) == (RESUME_FAILED, "not-found"), width
        assert "/srv/work" not in check.detail and "rollout" in check.detail, width


def test_a_resumed_screen_is_resumed_only_with_the_threads_file(tmp_path: Path) -> None:
    screen = capture("codex-mock-resume.txt")
    assert ADAPTER.verify_resume(screen, LONG_ID, [], ctx_for(tmp_path)).outcome is None
    place_rollout(tmp_path, LONG_ID)
    assert ADAPTER.verify_resume(screen, LONG_ID, [], ctx_for(tmp_path)).outcome == RESUMED


def test_an_exit_before_a_verdict_is_resume_failed(tmp_path: Path) -> None:
    gone = Evidence(agent=None, foreground_pgid=None)
    check = ADAPTER.verify_resume(capture("codex-mock-resume-lost.txt"), LOST_ID, [gone])
    assert (check.outcome, check.reason) == (RESUME_FAILED, "exited")


def test_the_rollout_capture_is_the_long_turns_thread() -> None:
    first = json.loads(capture("codex-mock-long-rollout.jsonl").splitlines()[0])
    assert first["payload"]["id"] == LONG_ID and (CAPTURES / "codex-mock-long-head.pty").is_file()
