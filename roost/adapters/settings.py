"""What the configuration file and the node's environment add to a provider's launch.

The adapters read the program to run from ``ROOST_<PROVIDER>_BIN`` in the launch environment;
here that variable is filled in when the record's ``--env`` does not set it (the node's
environment first, then ``providers.<p>.bin`` of the file), and the file's ``providers.<p>.env``
goes under the record's ``--env``. ``binary`` says which program a launch would run and whether it
is there, for ``node status`` and ``roost doctor``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from roost.adapters.base import LaunchContext
from roost.adapters.binary import find_program
from roost.config import Config
from roost.providers import bin_env


def with_settings(
    provider: str, ctx: LaunchContext, cfg: Config, environ: Mapping[str, str]
) -> tuple[LaunchContext, dict[str, str]]:
    """The launch context the adapter sees, and the variables the agent's environment gains:
    the file's provider env and the binary, minus what the record sets itself. The agent's
    environment then carries them, so later requests for the session (stream turns, identity,
    classification) see the same."""
    added = {k: v for k, v in cfg.provider_env(provider).items() if k not in ctx.env}
    var = bin_env(provider)
    if var and not ctx.env.get(var):
        program, source = cfg.provider_bin(provider, environ, ctx.env)
        if source.kind != "default":
            added[var] = program
    return replace(ctx, env={**added, **ctx.env}), added


def binary(provider: str, cfg: Config, environ: Mapping[str, str]) -> dict[str, Any]:
    """The program a fresh launch of ``provider`` runs (with no ``--env`` of the record): what
    is looked for, where that name came from, and the path found (None: missing)."""
    program, source = cfg.provider_bin(provider, environ)
    search = cfg.provider_env(provider).get("PATH") or environ.get("PATH")
    found = find_program(program, {"PATH": search or os.defpath}, os.getcwd())
    return {"looked_for": program, "from": source.label(), "path": found, "missing": found is None}
