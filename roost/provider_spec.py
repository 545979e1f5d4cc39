"""A provider the configuration file defines: a ``[providers.<name>]`` table checked into a
``ProviderSpec``, the one description of a generic PTY provider (``roost.adapters.generic``).

A bottom-layer module like ``roost.config``, which calls it: it imports nothing of roost but
the closed sets of ``roost.wire.messages``. A problem is a ``SpecProblem`` naming the key inside
the table; the configuration file's module turns it into ``config-invalid`` with the file's line.

What a table says (see OPERATIONS.md): the program (``command``) and the arguments of every
launch (``args``), of a fresh one (``fresh``) and of a resume (``resume``, where ``{id}`` is the
provider session id); where the session id comes from (``{new_id}`` in ``fresh``: a UUID roost
makes and gives the CLI; ``id_file``: the newest file under a directory, matching a glob, written
after the launch, a regex's group in it; ``id_screen``: a regex's group on the screen; none of
them: roost makes a UUID the CLI never sees, for CLIs that keep one conversation per folder and
resume without an id); the screen patterns ``ready``, ``busy`` and ``attention.<reason>``; the
pause before the submit key, the environment, the home variable and how to install the CLI.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import Any, get_args

from roost.wire.messages import AttentionReason

NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
REASONS: tuple[str, ...] = get_args(AttentionReason)
# The placeholders each template may use.
LAUNCH_FIELDS = ("cwd",)
FRESH_FIELDS = ("cwd", "new_id")
RESUME_FIELDS = ("cwd", "id")
PATH_FIELDS = ("home", "cwd", "cwd_sha256")
# The keys of a generic provider's table; any of them in a built-in provider's table is a clash.
KEYS = (
    "command",
    "args",
    "fresh",
    "resume",
    "ready",
    "busy",
    "attention",
    "id_file",
    "id_screen",
    "submit_delay_s",
    "env",
    "home_env",
    "home_dir",
    "install",
)
ID_FILE_KEYS = ("dir", "glob", "regex", "search")


class SpecProblem(Exception):
    """What is wrong with a table: ``key`` inside it (dotted, may be empty) and the problem."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key, self.problem = key, problem


@dataclass(frozen=True)
class IdFile:
    """The provider's session files: under ``dir``, matching ``glob`` (both templates of
    ``PATH_FIELDS``), the id is ``regex``'s group 1 in the file's text or its path."""

    dir: str
    glob: str
    regex: re.Pattern[str]
    search: str = "text"  # "text" (the file's first 64 KiB) or "path" (relative to dir)


@dataclass(frozen=True)
class ProviderSpec:
    name: str
    command: str
    args: tuple[str, ...] = ()
    fresh: tuple[str, ...] = ()
    resume: tuple[str, ...] = ()
    ready: re.Pattern[str] | None = None
    busy: re.Pattern[str] | None = None
    attention: tuple[tuple[str, re.Pattern[str]], ...] = ()
    id_file: IdFile | None = None
    id_screen: re.Pattern[str] | None = None
    submit_delay_s: float = 0.0
    env: dict[str, str] = field(default_factory=dict)
    home_env: str = ""
    home_dir: str = ""
    install: str = ""

    @property
    def assigns_id(self) -> bool:
        """roost makes the id at a fresh launch: given as ``{new_id}``, or kept by roost alone."""
        return self.id_file is None and self.id_screen is None


def check_table(
    name: str, table: Any, registered: tuple[str, ...], registered_keys: tuple[str, ...]
) -> None:
    """``[providers.<name>]`` of any name: a provider roost registers takes only
    ``registered_keys`` of its own (checked by the caller) and defines nothing; any other name
    defines a provider."""
    if not isinstance(table, dict):
        raise SpecProblem("", "must be a table")
    if name in registered:
        clash = [k for k in table if k in KEYS and k not in registered_keys]
        if clash:
            raise SpecProblem(
                clash[0],
                f"defines a provider, but {name!r} is built in (its table takes only"
                f" {', '.join(registered_keys)}); give the new provider a name of its own",
            )
        return
    if "command" not in table:
        raise SpecProblem(
            "",
            f"is not a provider roost knows (known here: {', '.join(sorted(registered))}); a"
            " table that defines one needs 'command' (the program to run)",
        )
    parse(name, table)


def parse(name: str, table: dict[str, Any]) -> ProviderSpec:
    """The spec of ``[providers.<name>]`` (SpecProblem: what is wrong, and where)."""
    if not NAME.match(name):
        raise SpecProblem(
            "", "is not a provider name: a-z first, then a-z, 0-9, - or _, 32 at most"
        )
    for key in table:
        if key not in KEYS:
            raise SpecProblem(key, f"is not a setting of a provider (known: {', '.join(KEYS)})")
    if "command" not in table:
        raise SpecProblem("", "defines a provider and needs 'command' (the program to run)")
    if "resume" not in table:
        raise SpecProblem("", "defines a provider and needs 'resume' (the arguments of a resume)")
    spec = ProviderSpec(
        name=name,
        command=_text(table, "command"),
        args=_template(table, "args", LAUNCH_FIELDS),
        fresh=_template(table, "fresh", FRESH_FIELDS),
        resume=_template(table, "resume", RESUME_FIELDS),
        ready=_regex(table, "ready"),
        busy=_regex(table, "busy"),
        attention=_attention(table.get("attention", {})),
        id_file=_id_file(table["id_file"]) if "id_file" in table else None,
        id_screen=_regex(table, "id_screen", groups=1),
        submit_delay_s=_seconds(table),
        env=_env(table),
        home_env=_text(table, "home_env", ""),
        home_dir=_text(table, "home_dir", ""),
        install=_text(table, "install", ""),
    )
    _check_identity(spec)
    return spec


