"""Is a provider's CLI there? The program of a launch, looked up as the agent's exec would.

A vendor CLI that is not installed (or a ``ROOST_<PROVIDER>_BIN`` that names nothing executable)
is refused at spawn and resume with ``provider-missing``, in both modes, before any record or
process exists: naming the program looked for, the variable that points at another binary, and
how to install it. Without this check a pty spawn ended ``launch-failed`` with a ``failed``
record holding the name, and a stream spawn answered ``live`` and failed only at its first turn.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

from roost.wire.errors import RoostError


def find_program(program: str, env: Mapping[str, str], cwd: str) -> str | None:
    """The executable ``program`` names, as ``execvpe`` in ``cwd`` with ``env`` would find it:
    a path (relative to ``cwd`` when not absolute) or a name on ``env``'s PATH; None if none."""
    if os.sep in program or (os.altsep and os.altsep in program):
        path = program if os.path.isabs(program) else os.path.join(cwd, program)
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return shutil.which(program, path=env.get("PATH", os.defpath))


def missing(provider: str, program: str, bin_env: str | None, install: str) -> RoostError:
    """``provider-missing``: what was looked for, and the two ways to fix it."""
    fixes = []
    if bin_env:
        fixes.append(
            f"point {bin_env} at it (spawn --env {bin_env}=/path/to/{provider}, or"
            f" providers.{provider}.bin in the config file)"
        )
    if install:
        fixes.append(f"install it: {install}")
    message = f"the {provider} CLI was not found: no executable {program!r}"
    if not (os.sep in program or (os.altsep and os.altsep in program)):
        message += " on PATH"
    if fixes:
        message += "; " + ", or ".join(fixes)
    return RoostError(
        "provider-missing",
        message,
        {"provider": provider, "program": program, "env": bin_env, "install": install},
    )
