"""The ``codex`` provider: OpenAI Codex CLI 0.171.0.

Interactive sessions run ``codex --no-daemon`` so the turn stays inside the supervised process
(without it the TUI starts a detached app-server daemon that outlives it). Codex picks its own
session id (a UUIDv7, no flag to choose one), so identity is discovered: from the exit hint
``codex resume <uuid>`` on the screen, or from the rollout file codex writes under
``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<uuid>.jsonl``, whose first line is a
``session_meta`` naming the cwd. Interactive launches also ask for codex's desktop notifications as
OSC 9 in its output, for every turn's end and every approval (``NOTIFY_ARGS``), whatever the
terminal's focus: the supervisor reads them as signals (``OSC9``). Stream mode runs one
``codex exec --json`` per turn; its JSONL (``thread.started`` carries the id) becomes roost events
here.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from datetime import tzinfo
from pathlib import Path
from typing import Any

from roost.adapters import limits
from roost.adapters.base import (
    ATTENTION,
    BUSY,
    EXITED,
    READY,
    RESUME_FAILED,
    RESUMED,
    SHELL,
    STARTING,
    Adapter,
    Classification,
    Launch,
    LaunchContext,
    ResumeCheck,
    Runner,
    SessionView,
    VendorCli,
    last_line,
)
from roost.adapters.codex_rollout import UUID, find_rollout, first_thread, turn_open
from roost.adapters.evidence import SHELLS, Evidence
from roost.adapters.usage_files import codex_totals
from roost.wire import usage as u
from roost.wire.errors import RoostError
from roost.wire.usage import Usage

Event = dict[str, Any]

HOME_ENV, HOME_DIR = "CODEX_HOME", ".codex"  # its home: config, login and the rollouts
RESUME_HINT = re.compile(rf"codex resume ({UUID})")
EXEC_FLAGS = ("--json", "--skip-git-repo-check", "--")  # "--": a prompt may start with "-"

# Screens that wait for a human; they replace the composer.
MODAL_MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "login",
        (
            "Sign in with ChatGPT",
            "Sign in with Device Code",
            "Sign in another way",
            "Use your own OpenAI API key",
            "Paste or type your API key",
            "Finish signing in via your browser",
        ),
    ),
    ("trust", ("Trust this folder?", "Do you trust the contents of this directory")),
    ("update", ("Skip until next version",)),
)
PERMISSION_MARKERS = (
    "Would you like to run the following command?",
    "Would you like to make the following edits?",
    "Would you like to grant these permissions?",
    "Do you want to approve network access",
    "Press enter to confirm or esc to cancel",
)
# Where a usage-limit cell says when it resets: "... or try again at 6:30 PM." (to the minute, in
# the CLI's local time).
RETRY_AT = re.compile(r"try again at ?(.*)")
PLACEHOLDERS = ("Ask Codex to do anything", "Ask a follow-up question")
BUSY_MARKER = "esc to interrupt"
# What a "■ ..." error cell above the composer means, first match wins.
ERROR_REASONS = (
    ("rate-limit", ("usage limit", "rate limit", "429", "Too Many Requests", "quota")),
    ("login", ("401 Unauthorized", "Not logged in", "log in again", "refresh token")),
    (
        "offline",
        (
            "stream disconnected",
            "Reconnecting",
            "error sending request",
            "failed to lookup address",
            "Connection failed",
            "network",
        ),
    ),
)
# A resume still loading its thread, and codex giving up on it (the TUI gone, on the main
# screen; the message wraps at the terminal's width).
RESUMING = "Resuming session\u2026"
RESUME_GAVE_UP = "Failed to resume session"
ROLLOUT_PATH = re.compile(r"\s*from\s*\S+?\.jsonl:\s*")  # blanks at a row's edge may be gone
GAVE_UP = re.compile(r"\s*".join(map(re.escape, "".join(RESUME_GAVE_UP.split()))))  # wrapped
RESUME_NOT_FOUND = "no rollout found"
SPINNER = range(0x2800, 0x2900)  # braille: the title's first character while a turn runs
PROMPT_MARK = "\u203a"  # codex marks the composer, prompts and chosen options with it
MENU_OPTION = re.compile(r"^\s*[\u203a>]\s*\d+\.\s")
STDERR_NOISE = (
    "WARNING: proceeding, even though we could not create PATH aliases",
    "Reading additional input from stdin...",
)
TOOL_ITEMS = frozenset(
    {"command_execution", "file_change", "mcp_tool_call", "web_search", "collab_tool_call"}
)
RESULT_FIELDS = ("status", "aggregated_output", "exit_code", "result", "error")

# codex 0.171.0 run with these writes ``ESC ] 9 ; text BEL`` when a turn ends (the text: the turn's
# last message; "Agent turn complete" when it had none) and when it asks for an approval
# ("Approval requested: <command>"; an edit's: "Codex wants to edit ..."). Three -c items.
NOTIFY_ARGS = (
    "-c",
    'tui.notification_method="osc9"',
    "-c",
    'tui.notification_condition="always"',
    "-c",
    'tui.notifications=["agent-turn-complete","approval-requested"]',
)
# What those notifications mean, first match wins: an approval's text is fixed, any other
# (unless a ConEmu-style "N;..." code) is a turn's last message. A last message that happens to
# begin like an approval is read as one; the screen, which every verdict reads, still decides.
OSC9: tuple[tuple[str, str, dict[str, Any]], ...] = (
    (r"^Approval requested", "attention", {"reason": "permission"}),
    (r"^Codex wants to edit", "attention", {"reason": "permission"}),
    (r"^(?!\d+;)", "turn-end", {"status": "ok"}),
)

# Silence: no line at all (codex writes an item only when it finishes, so a long command is
# quiet). Deadline: offline, codex prints "Reconnecting..." lines for ever, which keep the
# silence clock from running out; only a wall-clock limit ends such a turn.
TURN_SILENCE_S = 300.0
TURN_DEADLINE_S = 3600.0


def _seconds(environ: Mapping[str, str], name: str, default: float) -> float | None:
    """A deadline from the adapter's environment; ``0`` turns it off."""
    raw = environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = default
    return value if value > 0 else None


