"""The ``kimi`` provider: Kimi Code CLI 2.1.0 (npm ``@moonshot-ai/kimi-code``).

Kimi names a conversation ``session_<uuid4>`` only when its first message is sent, so roost learns
the id afterwards: from the screen (the exit hint ``To resume this session: kimi -r <id>``, or the
welcome box of a resumed session) or from kimi's own files,
``$KIMI_CODE_HOME/sessions/<workDirKey>/<id>/state.json`` and ``session_index.jsonl``. A resume
(``kimi -S <id>``) must run in the session's original cwd, which is the record's cwd.

Headless turns (``-p TEXT --output-format stream-json``) print one OpenAI-chat-style JSON object
per line and end with a ``session.resume_hint`` meta line carrying the id; failures are not JSON
but an ``error: ...`` line on stderr (exit 1).

The binary is ``$ROOST_KIMI_BIN``, else ``kimi`` on PATH. Never point it at the legacy Python
``kimi-cli``: run with no arguments, that one downloads and runs an install script.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tomllib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from roost.adapters.base import (
    ATTENTION,
    BUSY,
    EXITED,
    READY,
    RESUME_FAILED,
    SHELL,
    STARTING,
    Adapter,
    Classification,
    Launch,
    LaunchContext,
    ResumeCheck,
    Runner,
    VendorCli,
)
from roost.adapters.evidence import SHELLS, Evidence
from roost.adapters.usage_files import kimi_totals
from roost.wire.errors import RoostError
from roost.wire.usage import Usage

Event = dict[str, Any]

HOME_ENV, HOME_DIR = "KIMI_CODE_HOME", ".kimi-code"  # its home: config, credentials, sessions
SESSION_ID = r"session_[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
# The exit hint, and the "Session:" row of the welcome box (filled in on a resumed session).
SCREEN_ID = re.compile(
    rf"To resume this session: kimi -r ({SESSION_ID})|│\s+Session:\s+({SESSION_ID})"
)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
STDERR_ERROR = re.compile(r"^error: (?:failed to run prompt: )?(.*)")

MOONS = frozenset("🌑🌒🌓🌔🌕🌖🌗🌘")  # waiting for the model
BRAILLE = range(0x2800, 0x2900)  # "⠏ Working…" while it streams
COMPOSER = re.compile(r"^\s*│ >")
NOT_CONFIGURED = re.compile(r"Run /login or /provider|Model:\s+not set|LLM not set")
USER_LINE = "✨"  # a sent message; assistant lines start with "●"

# Screens that replace the composer, most specific first: (reason, pattern).
DIALOGS = (
    ("trust", re.compile(r"Trust this folder\?")),
    ("permission", re.compile(r"Run this command\?|Approve once|Approve for this session")),
    ("login", re.compile(r"Select a platform")),
    ("update", re.compile(r"(?i)update available|new version|kimi upgrade")),
    ("picker", re.compile(r"↑↓ navigate|↑/↓ select|Enter select|Esc cancel")),
    ("login", NOT_CONFIGURED),  # the welcome box, drawn before the composer
)
# An ``Error:`` line of the latest turn, by what fixes it (kimi's error codes and HTTP words).
ERRORS = (
    ("rate-limit", re.compile(r"(?i)rate.?limit|\b429\b|too many requests|usage limit|quota")),
    (
        "offline",
        re.compile(r"(?i)connection.?error|econnrefused|enotfound|etimedout|fetch failed|network"),
    ),
    (
        "login",
        re.compile(r"(?i)auth.?error|login.?required|\b40[13]\b|unauthorized|api key|not set"),
    ),
)


class KimiAdapter(Adapter):
    provider = "kimi"
    cli: VendorCli = VendorCli(
        install="npm install -g @moonshot-ai/kimi-code (needs Node.js 22.19 or later)",
        line="2.1",
        tested="2.1.0",
        pinned="npm install -g @moonshot-ai/kimi-code@2.1.0 (needs Node >= 22.19)",
        home_env=HOME_ENV,
        home_dir=HOME_DIR,
        login="run `kimi` and /login (or set default_model in $KIMI_CODE_HOME/config.toml)",
    )
    # Like codex: text and Enter arriving in one read are a paste, and the Enter only adds an
    # empty line to the composer (kimi 2.1.0 in a PTY). Submit apart.
    submit_delay_s = 0.3

    def _bin(self, ctx: LaunchContext) -> str:
        named = self.named_program(ctx.env)
        return self.provider if named is None else named

    def fresh(self, ctx: LaunchContext) -> Launch:
        return Launch(argv=[self._bin(ctx)])

    def resume(self, provider_session: str, ctx: LaunchContext) -> Launch:
        return Launch(
            argv=[self._bin(ctx), "-S", provider_session], provider_session=provider_session
        )

    def fork(self, provider_session: str, ctx: LaunchContext) -> Launch:
        """``kimi fork SRC`` copies the session and exits, printing ``Forked to <new id> ...``;
        ``kimi -S <new id>`` then opens the copy. One shell runs both, so the supervised process
        is the CLI on the fork; the new id shows in the resumed welcome box."""
        _check_session(provider_session)
        return Launch(
            argv=[*FORK_SHELL, f'{FORKED} exec "$0" -S "$id"', self._bin(ctx), provider_session]
        )

    def fork_turn(
        self, source: str, provider_session: str | None, text: str, ctx: LaunchContext
    ) -> Launch:
        """The fork, then the first turn in it (its last line names the new id)."""
        _check_session(source)
        then = f'{FORKED} exec "$0" -p "$2" --output-format stream-json -S "$id"'
        return Launch(argv=[*FORK_SHELL, then, self._bin(ctx), source, text])

    def turn(
        self, provider_session: str | None, text: str, ctx: LaunchContext, *, first: bool
    ) -> Launch:
        argv = [self._bin(ctx), "-p", text, "--output-format", "stream-json"]
        if first:  # kimi takes no id up front: it reports the new one in its last line
            return Launch(argv=argv)
        if not provider_session:
            raise RoostError(
                "no-provider-session",
                "kimi reported no session id for this conversation, so a further turn would "
                "start a new one; roost will not do that",
            )
        return Launch(argv=[*argv, "-S", provider_session], provider_session=provider_session)

    # -- headless output -------------------------------------------------------------------------

    def parse(self, line: str, stream: str) -> tuple[list[Event], dict[str, Any]]:
        if stream == "stderr":
            return parse_stderr(line)
        try:
            obj = json.loads(line)
        except ValueError:
            return parse_stderr(line)[0], {}
        if not isinstance(obj, dict):
            return [], {}
        role = obj.get("role")
        if role == "assistant":
            return _assistant(obj)
        if role == "tool":
            return [_tool_result(obj)], {}
        if role == "meta":
            return _meta(obj)
        return [], {}

    # -- screens -------------------------------------------------------------------------------

    def classify(
        self, screen: str, *, exited: bool, evidence: Evidence | None = None
    ) -> Classification:
        if exited or (evidence is not None and evidence.agent is None):
            return Classification(EXITED)
        lines = screen.splitlines()
        if _leaving(lines):
            return Classification(EXITED, None, "leaving")
        composer = _last_index(lines, lambda s: COMPOSER.match(s) is not None)
        if composer is None:
            return _without_composer(lines, evidence)
        return _with_composer(lines, composer)

    def usage(self, provider_session: str, ctx: LaunchContext) -> tuple[str, Usage] | None:
        """The session's total from its wire files' ``usage.record`` lines, in either mode:
        the headless output reports no usage."""
        if re.fullmatch(r"[\w-]{1,128}", provider_session) is None:  # a name, not a pattern
            return None
        home = kimi_home({**os.environ, **ctx.env})
        for folder in (home / "sessions").glob(f"*/{provider_session}"):
            if (totals := kimi_totals(folder)) is not None:
                return "files", totals
        return None

    def discover_identity(self, screen: str, ctx: LaunchContext, *, since: float) -> str | None:
        return screen_session(screen) or file_session(ctx, since, _sent_prompts(screen))

    def shown_session(self, screen: str) -> str | None:
        return screen_session(screen)

    def verify_resume(
        self,
        screen: str,
        provider_session: str,
        samples: list[Evidence],
        ctx: LaunchContext | None = None,
    ) -> ResumeCheck:
        shown = screen_session(screen)
        if shown is not None and shown != provider_session:
            return ResumeCheck(RESUME_FAILED, "identity", f"kimi shows {shown}")
        return super().verify_resume(screen, provider_session, samples, ctx)

    # -- roost doctor ----------------------------------------------------------------------------

    def login_state(self, path: str, env: dict[str, str], run: Runner) -> tuple[str, str]:
        """kimi has no status command: credentials saved by /login, or a configured model."""
        home = Path(env.get(HOME_ENV) or Path.home() / HOME_DIR)
        credentials = home / "credentials"
        with contextlib.suppress(OSError):
            if credentials.is_dir() and any(credentials.iterdir()):
                return "logged-in", "credentials in $KIMI_CODE_HOME/credentials"
        try:
            doc = tomllib.loads((home / "config.toml").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            doc = {}
        if doc.get("default_model"):
            return "logged-in", "default_model in $KIMI_CODE_HOME/config.toml"
        return "logged-out", "no credentials or default_model in $KIMI_CODE_HOME"

    def version_problem(self, out: str, version: str, path: str) -> tuple[str, str] | None:
        """The legacy Python ``kimi-cli``, which runs an install script when started bare."""
        if not (out.lstrip().startswith("kimi, version") or "kimi-cli" in out):
            return None
        return (
            f"kimi: {path} is the legacy Python kimi-cli {version}, which runs an install "
            "script when started bare",
            f"install the Kimi Code CLI ({self.cli.pinned}) and name it with "
            "providers.kimi.bin or ROOST_KIMI_BIN",
        )


# -- parsing -------------------------------------------------------------------------------------


def parse_stderr(line: str) -> tuple[list[Event], dict[str, Any]]:
    """A stderr line is an event; ``error: ...``, kimi's only failure report, fails the turn."""
    line = ANSI.sub("", line).rstrip()
    if not line.strip():
        return [], {}
    match = STDERR_ERROR.match(line)
    facts = {"is_error": True, "error": match.group(1)} if match else {}
    return [{"kind": "session.stderr", "data": {"line": line[:4096]}}], facts


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def _assistant(obj: dict[str, Any]) -> tuple[list[Event], dict[str, Any]]:
    events: list[Event] = []
    facts: dict[str, Any] = {}
    text = _text(obj.get("content"))
    if text:
        events.append({"kind": "session.output", "data": {"text": text}})
        facts["result"] = text
    for call in obj.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        args = function.get("arguments")
        if isinstance(args, str):
            with contextlib.suppress(ValueError):  # not JSON: kept as the provider wrote it
                args = json.loads(args)
        events.append(
            {
                "kind": "session.tool_call",
                "data": {"id": call.get("id"), "name": function.get("name"), "input": args},
            }
        )
    return events, facts