def _check_identity(spec: ProviderSpec) -> None:
    """The screen's prompt, one source of the id at most, and a resume that can name it."""
    if spec.ready is None:
        raise SpecProblem("", "defines a provider and needs 'ready' (the pattern of its prompt)")
    given = "{new_id}" in " ".join(spec.fresh)
    sources = [
        key
        for key, on in (("fresh", given), ("id_file", spec.id_file), ("id_screen", spec.id_screen))
        if on
    ]
    if len(sources) > 1:
        raise SpecProblem(sources[1], f"is a second source of the session id ({sources[0]} is one)")
    if not sources and "{id}" in " ".join(spec.resume):
        raise SpecProblem(
            "resume",
            "uses {id}, but nothing gives the CLI an id or reads its own: put {new_id} in"
            " 'fresh', or add 'id_file' or 'id_screen'",
        )


def _text(table: dict[str, Any], key: str, default: str | None = None) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or (default is None and not value):
        raise SpecProblem(key, "must be a non-empty string")
    return value


def _template(table: dict[str, Any], key: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecProblem(key, "must be a list of strings")
    for item in value:
        check_template(key, item, allowed)
    return tuple(value)


def check_template(key: str, item: str, allowed: tuple[str, ...]) -> None:
    """``item`` uses only ``allowed`` placeholders, plain (``{{`` and ``}}`` are braces)."""
    try:
        fields = [
            (f, spec, conv) for _, f, spec, conv in string.Formatter().parse(item) if f is not None
        ]
    except ValueError as err:
        raise SpecProblem(key, f"has a bad template {item!r}: {err}") from None
    for name, spec, conv in fields:
        if name not in allowed:
            known = ", ".join("{" + a + "}" for a in allowed)
            raise SpecProblem(key, f"has an unknown placeholder {{{name}}} (known here: {known})")
        if spec or conv:
            raise SpecProblem(key, f"has a placeholder with a format or conversion in {item!r}")


def _regex(table: dict[str, Any], key: str, groups: int | None = None) -> re.Pattern[str] | None:
    if key not in table:
        return None
    return compile_regex(key, table[key], groups)


def compile_regex(key: str, value: Any, groups: int | None = None) -> re.Pattern[str]:
    """A screen or file pattern, multi-line (``^`` and ``$`` at each line)."""
    if not isinstance(value, str) or not value:
        raise SpecProblem(key, "must be a non-empty regular expression")
    try:
        pattern = re.compile(value, re.MULTILINE)
    except re.error as err:
        raise SpecProblem(key, f"is not a valid regular expression: {err}") from None
    if groups is not None and pattern.groups != groups:
        raise SpecProblem(key, f"must have exactly {groups} group (the id), not {pattern.groups}")
    return pattern


def _attention(value: Any) -> tuple[tuple[str, re.Pattern[str]], ...]:
    if not isinstance(value, dict):
        raise SpecProblem(
            "attention", f"must be a table of reason = 'regex' ({', '.join(REASONS)})"
        )
    found = []
    for reason, pattern in value.items():
        if reason not in REASONS:
            raise SpecProblem(
                f"attention.{reason}", f"is not a reason (known: {', '.join(REASONS)})"
            )
        found.append((reason, compile_regex(f"attention.{reason}", pattern)))
    return tuple(found)


def _id_file(value: Any) -> IdFile:
    if not isinstance(value, dict):
        raise SpecProblem("id_file", "must be a table with dir, glob and regex")
    for key in value:
        if key not in ID_FILE_KEYS:
            raise SpecProblem(
                f"id_file.{key}", f"is not a setting of id_file (known: {', '.join(ID_FILE_KEYS)})"
            )
    for key in ("dir", "glob", "regex"):
        if key not in value:
            raise SpecProblem("id_file", f"needs {key!r}")
    where = {k: _text(value, k) for k in ("dir", "glob")}
    for key, item in where.items():
        check_template(f"id_file.{key}", item, PATH_FIELDS)
    search = value.get("search", "text")
    if search not in ("text", "path"):
        raise SpecProblem("id_file.search", "must be 'text' or 'path'")
    return IdFile(
        where["dir"], where["glob"], compile_regex("id_file.regex", value["regex"], 1), search
    )


def _seconds(table: dict[str, Any]) -> float:
    value = table.get("submit_delay_s", 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 5:
        raise SpecProblem("submit_delay_s", "must be a number of seconds, 0 <= s <= 5")
    return float(value)


def _env(table: dict[str, Any]) -> dict[str, str]:
    value = table.get("env", {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise SpecProblem("env", 'must be a table of NAME = "value" strings')
    return dict(value)
