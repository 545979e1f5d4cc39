"""The adapter contract: what roost needs to know about a provider's CLI, and nothing else.

An adapter is pure provider knowledge: the argv of a fresh launch and of a resume, where identity
comes from, and how to read a screen. It touches no sockets; the actor runtime hosts each adapter
as the actor ``adapter/<provider>`` and supervisors ask it over the broker.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from roost.adapters.evidence import Evidence, stable_idle_shell
from roost.providers import MODES, bin_env
from roost.wire.errors import RoostError
from roost.wire.messages import AttentionReason, ClassificationState, Mode, ResumeOutcome
from roost.wire.usage import Usage

# Screen/process classification states.
CLASSIFICATIONS: tuple[ClassificationState, ...] = get_args(ClassificationState)
STARTING, READY, BUSY, ATTENTION, SHELL, EXITED = CLASSIFICATIONS
ATTENTION_REASONS: tuple[AttentionReason, ...] = get_args(AttentionReason)

KEYS: dict[str, bytes] = {
    "enter": b"\r",
    "escape": b"\x1b",
    "interrupt": b"\x03",
    "eof": b"\x04",
    "tab": b"\t",
    "backspace": b"\x7f",
    "up": b"\x1b[A",
    "down": b"\x1b[B",
    "right": b"\x1b[C",
    "left": b"\x1b[D",
    "home": b"\x1b[H",
    "end": b"\x1b[F",
    "pageup": b"\x1b[5~",
    "pagedown": b"\x1b[6~",
    "delete": b"\x1b[3~",
    "space": b" ",
    "shift-tab": b"\x1b[Z",
}


def key_names(body: dict[str, Any]) -> list[str]:
    """The ``keys`` of a ``session.key`` request: 1 to 64 names from ``KEYS``, else bad-request."""
    keys = body.get("keys")
    if not isinstance(keys, list) or not 0 < len(keys) <= 64:
        raise RoostError(
            "bad-request", "field 'keys' must list 1 to 64 key names", {"field": "keys"}
        )
    unknown = [k for k in keys if not isinstance(k, str) or k not in KEYS]
    if unknown:
        from roost.suggest import close_matches, did_you_mean  # only for a mistyped key

        words = [str(k) for k in unknown]
        matches = [m for w in words for m in close_matches(w, KEYS, n=1)]
        said = ", ".join(repr(w) for w in words)
        hint = f"{did_you_mean(matches)} " if matches else ""
        raise RoostError(
            "bad-request",
            f"unknown key{'s' if len(words) > 1 else ''} {said}; {hint}"
            f"the keys: {', '.join(sorted(KEYS))}",
            {"field": "keys", "unknown": words, "suggestions": matches},
        )
    return keys


@dataclass(frozen=True)
class LaunchContext:
    """Where and how a session is launched; ``data_dir`` is a per-provider directory of the node,
    ``session_dir`` the record's own directory ("" when the caller named none)."""

    cwd: str
    mode: str
    env: dict[str, str]
    data_dir: str
    session_dir: str = ""