class CodexAdapter(Adapter):
    provider = "codex"
    cli = VendorCli(
        install="npm install -g @openai/codex",
        line="0.171",
        tested="0.171.0",
        pinned="npm install -g @openai/codex@0.171.0",
        home_env=HOME_ENV,
        home_dir=HOME_DIR,
        login="run `codex login` with the same CODEX_HOME (codex exec also takes CODEX_API_KEY)",
    )
    # The TUI reads text and an Enter arriving together as a paste, so the Enter only adds a line
    # to the composer (seen with codex 0.171.0 in a PTY): submit apart, after a pause.
    submit_delay_s = 0.3
    osc9 = OSC9

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        # The adapter host's environment (the node's): deadlines are per adapter, and it is the
        # base of every agent's environment, so it also supplies CODEX_HOME/HOME defaults.
        self.environ = dict(os.environ if environ is None else environ)
        self.turn_silence_s = _seconds(self.environ, "ROOST_CODEX_TURN_SILENCE_S", TURN_SILENCE_S)
        self.turn_deadline_s = _seconds(
            self.environ, "ROOST_CODEX_TURN_DEADLINE_S", TURN_DEADLINE_S
        )

    def _setting(self, ctx: LaunchContext, name: str) -> str | None:
        return ctx.env.get(name) or self.environ.get(name) or None

    def _bin(self, ctx: LaunchContext) -> str:
        return self.named_program(ctx.env) or self.named_program(self.environ) or self.provider

    # -- launches ------------------------------------------------------------------------------

    def fresh(self, ctx: LaunchContext) -> Launch:
        # No ``-C``: the process already starts in the record's cwd, which codex takes as its root.
        return Launch(argv=[self._bin(ctx), "--no-daemon", *NOTIFY_ARGS])

    def resume(self, provider_session: str, ctx: LaunchContext) -> Launch:
        argv = [self._bin(ctx), "resume", provider_session, "--no-daemon", *NOTIFY_ARGS]
        return Launch(argv=argv, provider_session=provider_session)

    def fork(self, provider_session: str, ctx: LaunchContext) -> Launch:
        """``codex fork SRC``: a new thread from a copy of SRC's; codex picks the new id, which
        is discovered as a fresh session's is (its rollout file created since the launch)."""
        return Launch(argv=[self._bin(ctx), "fork", provider_session, "--no-daemon"])

    def fork_turn(
        self, source: str, provider_session: str | None, text: str, ctx: LaunchContext
    ) -> Launch:
        """``codex exec fork SRC``: the fork's first turn; ``thread.started`` names the new id."""
        return Launch(argv=[self._bin(ctx), "exec", "fork", source, *EXEC_FLAGS, text])

    def turn(
        self, provider_session: str | None, text: str, ctx: LaunchContext, *, first: bool
    ) -> Launch:
        flags = EXEC_FLAGS
        if first:
            return Launch(argv=[self._bin(ctx), "exec", *flags, text])
        if not provider_session:
            # Starting a new thread here would silently drop the conversation.
            raise RoostError(
                "no-provider-session",
                "codex needs the thread id of the conversation to continue it",
            )
        argv = [self._bin(ctx), "exec", "resume", provider_session, *flags, text]
        return Launch(argv=argv, provider_session=provider_session)

    # -- exec --json lines ---------------------------------------------------------------------

    def parse(self, line: str, stream: str) -> tuple[list[Event], dict[str, Any]]:
        if stream == "stderr":
            return _stderr(line)
        try:
            obj = json.loads(line)
        except ValueError:
            return _stderr(line)
        if not isinstance(obj, dict):
            return [], {}
        return _exec_event(obj)

    # -- screens -------------------------------------------------------------------------------

    def classify(
        self, screen: str, *, exited: bool, evidence: Evidence | None = None
    ) -> Classification:
        if exited or (evidence is not None and evidence.agent is None):
            return Classification(EXITED, detail=last_line(screen))
        if evidence is not None and _idle_shell(evidence):
            return Classification(SHELL)
        lines = [line.rstrip() for line in screen.splitlines()]
        composer = _composer(lines)
        # A dialog replaces the composer: the same words above it are conversation text.
        for reason, markers in MODAL_MARKERS:
            hit = _last_index(lines, markers)
            if hit is not None and (composer is None or hit > composer):
                return Classification(ATTENTION, reason, lines[hit].strip(" \u2502"))
        asked = _last_index(lines, PERMISSION_MARKERS)
        if asked is not None and (composer is None or asked > composer):
            return Classification(ATTENTION, "permission", _asked(lines))
        status = _last_index(lines, (BUSY_MARKER,))
        if status is not None:
            if "Reconnecting" in lines[status]:
                return Classification(ATTENTION, "offline", lines[status].strip())
            return Classification(BUSY, detail=lines[status].strip())
        if composer is not None:
            trouble = _error_above(lines, composer)
            return trouble or Classification(READY)
        if any(MENU_OPTION.match(line) for line in lines):
            return Classification(ATTENTION, "picker", last_line(screen).strip())
        return Classification(STARTING)

    def classify_session(
        self, screen: str, *, exited: bool, evidence: Evidence | None, view: SessionView
    ) -> Classification:
        """Once an answer streams, codex 0.171.0 erases its "Working ... esc to interrupt" line:
        a composer under streaming text reads ready. What still says busy is a spinner leading
        the window title, and the rollout file: a ``task_started`` with no end since launch."""
        seen = self.classify(screen, exited=exited, evidence=evidence)
        if seen.reason == "rate-limit" and view.ctx is not None and view.ctx.env.get("TZ"):
            lines = [line.rstrip() for line in screen.splitlines()]  # the reset in codex's zone
            composer = _composer(lines)
            tz = limits.zone(view.ctx.env["TZ"])
            found = _error_above(lines, composer, tz) if composer is not None and tz else None
            return found or seen
        if seen.state != READY:
            return seen
        if view.title[:1] and ord(view.title[0]) in SPINNER:  # the detail without the frame:
            return Classification(BUSY, detail=f"working: {view.title[1:].strip()}")  # no churn
        if view.ctx is not None and view.provider_session:
            path = find_rollout(self.codex_home(view.ctx) / "sessions", view.provider_session)
            if path is not None and turn_open(path, view.since):
                return Classification(BUSY, detail="rollout: a turn started and not ended")
        return seen

    def verify_resume(
        self,
        screen: str,
        provider_session: str,
        samples: list[Evidence],
        ctx: LaunchContext | None = None,
    ) -> ResumeCheck:
        """Resumed only on evidence that the thread is there: its rollout file, and a screen past
        "Resuming session…". codex draws a composer before it has loaded the thread, and gives
        up afterwards ("Failed to resume session ... no rollout found"), so a composer alone
        proves nothing."""
        # codex's error wraps at the terminal's edge wherever its path puts it, a space at a
        # row's end dropped with the row's trailing blanks: matched with no blanks at all
        flat = "".join(screen.split())
        if _squeezed(RESUME_GAVE_UP) in flat:
            reason = "not-found" if _squeezed(RESUME_NOT_FOUND) in flat else "exited"
            return ResumeCheck(RESUME_FAILED, reason, _gave_up(screen))
        check = super().verify_resume(screen, provider_session, samples, ctx)
        if check.outcome != RESUMED:
            return check
        if RESUMING in screen:
            return ResumeCheck(None)  # still loading: the verdict comes with what follows
        if ctx is not None and find_rollout(self.codex_home(ctx) / "sessions", provider_session):
            return check
        return ResumeCheck(None)  # no thread file (yet): wait for codex's own word, or exit

    # -- identity ------------------------------------------------------------------------------

    def discover_identity(self, screen: str, ctx: LaunchContext, *, since: float) -> str | None:
        hints = RESUME_HINT.findall(screen)
        if hints:
            return str(hints[-1])
        sessions = self.codex_home(ctx) / "sessions"
        return first_thread(sessions, since, ctx.cwd, pty=ctx.mode == "pty")

    def usage(self, provider_session: str, ctx: LaunchContext) -> tuple[str, Usage] | None:
        """A pty thread's total from its rollout's token counts (a stream turn's come with its
        ``turn.completed``)."""
        if ctx.mode != "pty":
            return None
        path = find_rollout(self.codex_home(ctx) / "sessions", provider_session)
        totals = codex_totals(path) if path is not None else None
        return ("files", totals) if totals is not None else None

    def codex_home(self, ctx: LaunchContext) -> Path:
        home = self._setting(ctx, HOME_ENV)
        if home:
            return Path(home)
        user_home = self._setting(ctx, "HOME")
        return (Path(user_home) if user_home else Path.home()) / HOME_DIR

    def login_state(self, path: str, env: dict[str, str], run: Runner) -> tuple[str, str]:
        """``codex login status`` says in words (and which method) whether it is logged in."""
        how = "codex login status"
        code, out = run([path, "login", "status"], env)
        if code == 0 and "logged in" in out.lower():
            method = "api key" if "api key" in out.lower() else "chatgpt"
            return "logged-in", f"{how}: {method}"
        if "not logged in" in out.lower():
            return "logged-out", how
        return "unknown", how


