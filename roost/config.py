"""The operator's configuration file, ``$XDG_CONFIG_HOME/roost/config.toml`` (``ROOST_CONFIG``
names another): provider binaries and their default environment, default spawn options (the
restore policy among them), the pause between cold resumes of a restore, notification commands,
the detach key of ``roost attach``.

A bottom-layer module (it imports nothing of roost but the error type and the names of
``roost.providers``): the CLI reads it for ``spawn``, ``attach`` and ``config show``; the node for
notifications and the restore pause; the adapter host for the binary and environment of each
launch. Every value knows where it came from (``Source``): the built-in default, a line of the
file, or an environment variable, which wins over the file where one exists today (a vendor
provider's ``ROOST_<PROVIDER>_BIN``). A key the file may not have, or a value of the wrong type,
is ``config-invalid`` naming the key, the file and the line.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roost import provider_spec
from roost.provider_spec import ProviderSpec, SpecProblem
from roost.providers import MODES, ON_LIMIT, RESTORE_POLICIES, bin_env, fixed
from roost.wire.errors import RoostError

CONFIG_ENV = "ROOST_CONFIG"
NOTIFY_EVENTS = ("attention", "turn-end", "exit")
RESTORE_PAUSE_S = 2.0  # node.restore_pause_s: between two cold resumes of a restore
DETACH_DEFAULT = "ctrl-]"
NOTIFY_TIMEOUT_S = 10.0
SIZE_RE = re.compile(r"^(\d+)x(\d+)$")
# Ctrl-<char> and the byte a terminal in raw mode sends for it; not the ones that are also
# Backspace, Tab, Enter or a newline.
CTRL_KEYS = {
    f"ctrl-{c}": bytes([i + 1])
    for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")
    if c not in "hijm"
} | {"ctrl-\\": b"\x1c", "ctrl-]": b"\x1d", "ctrl-^": b"\x1e", "ctrl-_": b"\x1f"}


@dataclass(frozen=True)
class Source:
    """Where a value in force came from: ``default``, ``file`` (``where`` = PATH:LINE), ``env``
    (``where`` = the variable) or ``flag`` (``where`` = the option)."""

    kind: str
    where: str = ""

    def label(self) -> str:
        return f"{self.kind} {self.where}" if self.where else self.kind

    def to_wire(self) -> dict[str, str]:
        return {"kind": self.kind, "where": self.where}


DEFAULT = Source("default")


@dataclass(frozen=True)
class NotifyCommand:
    """One notification command: run for the events in ``on``, the event as JSON on stdin;
    ``argv`` runs without a shell, ``shell`` through ``/bin/sh -c``."""

    on: tuple[str, ...]
    argv: tuple[str, ...] = ()
    shell: str = ""
    timeout_s: float = NOTIFY_TIMEOUT_S
    name: str = ""  # what the logs call it: notify.command[N]

    def command(self) -> list[str]:
        return ["/bin/sh", "-c", self.shell] if self.shell else list(self.argv)


@dataclass(frozen=True)
class Config:
    """The file as read (``exists`` False: every value is its default)."""

    path: Path
    path_source: Source
    exists: bool = False
    data: dict[str, Any] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)

    def _get(self, *keys: str) -> Any:
        node: Any = self.data
        for key in keys:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node

    def source(self, key: str) -> Source:
        """The file's line of ``key`` (dotted), else its nearest enclosing table's."""
        parts = key.split(".")
        while parts:
            line = self.lines.get(".".join(parts))
            if line:
                return Source("file", f"{self.path}:{line}")
            parts.pop()
        return Source("file", str(self.path))

    # -- values ---------------------------------------------------------------------------------

    def provider_specs(self) -> dict[str, ProviderSpec]:
        """The providers the file defines (``[providers.<name>]`` of a name roost does not
        register itself), by name, in the file's order."""
        tables = self._get("providers") or {}
        return {n: provider_spec.parse(n, t) for n, t in tables.items() if n not in fixed()}

    def defined_providers(self) -> tuple[str, ...]:
        return tuple(n for n in self._get("providers") or {} if n not in fixed())

    def provider_env(self, provider: str) -> dict[str, str]:
        return dict(self._get("providers", provider, "env") or {})

    def provider_bin(
        self, provider: str, environ: Mapping[str, str], record_env: Mapping[str, str] = {}
    ) -> tuple[str, Source]:
        """The program a provider runs as: the record's ``ROOST_<P>_BIN``, else the node's,
        else the file's ``providers.<p>.bin``, else the provider's name (looked up on PATH)."""
        var = bin_env(provider)
        if var and record_env.get(var):
            return record_env[var], Source("env", f"{var} (the record's --env)")
        if var and environ.get(var):
            return environ[var], Source("env", var)
        configured = self._get("providers", provider, "bin")
        if configured:
            return os.path.expanduser(configured), self.source(f"providers.{provider}.bin")
        command = self._get("providers", provider, "command")
        if command and provider not in fixed():
            return os.path.expanduser(command), self.source(f"providers.{provider}.command")
        return provider, DEFAULT

    def spawn_mode(self) -> tuple[str, Source]:
        mode = self._get("spawn", "mode")
        return (mode, self.source("spawn.mode")) if mode else ("pty", DEFAULT)

    def spawn_size(self) -> tuple[str | None, Source]:
        size = self._get("spawn", "size")
        return (size, self.source("spawn.size")) if size else (None, DEFAULT)

    def spawn_env(self) -> dict[str, str]:
        return dict(self._get("spawn", "env") or {})

    def spawn_restore(self) -> tuple[str, Source]:
        """The default of ``spawn --restore``: ``never`` unless the file says ``resume``."""
        policy = self._get("spawn", "restore")
        return (policy, self.source("spawn.restore")) if policy else ("never", DEFAULT)

    def spawn_on_limit(self) -> tuple[str, Source]:
        """The default of ``spawn --on-limit``: ``wait`` unless the file says ``continue``."""
        policy = self._get("spawn", "on_limit")
        return (policy, self.source("spawn.on_limit")) if policy else ("wait", DEFAULT)

    def restore_pause(self) -> tuple[float, Source]:
        """Seconds between two cold resumes of a restore (agents starting at once can race on
        a shared OAuth refresh token)."""
        value = self._get("node", "restore_pause_s")
        if value is None:
            return RESTORE_PAUSE_S, DEFAULT
        return float(value), self.source("node.restore_pause_s")

    def detach_key(self) -> tuple[str, bytes, Source]:
        name = self._get("attach", "detach_key")
        if not name:
            return DETACH_DEFAULT, CTRL_KEYS[DETACH_DEFAULT], DEFAULT
        return name, CTRL_KEYS[name.lower()], self.source("attach.detach_key")

    def desktop(self) -> tuple[bool, tuple[str, ...]]:
        """Whether a desktop notification (``notify-send``) is sent, and for which events."""
        on = self._get("notify", "desktop")
        events = self._get("notify", "desktop_on")
        return (True if on is None else bool(on)), tuple(events or NOTIFY_EVENTS)

    def notify_timeout(self) -> float:
        value = self._get("notify", "timeout_s")
        return NOTIFY_TIMEOUT_S if value is None else float(value)

    def notify_commands(self) -> list[NotifyCommand]:
        found = []
        for i, raw in enumerate(self._get("notify", "command") or []):
            found.append(
                NotifyCommand(
                    on=tuple(raw.get("on") or NOTIFY_EVENTS),
                    argv=tuple(raw.get("argv") or ()),
                    shell=raw.get("shell") or "",
                    timeout_s=float(raw.get("timeout_s", self.notify_timeout())),
                    name=f"notify.command[{i}]",
                )
            )
        return found