def _tool_result(obj: dict[str, Any]) -> Event:
    content = obj.get("content")
    text = content if isinstance(content, str) else _text(content) or json.dumps(content)
    return {
        "kind": "session.tool_result",
        "data": {
            "id": obj.get("tool_call_id"),
            "is_error": bool(obj.get("is_error")),
            "content": text,
        },
    }


def _meta(obj: dict[str, Any]) -> tuple[list[Event], dict[str, Any]]:
    kind = obj.get("type")
    if kind == "session.resume_hint" and isinstance(obj.get("session_id"), str):
        # printed only after a turn that succeeded
        return [], {"session_id": obj["session_id"], "is_error": False}
    if kind == "turn.step.retrying":
        line = (
            f"kimi: retrying (attempt {obj.get('next_attempt')}/{obj.get('max_attempts')} in "
            f"{obj.get('delay_ms')} ms) after {obj.get('error_name')}: {obj.get('error_message')}"
        )
        return [{"kind": "session.stderr", "data": {"line": line[:4096]}}], {}
    return [], {}


# -- classification ------------------------------------------------------------------------------


def _last_index(lines: list[str], pred: Callable[[str], bool]) -> int | None:
    for i in range(len(lines) - 1, -1, -1):
        if pred(lines[i]):
            return i
    return None


