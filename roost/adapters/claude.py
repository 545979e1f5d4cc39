"""The ``claude`` provider: Claude Code 2.1.x.

Identity is assigned up front: a fresh launch is ``claude --session-id <new uuid4>``, a resume is
``claude --resume <uuid>``, and a stream-mode turn is ``claude -p --output-format stream-json
--verbose`` with one of the two. ``ROOST_CLAUDE_BIN`` in the record's environment names another
binary (a pinned install, or the test stand-in ``tests/fakes/claude``).

Screens are read the way a person reads them. Claude draws its input box, a prompt line
(``PROMPT``) between two rules, with a footer below that says ``esc to interrupt`` while it works.
Every screen that needs a human (onboarding and login, folder trust, API key, permission, the resume
picker) takes the box's place, so with no box the lowest such marker on the screen names the reason.
With a box, only the answer since the last prompt is searched, for messages that stop the session
(not logged in, rate limit, offline, update), and the footer, where an idle claude without
credentials says ``Not logged in · run /login``. A start-up question (``Make auto mode your default
permission mode?``, or any question over a ``PROMPT`` choice in the box's place) is ``question``.
What needs a human is reported, never answered.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from roost import hooks
from roost.adapters import limits, stream_json
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
    Runner,
    VendorCli,
)
from roost.adapters.evidence import SHELLS, Evidence, ProcessInfo
from roost.adapters.usage_files import claude_totals
from roost.wire.errors import RoostError
from roost.wire.usage import Usage

UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
# The exit hint; claude 2.1.332 repeats a short enough ``--settings FILE`` before ``--resume``.
HINT = re.compile(
    r"^claude (?:--settings \S+ )?--resume ([0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12})$"
)
NO_CONVERSATION = re.compile(r"No conversation found with session ID")
PROMPT = "\N{HEAVY RIGHT-POINTING ANGLE QUOTATION MARK ORNAMENT}"
RULE = re.compile(r"^─{8,}$")
BUSY_FOOTER = "esc to interrupt"
# The working spinner above the box, "✽ Sketching… (12s · ↓ 3 tokens)"; once done it reads
# "✻ Cogitated for 20s · done 4:49 AM", with no ellipsis.
SPINNER = re.compile(r"^[^\w\s]\s+[A-Z][\w ]*…")
# When a subscriber's usage limit resets: "resets 6:34pm (UTC)", in the message and the footer.
RESETS = re.compile(r"(?:resets?|continue automatically) (?:at )?(.*)")
# Claude continues a subscriber's session by itself at the reset (the footer below the box says
# "Continuing automatically at 6:34pm · Esc to cancel", then "Continuing shortly").
SELF_CONTINUES = re.compile(r"Continuing (?:automatically|shortly)")
# ... and says so above the answer that follows: "● Usage limit reset · Continuing automatically".
LIMIT_LIFTED = re.compile(r"Usage limit reset")
STDERR_ERROR = re.compile(r"^\s*(?:Error:|No conversation found)")

Marker = tuple[str, re.Pattern[str]]

# Messages that stop a session, even below an idle input box. The usage limit's wording is from
# captures (a subscriber's login: "You've hit your 5-hour limit · resets 6:34pm (UTC)"; an API
# key's: "API Error: Request rejected (429) · ..."); the update wording is from Claude Code's
# strings, not from a capture.
MESSAGES: tuple[Marker, ...] = (
    ("login", re.compile(r"Not logged in|Please run /login|Invalid API key|OAuth token.*expired")),
    (
        "offline",
        re.compile(
            r"Unable to connect to (?:Anthropic services|API)|Failed to connect to api\.anthropic"
            r"|API Error: Connection error"
        ),
    ),
    (
        "rate-limit",
        re.compile(
            r"(?i:usage limit reached)|limit reached [·∙] resets|You've hit your [\w -]*limit"
            r"|API Error: 429|rate_limit_error|Request rejected \(429\)"
        ),
    ),
    ("update", re.compile(r"needs an update|is required to continue")),
)

# Screens that take the input box's place; a line is tested against them in this order.
DIALOGS: tuple[Marker, ...] = (
    ("api-key", re.compile(r"Detected a custom API key|Do you want to use this API key\?")),
    (
        "trust",
        re.compile(
            r"Is this a project you created or one you trust|Yes, I trust this folder"
            r"|Do you trust the files in this folder"
        ),
    ),
    (
        "permission",
        re.compile(r"Do you want to (?:proceed|make this edit|create|allow|run)\b"),
    ),
    ("picker", re.compile(r"^\s*Resume session$|Enter to resume")),
    ("question", re.compile(r"Make auto mode your default permission mode\?")),
    (
        "login",
        re.compile(
            r"Select login method|Paste code here if prompted|Choose the text style"
            r"|Security notes:|Let's get started\.|Press Enter to continue"
        ),
    ),
    *MESSAGES,
)
# Below the input box: the footer of an idle claude that has no credentials.
FOOTER: tuple[Marker, ...] = (("login", re.compile(r"Not logged in")),)
# A choice of claude's own in the box's place: an indented PROMPT option under a question.
CHOICE = re.compile(rf"^\s+{PROMPT} \S")
QUESTION = re.compile(r"^\s*\S.*\?$")


def is_session_id(value: str) -> bool:
    """Claude takes only a UUID as a session id (anything else is a search term to it)."""
    return UUID_RE.match(value) is not None


class ClaudeAdapter(Adapter):
    provider = "claude"
    cli = VendorCli(
        install="npm install -g @anthropic-ai/claude-code",
        line="2.1",
        tested="2.1.332",
        pinned="npm install -g @anthropic-ai/claude-code@2.1.332",
        home_env="CLAUDE_CONFIG_DIR",
        home_dir=".claude",
        login="run `claude` and /login (or `claude setup-token`), with the same CLAUDE_CONFIG_DIR",
    )

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        # the adapter host's environment (the node's), the base of every agent's: it supplies
        # the CLAUDE_CONFIG_DIR and HOME a record's env does not set
        self.environ = dict(os.environ if environ is None else environ)

    def _bin(self, ctx: LaunchContext) -> str:
        return self.named_program(ctx.env) or self.provider

    def fresh(self, ctx: LaunchContext) -> Launch:
        # a stream-mode record runs no process between turns: the supervisor only uses ``turn``
        session_id = str(uuid.uuid4())
        return with_hooks(Launch([self._bin(ctx), "--session-id", session_id], {}, session_id), ctx)

    def resume(self, provider_session: str, ctx: LaunchContext) -> Launch:
        _check_id(provider_session, "resume")
        launch = Launch([self._bin(ctx), "--resume", provider_session], {}, provider_session)
        return with_hooks(launch, ctx)

    def fork(self, provider_session: str, ctx: LaunchContext) -> Launch:
        """``--resume SRC --fork-session --session-id NEW``: claude copies the conversation into
        a new session whose id roost assigns (``--session-id`` with ``--resume`` needs
        ``--fork-session``); the source's file is left as it was."""
        _check_id(provider_session, "fork")
        new = str(uuid.uuid4())
        argv = [self._bin(ctx), *_forked(provider_session, new)]
        return with_hooks(Launch(argv=argv, provider_session=new), ctx)

    def resume_fork(self, provider_session: str, source: str, ctx: LaunchContext) -> Launch:
        """claude writes a fork's file only at its first message: a fork stopped before one
        has no conversation to resume ("No conversation found"), so it forks again under the
        same id (free, since no file has it)."""
        _check_id(provider_session, "resume")
        if self.transcript(provider_session, ctx) is not None:
            return self.resume(provider_session, ctx)
        _check_id(source, "fork")
        argv = [self._bin(ctx), *_forked(source, provider_session)]
        return with_hooks(Launch(argv=argv, provider_session=provider_session), ctx)

    def transcript(self, provider_session: str, ctx: LaunchContext) -> Path | None:
        """The conversation's file, ``<config dir>/projects/<escaped cwd>/<id>.jsonl``, looked up
        under every project directory (a resume from another cwd finds it too); None when none."""
        assert self.cli is not None
        env = {**self.environ, **ctx.env}
        home = env.get(self.cli.home_env)
        if not home:
            home = str(Path(env.get("HOME") or Path.home()) / self.cli.home_dir)
        return next(iter(Path(home).glob(f"projects/*/{provider_session}.jsonl")), None)

    def fork_turn(
        self, source: str, provider_session: str | None, text: str, ctx: LaunchContext
    ) -> Launch:
        _check_id(source, "fork")
        new = provider_session or str(uuid.uuid4())
        _check_id(new, "provider_session")
        argv = [self._bin(ctx), "-p", "--output-format", "stream-json", "--verbose"]
        argv += [*_forked(source, new), "--", text]
        return Launch(argv=argv, provider_session=new)

    def turn(
        self, provider_session: str | None, text: str, ctx: LaunchContext, *, first: bool
    ) -> Launch:
        if provider_session is None:
            if not first:
                raise RoostError("no-provider-session", "claude resumes a turn by its session id")
            provider_session = str(uuid.uuid4())
        _check_id(provider_session, "provider_session")
        flag = "--session-id" if first else "--resume"
        argv = [self._bin(ctx), "-p", "--output-format", "stream-json", "--verbose"]
        # the prompt goes after ``--``, so a text starting with "-" is never read as a flag
        argv += [flag, provider_session, "--", text]
        return Launch(argv=argv, provider_session=provider_session)

    def parse(self, line: str, stream: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        if stream != "stderr":
            return stream_json.parse_line(line)
        events, facts = super().parse(line, stream)
        if STDERR_ERROR.match(line):
            facts = {**facts, "error": line.strip()[:1000]}
        return events, facts

    def classify(
        self, screen: str, *, exited: bool, evidence: Evidence | None = None
    ) -> Classification:
        if exited:
            seen = read_screen(screen)
            why = f"{seen.reason}: {seen.detail}" if seen.state == ATTENTION else seen.detail
            return Classification(EXITED, detail=why)
        shell = idle_shell(evidence) if evidence is not None else None
        if shell is not None:
            return Classification(SHELL, detail=f"{shell.name} (pid {shell.pid}) is in front")
        return read_screen(screen)

    def usage(self, provider_session: str, ctx: LaunchContext) -> tuple[str, Usage] | None:
        """A pty session's tokens from its transcript (a stream turn's come with its result;
        the cost, which the transcript lacks, from the statusline)."""
        if ctx.mode != "pty" or not is_session_id(provider_session):
            return None
        env = {**os.environ, **ctx.env}
        home = Path(env.get("CLAUDE_CONFIG_DIR") or Path(env.get("HOME") or "~") / ".claude")
        for transcript in home.expanduser().glob(f"projects/*/{provider_session}.jsonl"):
            if (totals := claude_totals(transcript)) is not None:
                return "files", totals
        return None

    def discover_identity(self, screen: str, ctx: LaunchContext, *, since: float) -> str | None:
        """The id in the exit hint "Resume this session with: claude --resume <uuid>"."""
        found = [m.group(1) for m in map(HINT.match, _lines(screen)) if m]
        return found[-1].lower() if found else None

    def login_state(self, path: str, env: dict[str, str], run: Runner) -> tuple[str, str]:
        """``claude auth status`` prints JSON: ``loggedIn`` and the ``authMethod``."""
        how = "claude auth status"
        _, out = run([path, "auth", "status"], env)
        try:
            doc = json.loads(out[out.index("{") :])
        except ValueError:
            return "unknown", how
        method = doc.get("authMethod") if isinstance(doc.get("authMethod"), str) else "?"
        return ("logged-in", f"{how}: {method}") if doc.get("loggedIn") else ("logged-out", how)


def _forked(source: str, new: str) -> list[str]:
    return ["--resume", source, "--fork-session", "--session-id", new]


# -- hooks ---------------------------------------------------------------------------------------

SETTINGS_FILE = "claude-settings.json"  # in the record's session directory


def with_hooks(launch: Launch, ctx: LaunchContext) -> Launch:
    """``launch`` with ``--settings`` naming the record's own settings file (in ``files``, for
    the node to write): observer-only hooks that run ``roost signal claude``. Only for a pty
    session whose session directory is known; never the user's ``settings.json``, whose hooks
    claude runs beside these (its ``--settings`` hooks are merged with the user's)."""
    if ctx.mode != "pty" or not ctx.session_dir:
        return launch
    path = str(PurePath(ctx.session_dir) / SETTINGS_FILE)
    settings = json.dumps(hook_settings(ctx), indent=1)
    argv = [launch.argv[0], "--settings", path, *launch.argv[1:]]
    return Launch(argv, launch.env, launch.provider_session, {SETTINGS_FILE: settings})


def hook_settings(ctx: LaunchContext) -> dict[str, Any]:
    """The per-record settings: a command hook per event of ``hooks.CLAUDE_EVENTS``, and the
    status line (claude's only report of cost and tokens in a live session) unless the user
    has one of their own: a ``statusLine`` in ``--settings`` replaces theirs, so theirs is kept
    and the status line's usage is not sent."""
    command = hooks.hook_command("claude")
    each = {"type": "command", "command": command, "timeout": hooks.HOOK_TIMEOUT_S}
    settings: dict[str, Any] = {
        "hooks": {event: [{"hooks": [each]}] for event in hooks.CLAUDE_EVENTS}
    }
    if not users_status_line(ctx):
        line = hooks.hook_command("claude-statusline")
        settings["statusLine"] = {"type": "command", "command": line, "padding": 0}
    return settings


def users_status_line(ctx: LaunchContext) -> bool:
    """Does a settings file of the user's (``CLAUDE_CONFIG_DIR``'s or the project's) set a
    ``statusLine``? One that cannot be read sets none."""
    env = {**os.environ, **ctx.env}
    home = env.get("CLAUDE_CONFIG_DIR") or os.path.join(env.get("HOME") or "~", ".claude")
    project = os.path.join(ctx.cwd, ".claude")
    for path in (
        os.path.join(os.path.expanduser(home), "settings.json"),
        os.path.join(project, "settings.json"),
        os.path.join(project, "settings.local.json"),
    ):
        try:
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("statusLine"):
            return True
    return False


def _check_id(value: str, name: str) -> None:
    if not is_session_id(value):
        raise RoostError(
            "bad-request", f"a claude session id is a UUID, not {value[:64]!r}", {"field": name}
        )


# -- screens ---------------------------------------------------------------------------------------


def read_screen(screen: str, now: float | None = None) -> Classification:
    """The classification a screen alone supports (no process evidence); ``now`` (epoch seconds,
    None: the clock's) dates a reset time shown without a date."""
    lines = _lines(screen)
    box = input_box(lines)
    below = lines[box[1] + 1 :] if box else lines
    for line in below:
        if HINT.match(line) or NO_CONVERSATION.search(line):
            return Classification(EXITED, detail=line.strip())
    if box is None:
        found = _lowest(lines, DIALOGS) or _question(lines)
        return Classification(ATTENTION, *found) if found else Classification(STARTING)
    history = [line for line in lines[: box[0]] if line.strip()]
    logged_out = _lowest(below, FOOTER)
    if logged_out:
        return Classification(ATTENTION, *logged_out)
    if any(BUSY_FOOTER in line for line in below) or (history and SPINNER.match(history[-1])):
        return Classification(BUSY)
    found = _lowest(_last_exchange(history), MESSAGES)
    if found and found[0] == "rate-limit":
        return _limit(found[1], _last_exchange(history) + below, now)
    return Classification(ATTENTION, *found) if found else Classification(READY)


def _limit(detail: str, lines: list[str], now: float | None) -> Classification:
    """A usage limit: the reset time the message or the footer shows, and whether claude
    continues by itself then."""
    when = now if now is not None else time.time()
    resets = [limits.reset_time(m.group(1), when) for m in map(RESETS.search, lines) if m]
    reset = next((at for at in resets if at is not None), None)
    itself = any(SELF_CONTINUES.search(line) for line in lines)
    return Classification(ATTENTION, "rate-limit", detail, reset_at=reset, self_continues=itself)


def input_box(lines: list[str]) -> tuple[int, int] | None:
    """The lowest input box: the indexes of its top and bottom rules (prompt line under the top)."""
    for top in range(len(lines) - 2, -1, -1):
        if RULE.match(lines[top]) and lines[top + 1].startswith(PROMPT):
            for bottom in range(top + 2, len(lines)):
                if RULE.match(lines[bottom]):
                    return top, bottom
    return None


def _lines(screen: str) -> list[str]:
    return [line.rstrip() for line in screen.splitlines()]


def _lowest(lines: list[str], markers: tuple[Marker, ...]) -> tuple[str, str] | None:
    """The reason of the lowest line any marker matches, and that line."""
    for line in reversed(lines):
        for reason, pattern in markers:
            if pattern.search(line):
                return reason, line.strip()[:200]
    return None


def _question(lines: list[str]) -> tuple[str, str] | None:
    """A question claude asks with a list of choices, none of the known dialogs: the question."""
    choice = next((i for i in range(len(lines) - 1, -1, -1) if CHOICE.match(lines[i])), None)
    if choice is None:
        return None
    asked = [line for line in lines[max(0, choice - 12) : choice] if QUESTION.match(line)]
    return ("question", asked[-1].strip()[:200]) if asked else None


def _last_exchange(history: list[str]) -> list[str]:
    """What was shown since the last submitted prompt (all of it when there was none), or since
    claude continued by itself after a usage limit."""
    starts = [i for i, line in enumerate(history) if line.startswith(PROMPT)]
    starts += [i for i, line in enumerate(history) if LIMIT_LIFTED.search(line)]
    return history[max(starts) + 1 :] if starts else history


# -- processes -------------------------------------------------------------------------------------


def is_claude(proc: ProcessInfo) -> bool:
    """The native binary, the npm package's node entry point or a stand-in named ``claude``."""
    for arg in (proc.name, *proc.cmdline[:2]):
        if PurePath(arg).name in ("claude", "claude.exe") or "claude-code" in arg:
            return True
    return False


def idle_shell(evidence: Evidence) -> ProcessInfo | None:
    """The shell in front of the PTY when claude runs nowhere in it and the shell runs nothing."""
    front = evidence.foreground()
    if front is None or front.name not in SHELLS:
        return None
    procs = [p for p in (evidence.agent, *evidence.descendants) if p is not None]
    if any(is_claude(p) for p in procs) or any(p.ppid == front.pid for p in procs):
        return None
    return front