# -- screen helpers ----------------------------------------------------------------------------


def _last_index(lines: list[str], markers: tuple[str, ...]) -> int | None:
    for i in range(len(lines) - 1, -1, -1):
        if any(marker in lines[i] for marker in markers):
            return i
    return None


def _composer(lines: list[str]) -> int | None:
    """The line of the prompt composer: its placeholder, or (text typed into it) a line opening
    with ``PROMPT_MARK`` among the last few that is not a menu option."""
    placeholder = _last_index(lines, PLACEHOLDERS)
    if placeholder is not None:
        return placeholder
    filled = [i for i, line in enumerate(lines) if line.strip()]
    for i in reversed(filled[-6:]):
        if lines[i].lstrip().startswith(PROMPT_MARK) and not MENU_OPTION.match(lines[i]):
            return i
    return None


def _gave_up(screen: str) -> str:
    """Why codex gave up a resume, without the host path of its rollout file."""
    flat = screen.replace("\n", "")
    found = GAVE_UP.search(flat)
    why = flat[found.start() if found else 0 :].split("(code", 1)[0]
    return ROLLOUT_PATH.sub(": ", why).strip()[:300]


def _asked(lines: list[str]) -> str:
    """The command (``$ ...``) or question of an approval, for the detail."""
    for line in reversed(lines):
        if line.strip().startswith("$ "):
            return line.strip()
    hit = _last_index(lines, PERMISSION_MARKERS[:-1])
    return lines[hit].strip() if hit is not None else "approval requested"