def _nonblank(lines: list[str]) -> list[str]:
    return [line.strip() for line in lines if line.strip()]


def _leaving(lines: list[str]) -> bool:
    """``Bye!`` and the resume hint at the bottom: kimi is on its way out."""
    tail = _nonblank(lines)[-3:]
    return any(s == "Bye!" or s.startswith("To resume this session:") for s in tail)


def _after_last_message(lines: list[str], end: int) -> int:
    """The index after the last sent message (a ``✨`` line) before ``end``, else 0."""
    start = _last_index(lines[:end], lambda s: s.strip().startswith(USER_LINE))
    return 0 if start is None else start + 1


def _spinning(line: str) -> bool:
    return bool(line) and (line[0] in MOONS or ord(line[0]) in BRAILLE)


def _without_composer(lines: list[str], evidence: Evidence | None) -> Classification:
    """A dialog in place of the composer (looked for after the last sent message), a foreign
    shell, a spinner, or a screen still being drawn."""
    region = lines[_after_last_message(lines, len(lines)) :]
    for reason, pattern in DIALOGS:
        hit = next((s.strip(" │") for s in region if pattern.search(s)), None)
        if hit is not None:
            return Classification(ATTENTION, reason, hit)
    if evidence is not None and evidence.agent is not None:
        fg = evidence.foreground()
        if fg is not None and fg.pid != evidence.agent.pid and fg.name in SHELLS:
            return Classification(SHELL, None, fg.name)
    if any(_spinning(s) for s in _nonblank(region)[-2:]):
        return Classification(BUSY)
    return Classification(STARTING)