# -- finding and reading the file -------------------------------------------------------------


def config_path(environ: Mapping[str, str] | None = None) -> tuple[Path, Source]:
    """``ROOST_CONFIG``, else ``$XDG_CONFIG_HOME/roost/config.toml`` (``~/.config`` without it)."""
    env = os.environ if environ is None else environ
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser(), Source("env", CONFIG_ENV)
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "roost" / "config.toml", DEFAULT


def load(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read and check the file; a missing file is an empty one."""
    where, source = (path, Source("flag")) if path is not None else config_path(environ)
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config(where, source)
    except (OSError, UnicodeDecodeError) as exc:
        raise _invalid(where, f"cannot be read ({type(exc).__name__})", "", 0) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", 0) or _decode_line(str(exc))
        raise _invalid(where, f"is not valid TOML: {exc}", "", line) from None
    lines = key_lines(text)
    _check(data, where, lines)
    return Config(where, source, True, data, lines)


def _decode_line(message: str) -> int:
    found = re.search(r"line (\d+)", message)
    return int(found.group(1)) if found else 0


def _invalid(path: Path, problem: str, key: str, line: int) -> RoostError:
    at = f"{path}:{line}" if line else str(path)
    what = f"{key!r} " if key else ""
    detail: dict[str, Any] = {"file": str(path), "key": key or None, "line": line or None}
    return RoostError("config-invalid", f"{at}: {what}{problem}".replace("  ", " "), detail)


# -- checking -----------------------------------------------------------------------------------

Checker = tuple[str, Any]  # (what it must be, a predicate or a nested table of checkers)


def _is_str(v: Any) -> bool:
    return isinstance(v, str) and bool(v)


def _is_env(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())


def _is_events(v: Any) -> bool:
    return isinstance(v, list) and all(x in NOTIFY_EVENTS for x in v)


def _is_seconds(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and 0 < v <= 3600


def _is_argv(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(_is_str(x) for x in v)


EVENTS_TEXT = f"a list of events from {list(NOTIFY_EVENTS)}"
ENV_TEXT = 'a table of NAME = "value" strings'
PROVIDER_TABLE: dict[str, Checker] = {
    "bin": ("a non-empty string (a program name or path)", _is_str),
    "env": (ENV_TEXT, _is_env),
}
COMMAND_TABLE: dict[str, Checker] = {
    "on": (EVENTS_TEXT, _is_events),
    "argv": ("a non-empty list of strings", _is_argv),
    "shell": ("a non-empty string", _is_str),
    "timeout_s": ("a number of seconds, 0 < s <= 3600", _is_seconds),
}
# Every table but ``providers``: a table of a provider roost registers takes ``PROVIDER_TABLE``,
# any other name defines a provider (``roost.provider_spec``).
SCHEMA: dict[str, Checker] = {
    "spawn": (
        "a table",
        {
            "mode": (f"one of {list(MODES)}", lambda v: v in MODES),
            "size": ("ROWSxCOLS, each 2..1000 (for example 40x120)", lambda v: _size_ok(v)),
            "env": (ENV_TEXT, _is_env),
            "restore": (f"one of {list(RESTORE_POLICIES)}", lambda v: v in RESTORE_POLICIES),
            "on_limit": (f"one of {list(ON_LIMIT)}", lambda v: v in ON_LIMIT),
        },
    ),
    "node": (
        "a table",
        {
            "restore_pause_s": (
                "a number of seconds, 0 <= s <= 600",
                lambda v: isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 600,
            ),
        },
    ),
    "notify": (
        "a table",
        {
            "desktop": ("true or false", lambda v: isinstance(v, bool)),
            "desktop_on": (EVENTS_TEXT, _is_events),
            "timeout_s": ("a number of seconds, 0 < s <= 3600", _is_seconds),
            "command": ("an array of tables ([[notify.command]])", [COMMAND_TABLE]),
        },
    ),
    "attach": (
        "a table",
        {
            "detach_key": (
                f"one of {sorted(CTRL_KEYS)}",
                lambda v: isinstance(v, str) and v.lower() in CTRL_KEYS,
            )
        },
    ),
}


def schema() -> dict[str, Checker]:
    """``SCHEMA`` and a ``providers.<p>`` table for each provider roost registers itself."""
    return {"providers": ("a table", {p: ("a table", PROVIDER_TABLE) for p in fixed()}), **SCHEMA}


def _size_ok(value: Any) -> bool:
    match = SIZE_RE.match(value) if isinstance(value, str) else None
    if match is None:
        return False
    return all(2 <= int(n) <= 1000 for n in match.groups())


def _check(data: dict[str, Any], path: Path, lines: dict[str, int]) -> None:
    def fail(key: str, problem: str) -> RoostError:
        return _invalid(path, problem, key, _line(lines, key))

    def walk(table: dict[str, Any], schema: dict[str, Checker], prefix: str) -> None:
        for key, value in table.items():
            dotted = f"{prefix}{key}"
            if key not in schema:
                known = ", ".join(sorted(schema))
                raise fail(dotted, f"is not a setting roost knows (known here: {known})")
            what, rule = schema[key]
            if isinstance(rule, dict):
                if not isinstance(value, dict):
                    raise fail(dotted, f"must be {what}")
                walk(value, rule, f"{dotted}.")
            elif isinstance(rule, list):
                if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                    raise fail(dotted, f"must be {what}")
                for i, item in enumerate(value):
                    walk(item, rule[0], f"{dotted}[{i}].")
                    if bool(item.get("argv")) == bool(item.get("shell")):
                        raise fail(f"{dotted}[{i}]", "needs exactly one of argv and shell")
            elif not rule(value):
                raise fail(dotted, f"must be {what}")

    providers = data.get("providers", {})
    if not isinstance(providers, dict):
        raise fail("providers", "must be a table")
    known = schema()
    walk({k: v for k, v in data.items() if k != "providers"}, known, "")
    for name, table in providers.items():
        try:
            provider_spec.check_table(name, table, fixed(), tuple(PROVIDER_TABLE))
        except SpecProblem as problem:
            at = f"providers.{name}"
            raise fail(f"{at}.{problem.key}" if problem.key else at, problem.problem) from None
    walk({"providers": {p: t for p, t in providers.items() if p in fixed()}}, known, "")


def _line(lines: dict[str, int], key: str) -> int:
    parts = key.split(".")
    while parts:
        if found := lines.get(".".join(parts)):
            return found
        parts.pop()
    return 0


# -- where each key is in the file ----------------------------------------------------------------

_BARE = r"(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')"
_DOTTED = rf"{_BARE}(?:\s*\.\s*{_BARE})*"
HEADER = re.compile(rf"^\s*(\[\[?)\s*({_DOTTED})\s*\]\]?")
ASSIGN = re.compile(rf"^\s*({_DOTTED})\s*=")


def _parts(dotted: str) -> list[str]:
    return [p.strip().strip("\"'") for p in re.findall(_BARE, dotted)]


def key_lines(text: str) -> dict[str, int]:
    """Dotted key (``notify.command[0].argv``) -> the line (1-based) where the file sets it or
    opens its table. A line scan, not a parser: good enough to point at a key."""
    lines: dict[str, int] = {}
    table: list[str] = []
    arrays: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if header := HEADER.match(line):
            parts = _parts(header.group(2))
            if header.group(1) == "[[":
                base = ".".join(parts)
                arrays[base] = arrays.get(base, -1) + 1
                parts[-1] = f"{parts[-1]}[{arrays[base]}]"
                lines.setdefault(base, number)
            table = parts
            lines.setdefault(".".join(table), number)
        elif assign := ASSIGN.match(line):
            lines.setdefault(".".join([*table, *_parts(assign.group(1))]), number)
    return lines