def _error_above(
    lines: list[str], composer: int, tz: tzinfo | None = None
) -> Classification | None:
    """An error cell (``■ ...``) of the last turn, between the last prompt and the composer; a
    usage limit with the reset time its cell shows ("try again at 6:30 PM.", in ``tz``)."""
    for i in range(composer - 1, -1, -1):
        text = lines[i].strip()
        if text.startswith(PROMPT_MARK):
            return None
        if not text.startswith("■"):
            continue
        for reason, markers in ERROR_REASONS:
            if any(marker.lower() in text.lower() for marker in markers):
                if reason != "rate-limit":
                    return Classification(ATTENTION, reason, text)
                return Classification(ATTENTION, reason, text, reset_at=_retry_at(lines, i, tz))
    return None


def _retry_at(lines: list[str], cell: int, tz: tzinfo | None) -> float | None:
    """The reset an error cell shows: its lines joined as they were cut at the terminal's edge
    (codex wraps inside words), then the time after "try again at"."""
    end = next((j for j in range(cell + 1, len(lines)) if not lines[j].strip()), len(lines))
    text = "".join(line.strip() for line in lines[cell:end])
    at = RETRY_AT.search(text)
    return limits.reset_time(at.group(1), time.time(), tz) if at else None


def _idle_shell(evidence: Evidence) -> bool:
    fg = evidence.foreground()
    if fg is None or fg.name not in SHELLS or fg.pid != fg.pgid:
        return False
    return not any(d.ppid == fg.pid for d in evidence.descendants)