def _with_composer(lines: list[str], composer: int) -> Classification:
    top = _last_index(lines[:composer], lambda s: s.strip().startswith("╭"))
    top = composer if top is None else top
    latest = _nonblank(lines[_after_last_message(lines, top) : top])  # the latest turn's lines
    for line in (s for s in latest if s.startswith("Error:")):
        for reason, pattern in ERRORS:
            if pattern.search(line):
                return Classification(ATTENTION, reason, line)
    if not _model_configured(lines, composer):
        return Classification(ATTENTION, "login", "Model: not set")
    if any(_spinning(s) for s in latest[-2:]):
        return Classification(BUSY)
    return Classification(READY)


# How kimi shows the cwd at the start of its status line when no model precedes it: absolute,
# under HOME (``~``), or its last segments after ``…/`` (kimi's ``shortenCwd``).
CWD_STARTS = ("/", "~", "…/")


def _model_configured(lines: list[str], composer: int) -> bool:
    """The status line under the composer starts with the model, or with the cwd when none is
    set; without a status line, the welcome box says whether one is."""
    bottom = next(
        (i for i in range(composer, len(lines)) if lines[i].strip().startswith("╰")), None
    )
    status = _nonblank(lines[bottom + 1 :])[:1] if bottom is not None else []
    if status:
        return not status[0].startswith(CWD_STARTS)
    return not any(NOT_CONFIGURED.search(line) for line in lines)


# -- identity ------------------------------------------------------------------------------------


# ``sh -c SCRIPT KIMI SRC [TEXT]``: the fork's line is read, not shown ("Forked to <id> ..."); a
# fork that fails ends the shell with kimi's status and its message on stderr
FORK_SHELL = ("/bin/sh", "-c")
FORKED = 'out=$("$0" fork "$1") || exit; id=${out#Forked to }; id=${id%% *};'


