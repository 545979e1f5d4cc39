"""The providers roost knows, and the closed sets a session is spawned with: the one home of
their names.

A provider is one line here and one module, its adapter (``roost.adapters.<provider>``), whose
class holds everything else roost knows of it: its launches and screens, the modes it runs in,
how to install its CLI, the versions the adapter follows, where the CLI keeps its files, how to
tell whether it is logged in. This module imports nothing of roost but the message types (where
the closed sets are declared), so that the configuration file's
checks, the CLI's help and choices and the state records read the names without loading any
adapter; ``roost.adapters.registry`` imports the adapters when they are wanted.

A vendor provider runs the CLI of its name, found on PATH, unless ``ROOST_<PROVIDER>_BIN`` (or
``providers.<provider>.bin`` of the configuration file) names another program; a built-in one
runs an agent roost brings, with nothing to install or check.

A provider the configuration file defines (``[providers.<name>]`` with a ``command``) runs
through the generic adapter built from that table. Its name is known to a process once that
process has read the file and called ``define`` (the node and the adapter host at start, the
CLI where it offers names), so a change to such a table takes effect at the next ``node up``.
"""

from __future__ import annotations

from typing import get_args

from roost.wire.messages import Mode, OnLimit, RestorePolicy

# How a session runs: an interactive CLI in a PTY, or one headless process per turn.
MODES: tuple[Mode, ...] = get_args(Mode)
# What `node up` does with a record that was live when the machine went down (spawn --restore).
RESTORE_POLICIES: tuple[RestorePolicy, ...] = get_args(RestorePolicy)
NEVER, RESUME = RESTORE_POLICIES
# What a usage limit does to a pty session (spawn --on-limit): report it, or continue after it.
ON_LIMIT: tuple[OnLimit, ...] = get_args(OnLimit)

# provider -> its adapter class, "module:Class"
BUILT_IN: dict[str, str] = {"echo": "roost.adapters.echo:EchoAdapter"}
VENDORS: dict[str, str] = {
    "claude": "roost.adapters.claude:ClaudeAdapter",
    "codex": "roost.adapters.codex:CodexAdapter",
    "kimi": "roost.adapters.kimi:KimiAdapter",
}

# the adapter of every provider the configuration file defines
GENERIC = "roost.adapters.generic:GenericAdapter"
_defined: list[str] = []  # the providers the configuration file defines, in its order


def define(defined: tuple[str, ...]) -> None:
    """The providers this process's configuration file defines, replacing any named before.
    A name of a built-in provider or a vendor is the configuration's error, checked before."""
    _defined[:] = [p for p in defined if p not in BUILT_IN and p not in VENDORS]


def defined() -> tuple[str, ...]:
    """The providers the configuration file defines (as far as this process has read it)."""
    return tuple(_defined)


def fixed() -> tuple[str, ...]:
    """The providers roost itself registers: the built-in ones, then the vendors."""
    return (*BUILT_IN, *VENDORS)


def names() -> tuple[str, ...]:
    """Every provider: the built-in ones first, then the vendors, each in the order above, then
    those the configuration file defines."""
    return (*BUILT_IN, *VENDORS, *_defined)


def vendors() -> tuple[str, ...]:
    """The providers that run a CLI of their own."""
    return tuple(VENDORS)


def built_in() -> tuple[str, ...]:
    """The providers that run an agent roost brings."""
    return tuple(BUILT_IN)


def adapter_path(provider: str) -> str:
    """``module:Class`` of ``provider``'s adapter (KeyError: not a provider)."""
    if provider in _defined:
        return GENERIC
    return BUILT_IN.get(provider) or VENDORS[provider]


def bin_env(provider: str) -> str | None:
    """The variable that names another program for a vendor's CLI; None for any other name."""
    return f"ROOST_{provider.upper()}_BIN" if provider in VENDORS else None
