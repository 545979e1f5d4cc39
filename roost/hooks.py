"""The hooks roost gives agent CLIs: which events, and the command line each runs.

claude's per-record settings file (its adapter) and kimi's config block (``roost integrate
kimi``) are written from these, and ``roost signal`` (``roost.cli.hook``) maps exactly these
events to signals (``tests/unit/test_hooks.py`` holds the lists to the mapping). A module of its
own, at the bottom, since both the adapters and the CLI read it.
"""

from __future__ import annotations

import shlex

from roost.interpreter import python_module

# The hook events each CLI is given (claude's in its per-record settings file, kimi's in the
# block ``roost integrate kimi`` writes); each maps to one kind in ``roost.cli.hook``.
CLAUDE_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "Stop",
    "StopFailure",
    "Notification",
    "PermissionRequest",
    "SessionEnd",
)
KIMI_EVENTS = (
    "SessionStart",
    "TurnStarted",
    "PermissionRequest",
    "PermissionResult",
    "Stop",
    "StopFailure",
    "Interrupt",
    "SessionEnd",
)
HOOK_TIMEOUT_S = 10  # what a CLI waits for a hook at most; this one sends a datagram and exits


def hook_command(source: str) -> str:
    """The shell command line of ``roost signal SOURCE`` in this interpreter (``-P -m``: never
    a ``roost`` on PATH, nor one in the agent's working directory)."""
    return shlex.join(python_module("roost", "signal", source))