@dataclass(frozen=True)
class Launch:
    """A ready-to-run process: argv and the environment additions, plus the identity if known.
    ``files``: file name -> text, each written (mode 0600) into the record's session directory
    (``LaunchContext.session_dir``) before the process starts, since its argv names them (the
    adapter itself writes nothing)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    provider_session: str | None = None
    files: dict[str, str] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        wire = {"argv": self.argv, "env": self.env, "provider_session": self.provider_session}
        return {**wire, "files": self.files} if self.files else wire


@dataclass(frozen=True)
class Classification:
    """A verdict on a screen. A usage limit (``attention``, ``rate-limit``) carries the reset time
    the screen shows (``reset_at``, epoch seconds; None: it shows none), and whether the CLI
    itself continues at that time (``self_continues``: roost then types nothing)."""

    state: ClassificationState
    reason: str | None = None
    detail: str = ""
    reset_at: float | None = None
    self_continues: bool = False

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"state": self.state, "reason": self.reason, "detail": self.detail}
        if self.reset_at is not None:
            wire["reset_at"] = self.reset_at
        if self.self_continues:
            wire["self_continues"] = True
        return wire


@dataclass(frozen=True)
class SessionView:
    """What the supervisor knows of a running pty session besides its screen and processes: the
    window title the CLI set last, the provider session id (if known), when this process was
    launched (epoch seconds) and its launch context (None when the caller did not send it)."""

    title: str = ""
    provider_session: str | None = None
    since: float = 0.0
    ctx: LaunchContext | None = None


RESUME_OUTCOMES: tuple[ResumeOutcome, ...] = get_args(ResumeOutcome)
RESUMED, ATTENTION_REQUIRED, RETRY_FRESH, RESUME_FAILED = RESUME_OUTCOMES


@dataclass(frozen=True)
class ResumeCheck:
    """The verdict on a cold resume; ``outcome`` None means "not decided yet, sample again"."""

    outcome: ResumeOutcome | None
    reason: str | None = None
    detail: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "reason": self.reason, "detail": self.detail}


# A command run for ``roost doctor`` with a deadline: (exit code, None when it did not end in
# time or could not start; its output)
Runner = Callable[[list[str], dict[str, str]], tuple[int | None, str]]


@dataclass(frozen=True)
class VendorCli:
    """A vendor's CLI as roost installs, knows and checks it: said with ``provider-missing`` at a
    spawn or resume, and by ``roost doctor``."""

    install: str  # how to install it (``provider-missing``)
    line: str  # the release line the adapter follows: "2.1" is any 2.1.x
    tested: str  # the version the adapter was tested with
    pinned: str  # how to install that version (``roost doctor``'s fixes)
    home_env: str  # the variable that names the CLI's home (its config, login and sessions)
    home_dir: str  # that home without the variable, under the user's home
    login: str  # what to do when it is not logged in


class Adapter(ABC):
    """One provider's knowledge. Pure: reads screens, lines, evidence and the provider's own files
    (under the launch environment's home), never sockets or processes; for ``roost doctor`` it
    reads what its CLI answers to a command that the doctor runs (``login_state``).

    Its class is all roost knows of the provider besides the name and the line of
    ``roost.providers`` that registers it."""

    provider: str = ""
    # The CLI a vendor provider runs (None: an agent roost brings, nothing to install or check).
    cli: VendorCli | None = None
    # The modes it runs sessions in; a stream-mode provider implements ``turn`` and ``parse``.
    modes: tuple[Mode, ...] = MODES
    submit: bytes = b"\r"
    # A pause between typed text and its submit key, for TUIs that read a fast burst ending in
    # Enter as a paste (the Enter then becomes a newline in the composer).
    submit_delay_s: float = 0.0
    # Roost's own deadlines for a stream turn (None: none): no output line at all for
    # ``turn_silence_s``, or a turn running longer than ``turn_deadline_s`` (codex offline prints
    # "Reconnecting..." forever, so only a wall-clock deadline ends it).
    turn_silence_s: float | None = None
    turn_deadline_s: float | None = None
    # OSC 9 notifications the CLI writes to its terminal, as signals (none: it writes none
    # roost reads): ``(pattern, kind, data)`` rules from a notification's text to a signal kind,
    # the first match winning (``roost.actors.supervisor.osc9``).
    osc9: tuple[tuple[str, str, dict[str, Any]], ...] = ()

    def osc9_rules(self) -> list[list[Any]] | None:
        """``osc9`` as the launch plan carries it."""
        return [[pattern, kind, dict(data)] for pattern, kind, data in self.osc9] or None

    # The CLI's program is looked up at spawn and resume (``binary``): the variable that names
    # another binary, and how to install it, go into the ``provider-missing`` error.
    @property
    def bin_env(self) -> str | None:
        """``ROOST_<PROVIDER>_BIN`` of a vendor provider, None for a built-in one."""
        return bin_env(self.provider)

    @property
    def install(self) -> str:
        return self.cli.install if self.cli is not None else ""

    def named_program(self, env: Mapping[str, str]) -> str | None:
        """The program ``env``'s ``ROOST_<PROVIDER>_BIN`` names (None: it names none). A vendor
        CLI is otherwise the program of the provider's name, found on PATH."""
        var = self.bin_env
        return env.get(var) if var else None

    def login_state(self, path: str, env: dict[str, str], run: Runner) -> tuple[str, str]:
        """For ``roost doctor``: is the CLI at ``path`` logged in, in ``env`` (``run`` runs a
        command with a deadline)? ``logged-in``, ``logged-out`` or ``unknown``, and how that was
        told (a method, never what the CLI printed of the account)."""
        return "unknown", "no login check"

    def version_problem(self, out: str, version: str, path: str) -> tuple[str, str] | None:
        """For ``roost doctor``: what is wrong, and its fix, when the program that answered
        ``--version`` with ``out`` is not this provider's CLI, or one that must not be run."""
        return None

    @abstractmethod
    def fresh(self, ctx: LaunchContext) -> Launch:
        """The launch of a new conversation; ``provider_session`` is set when the CLI lets roost
        assign the identity up front (claude ``--session-id``), else None (discovered later)."""

    @abstractmethod
    def resume(self, provider_session: str, ctx: LaunchContext) -> Launch:
        """The launch that continues ``provider_session``, in the record's original cwd."""

    def fork(self, provider_session: str, ctx: LaunchContext) -> Launch:
        """The launch of a new conversation that begins as a copy of ``provider_session``'s, by
        the CLI's own fork, in the record's cwd; ``provider_session`` of the launch is the new
        id when the CLI lets roost assign it, else None (discovered later). The source
        conversation is left as it was."""
        raise cannot_fork(self.provider)

    def resume_fork(self, provider_session: str, source: str, ctx: LaunchContext) -> Launch:
        """The resume of a record that was forked from ``source``: by default the resume of its
        own ``provider_session``. A CLI that writes a fork's conversation only at its first
        message (claude) forks again, under the same id, when there is none yet."""
        return self.resume(provider_session, ctx)

    def fork_turn(
        self, source: str, provider_session: str | None, text: str, ctx: LaunchContext
    ) -> Launch:
        """The headless process of a stream-mode fork's first turn: ``source``'s conversation
        copied into a new one (``provider_session``, the id to assign, or None where the CLI
        assigns it), then ``text``."""
        raise cannot_fork(self.provider)

    @abstractmethod
    def classify(
        self, screen: str, *, exited: bool, evidence: Evidence | None = None
    ) -> Classification:
        """Read the visible screen (and the process tree): ``starting | ready | busy |
        attention(reason) | shell | exited``. An approval or trust screen is reported, never
        answered."""

    def classify_session(
        self, screen: str, *, exited: bool, evidence: Evidence | None, view: SessionView
    ) -> Classification:
        """``classify`` with what else the supervisor knows (``view``): for CLIs whose screen
        alone does not tell (codex streaming text shows no busy line). Default: the screen."""
        return self.classify(screen, exited=exited, evidence=evidence)

    def turn(
        self, provider_session: str | None, text: str, ctx: LaunchContext, *, first: bool
    ) -> Launch:
        """The headless process of one stream-mode turn. ``first``: the conversation does not
        exist yet (``provider_session`` is then the id to assign, or None where the CLI assigns
        it and reports it in its output)."""
        raise RoostError(
            "bad-request", f"{self.provider} has no headless (stream) mode", {"field": "mode"}
        )

    def parse(self, line: str, stream: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Session events for one line of a turn's output, and facts about the turn: any of
        ``session_id``, ``result`` (final text), ``is_error``, ``error`` (a message)."""
        if stream == "stderr":
            return (
                [{"kind": "session.stderr", "data": {"line": line[:4096]}}] if line.strip() else []
            ), {}
        return [], {}

    def usage(self, provider_session: str, ctx: LaunchContext) -> tuple[str, Usage] | None:
        """The provider session's tokens (and cost) so far, read from the CLI's own files, with
        the name of that source (``roost.wire.usage``); None where the CLI keeps none, or where
        a turn's own output reports them (``parse``'s fact ``usage``) in this ``ctx.mode``."""
        return None

    def discover_identity(self, screen: str, ctx: LaunchContext, *, since: float) -> str | None:
        """The provider session id when it is not assigned up front: from a screen hint or the
        provider's session files (created after ``since``, for ``ctx.cwd``)."""
        return None

    def shown_session(self, screen: str) -> str | None:
        """The provider session id the screen shows, where the CLI shows one (a fork's check
        reads it); None by default."""
        return None

    def verify_resume(
        self,
        screen: str,
        provider_session: str,
        samples: list[Evidence],
        ctx: LaunchContext | None = None,
    ) -> ResumeCheck:
        """Did the resume reach the same conversation? The default reads the classification:
        ready/busy -> resumed; attention -> attention_required (launch, pane and identity kept);
        exited -> resume_failed; a proven stable idle shell -> retry_fresh; else undecided.
        ``ctx`` (the launch's, when sent) lets an adapter look for the conversation's files."""
        latest = samples[-1] if samples else None
        seen = self.classify(
            screen, exited=latest is not None and latest.agent is None, evidence=latest
        )
        if seen.state in (READY, BUSY):
            return ResumeCheck(RESUMED)
        if seen.state == ATTENTION:
            return ResumeCheck(ATTENTION_REQUIRED, seen.reason, seen.detail)
        if seen.state == EXITED:
            return ResumeCheck(RESUME_FAILED, "exited", seen.detail)
        if seen.state == SHELL and stable_idle_shell(samples):
            return ResumeCheck(RETRY_FRESH, "shell")
        return ResumeCheck(None)


def verify_fork(
    adapter: Adapter,
    screen: str,
    source: str,
    provider_session: str | None,
    samples: list[Evidence],
    ctx: LaunchContext | None = None,
) -> ResumeCheck:
    """Did a fork reach its copy of ``source``'s conversation? Only once the fork's own id is
    known (``provider_session``, learnt or assigned, else the one its screen shows), and then as
    a resume of that id (the adapter's ``verify_resume``); undecided until then. The source's
    own id coming back is a failure: the CLI continued the source instead of copying it."""
    shown = adapter.shown_session(screen)
    if source in (provider_session, shown):
        return ResumeCheck(RESUME_FAILED, "resume-unverified", SAME_ID)
    known = provider_session or shown
    if known is None:
        return ResumeCheck(None)
    return adapter.verify_resume(screen, known, samples, ctx)


SAME_ID = "the fork came back with the source's provider session id"


def cannot_fork(provider: str) -> RoostError:
    return RoostError(
        "provider-cannot-fork",
        f"{provider} has no fork of a conversation",
        {"provider": provider},
    )


def last_line(screen: str) -> str:
    lines = [line for line in screen.splitlines() if line.strip()]
    return lines[-1].rstrip() if lines else ""