def _check_session(value: str) -> None:
    """Only kimi's own ids go into a fork's shell line (as an argument, never in the script)."""
    if not re.fullmatch(SESSION_ID, value):
        raise RoostError(
            "bad-request", f"{value[:80]!r} is not a kimi session id", {"field": "fork"}
        )


def screen_session(screen: str) -> str | None:
    """The session id kimi shows: its exit hint, or the welcome box of a resumed session."""
    found = [a or b for a, b in SCREEN_ID.findall(screen)]
    return found[-1] if found else None


def work_dir_key(cwd: str) -> str:
    """Kimi's directory key: ``wd_<slug of the base name>_<sha256(path)[:12]>``, the path with
    backslashes made slashes and trailing slashes trimmed, the slug lower-case ``[a-z0-9._-]``
    runs (others become ``-``), at most 40 characters, ``workspace`` when nothing is left."""
    path = cwd.replace("\\", "/").rstrip("/")
    slug = re.sub(r"[^a-z0-9._-]+", "-", path.rsplit("/", 1)[-1].lower()).strip("-")
    slug = slug[:40].strip("-")
    if slug in ("", ".", ".."):
        slug = "workspace"
    return f"wd_{slug}_{hashlib.sha256(path.encode()).hexdigest()[:12]}"


def kimi_home(env: dict[str, str]) -> Path:
    if env.get(HOME_ENV):
        return Path(env[HOME_ENV])
    return Path(env.get("HOME") or os.path.expanduser("~")) / HOME_DIR


def file_session(ctx: LaunchContext, since: float, prompts: list[str]) -> str | None:
    """The session kimi created for ``ctx.cwd`` after ``since``. Another kimi in the same folder
    may have made one too, so when this screen shows sent messages the session must hold one of
    them; no guess when that does not leave exactly one."""
    found = [s for s in _session_states(kimi_home(ctx.env), ctx.cwd) if s["created"] >= since]
    if prompts:
        found = [s for s in found if _prompted(s, prompts)]
    return found[0]["id"] if len(found) == 1 else None


def _session_states(home: Path, cwd: str) -> list[dict[str, Any]]:
    dirs = {d.name: d for d in (home / "sessions" / work_dir_key(cwd)).glob("session_*")}
    try:
        index = (home / "session_index.jsonl").read_text(errors="replace").splitlines()
    except OSError:
        index = []
    for raw in index:
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict) and _same_dir(entry.get("workDir"), cwd):
            dirs.setdefault(str(entry.get("sessionId")), Path(str(entry.get("sessionDir"))))
    states = (_read_state(d / "state.json") for d in dirs.values())
    return [s for s in states if s is not None and _same_dir(s.get("cwd"), cwd)]


def _read_state(path: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(path.read_text())
        mtime = path.stat().st_mtime
    except (OSError, ValueError):
        return None  # absent, or being written: the next look will see it
    if not isinstance(state, dict) or not re.fullmatch(SESSION_ID, str(state.get("id"))):
        return None
    return {**state, "created": _epoch(state.get("createdAt"), mtime)}


def _epoch(value: Any, default: float) -> float:
    """kimi writes epoch milliseconds; seconds and ISO-8601 are read too."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value / 1000 if value > 1e11 else float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    return default


def _same_dir(a: Any, b: str) -> bool:
    return isinstance(a, str) and bool(a) and os.path.normpath(a) == os.path.normpath(b)


def _sent_prompts(screen: str) -> list[str]:
    return [
        s[len(USER_LINE) :].strip()
        for s in _nonblank(screen.splitlines())
        if s.startswith(USER_LINE)
    ]


def _prompted(state: dict[str, Any], prompts: list[str]) -> bool:
    said = [str(state.get(k) or "").strip() for k in ("lastPrompt", "title")]
    return any(p and s and (s.startswith(p) or p.startswith(s)) for p in prompts for s in said)
