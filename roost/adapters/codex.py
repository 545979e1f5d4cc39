"""The ``codex`` provider: OpenAI Codex CLI 0.171.0 (PROVIDERS.md section 2).

Interactive sessions run ``codex --no-daemon`` so the turn stays inside the supervised process
(without it the TUI starts a detached app-server daemon that outlives it). Codex picks its own
session id (a UUIDv7, no flag to choose one), so identity is discovered: from the exit hint
``codex resume <uuid>`` on the screen, or from the rollout file codex writes under
``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<uuid>.jsonl``, whose first line is a
``session_meta`` naming the cwd. Stream mode runs one ``codex exec --json`` per turn; its JSONL
(``thread.started`` carries the id) becomes roost events here.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from roost.adapters.base import (
    ATTENTION,
    BUSY,
    EXITED,
    READY,
    SHELL,
    STARTING,
    Adapter,
    Classification,
    Launch,
    LaunchContext,
    last_line,
)
from roost.adapters.evidence import SHELLS, Evidence
from roost.broker.errors import RoostError

Event = dict[str, Any]

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
RESUME_HINT = re.compile(rf"codex resume ({UUID})")
ROLLOUT_NAME = re.compile(rf"^rollout-.+-({UUID})\.jsonl$")

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
    # The TUI reads text and an Enter arriving together as a paste, so the Enter only adds a line
    # to the composer (seen with codex 0.171.0 in a PTY): submit apart, after a pause.
    submit_delay_s = 0.3

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
        return self._setting(ctx, "ROOST_CODEX_BIN") or "codex"

    # -- launches ------------------------------------------------------------------------------

    def fresh(self, ctx: LaunchContext) -> Launch:
        # No ``-C``: the process already starts in the record's cwd, which codex takes as its root.
        return Launch(argv=[self._bin(ctx), "--no-daemon"])

    def resume(self, provider_session: str, ctx: LaunchContext) -> Launch:
        argv = [self._bin(ctx), "resume", provider_session, "--no-daemon"]
        return Launch(argv=argv, provider_session=provider_session)

    def turn(
        self, provider_session: str | None, text: str, ctx: LaunchContext, *, first: bool
    ) -> Launch:
        flags = ["--json", "--skip-git-repo-check", "--"]  # "--": a prompt may start with "-"
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

    # -- identity ------------------------------------------------------------------------------

    def discover_identity(self, screen: str, ctx: LaunchContext, *, since: float) -> str | None:
        hints = RESUME_HINT.findall(screen)
        if hints:
            return str(hints[-1])
        return self._from_rollouts(ctx, since)

    def codex_home(self, ctx: LaunchContext) -> Path:
        home = self._setting(ctx, "CODEX_HOME")
        if home:
            return Path(home)
        user_home = self._setting(ctx, "HOME")
        return (Path(user_home) if user_home else Path.home()) / ".codex"

    def _from_rollouts(self, ctx: LaunchContext, since: float) -> str | None:
        """The oldest thread started since the launch in this cwd: with two sessions launched in
        one cwd, the later launch never sees the earlier one's thread (it predates ``since``)."""
        found: list[tuple[float, str]] = []
        for path in _rollouts(self.codex_home(ctx) / "sessions", since):
            match = ROLLOUT_NAME.match(path.name)
            if match is None:
                continue
            ident = match.group(1)
            started = uuid7_time(ident)
            if started is None or started < since - 0.05:  # ms resolution of the id
                continue
            if _meta_matches(path, ident, ctx):
                found.append((started, ident))
        return min(found)[1] if found else None


# -- identity helpers --------------------------------------------------------------------------


def uuid7_time(ident: str) -> float | None:
    """The creation time (epoch seconds) in a UUIDv7, None for another version."""
    digits = ident.replace("-", "")
    if len(digits) != 32 or digits[12] != "7":
        return None
    return int(digits[:12], 16) / 1000


def _rollouts(sessions: Path, since: float) -> Iterator[Path]:
    """Rollout files in the day folders that can hold a thread started since ``since`` (folders
    are named by codex's local time, so the day before is read as well)."""
    start = dt.date.fromtimestamp(since) - dt.timedelta(days=1)
    for year in _numbered(sessions, start.year):
        for month in _numbered(year, 1):
            for day in _numbered(month, 1):
                named = (int(year.name), int(month.name), int(day.name))
                if named >= (start.year, start.month, start.day):
                    yield from day.glob("rollout-*.jsonl")


def _numbered(folder: Path, least: int) -> Iterator[Path]:
    """Sub-folders named by a number at least ``least``."""
    if folder.is_dir():
        yield from (p for p in folder.iterdir() if p.name.isdigit() and int(p.name) >= least)


def _meta_matches(path: Path, ident: str, ctx: LaunchContext) -> bool:
    try:
        with path.open(encoding="utf-8") as fh:
            meta = json.loads(fh.readline())
    except (OSError, ValueError, UnicodeDecodeError):
        return False  # still being written, or not codex's
    payload = meta.get("payload") if isinstance(meta, dict) else None
    if not isinstance(payload, dict) or meta.get("type") != "session_meta":
        return False
    if payload.get("id", ident) != ident or not isinstance(payload.get("cwd"), str):
        return False
    source = payload.get("source", "cli")
    # A pty session is never an exec turn or a sub-agent (whose source is a map).
    if ctx.mode == "pty" and (not isinstance(source, str) or source == "exec"):
        return False
    return bool(os.path.realpath(payload["cwd"]) == os.path.realpath(ctx.cwd))


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


def _asked(lines: list[str]) -> str:
    """The command (``$ ...``) or question of an approval, for the detail."""
    for line in reversed(lines):
        if line.strip().startswith("$ "):
            return line.strip()
    hit = _last_index(lines, PERMISSION_MARKERS[:-1])
    return lines[hit].strip() if hit is not None else "approval requested"


def _error_above(lines: list[str], composer: int) -> Classification | None:
    """An error cell (``■ ...``) of the last turn, between the last prompt and the composer."""
    for i in range(composer - 1, -1, -1):
        text = lines[i].strip()
        if text.startswith(PROMPT_MARK):
            return None
        if not text.startswith("■"):
            continue
        for reason, markers in ERROR_REASONS:
            if any(marker.lower() in text.lower() for marker in markers):
                return Classification(ATTENTION, reason, text)
    return None


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
        return [], {"is_error": False, "error": None, "completed": True}
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