# -- exec --json helpers -----------------------------------------------------------------------


def _stderr(line: str) -> tuple[list[Event], dict[str, Any]]:
    text = line.rstrip("\n")
    if not text.strip() or text.startswith(STDERR_NOISE):
        return [], {}
    events: list[Event] = [{"kind": "session.stderr", "data": {"line": text[:4096]}}]
    if text.startswith("Error: "):  # fatal: an unknown thread id, an untrusted folder, ...
        return events, {"is_error": True, "error": text[len("Error: ") :]}
    if text.startswith("Not inside a trusted directory"):
        return events, {"is_error": True, "error": text}
    return events, {}


def _exec_event(obj: dict[str, Any]) -> tuple[list[Event], dict[str, Any]]:
    kind = obj.get("type")
    if kind == "thread.started" and isinstance(obj.get("thread_id"), str):
        return [], {"session_id": obj["thread_id"]}
    if kind == "turn.completed":
        facts: dict[str, Any] = {"is_error": False, "error": None, "completed": True}
        if (used := u.from_openai(obj.get("usage"))) is not None and not u.empty(used):
            facts["usage"] = used
        return [], facts
    if kind == "turn.failed":
        error = obj.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        return [], {"is_error": True, "error": str(message or "the turn failed")}
    if kind == "error":
        message = str(obj.get("message", ""))
        events: list[Event] = [{"kind": "session.stderr", "data": {"line": message[:4096]}}]
        if message.startswith("Reconnecting..."):  # codex retries on its own, for ever offline:
            return events, {"error": message}  # why, should roost's deadline end the turn
        return events, {"is_error": True, "error": message}
    item = obj.get("item")
    if kind in ("item.started", "item.completed") and isinstance(item, dict):
        return _item(item, started=kind == "item.started")
    return [], {}


def _item(item: dict[str, Any], *, started: bool) -> tuple[list[Event], dict[str, Any]]:
    kind = item.get("type")
    if kind == "agent_message" and not started:
        text = str(item.get("text", ""))
        return [{"kind": "session.output", "data": {"text": text}}], {"result": text}
    if kind == "error" and not started:  # a warning: codex carries on
        line = f"warning: {item.get('message', '')}"
        return [{"kind": "session.stderr", "data": {"line": line[:4096]}}], {}
    if kind not in TOOL_ITEMS:
        return [], {}
    if started:
        detail = {k: v for k, v in item.items() if k not in ("id", "type", *RESULT_FIELDS)}
        data = {"id": item.get("id"), "name": kind, "input": detail}
        return [{"kind": "session.tool_call", "data": data}], {}
    return [{"kind": "session.tool_result", "data": _tool_result(item)}], {}


def _tool_result(item: dict[str, Any]) -> dict[str, Any]:
    status, code = item.get("status"), item.get("exit_code")
    failed = status in ("failed", "declined") or bool(item.get("error"))
    failed = failed or (isinstance(code, int) and code != 0)
    if item.get("type") == "command_execution":
        content = str(item.get("aggregated_output") or "")
    else:
        rest = {k: v for k, v in item.items() if k not in ("id", "type", "status")}
        content = json.dumps(rest, ensure_ascii=False)
    return {"id": item.get("id"), "is_error": failed, "content": content}


def _squeezed(text: str) -> str:
    """``text`` without its blanks (as a wrapped screen is matched)."""
    return "".join(text.split())
