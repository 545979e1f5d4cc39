"""The command line of a Python process roost starts: ``python -P -m <module> ARGS``.

Every process of roost's own is started this way: the daemon and the hub (``node up``, ``hub
up``), ``node repair``, the state store and the adapter host, the zygote, a supervisor started
without it, the provider checks, and the CLI that ``make demo`` and a unit file without a
``roost`` script run. They start in the caller's working directory (a supervisor and the zygote
in the daemon's), which may be a checkout of roost or a repository an agent works in, and
``-m`` alone puts that directory first on ``sys.path``: a ``roost/`` package there would be
imported and run in place of the installed roost. ``-P`` (Python 3.11 and later) prepends
nothing, so ``roost`` and every module it imports come from where it is installed; a
supervisor forked by the zygote inherits the zygote's ``sys.path``, so that holds for it too.
(The echo agent runs as a script file, ``python -S echo_agent.py``: the script's own directory,
in the installed roost, is first on its ``sys.path``, not the working directory.)

Not ``-I``: it also ignores ``PYTHONPATH``, the other ``PYTHON*`` variables and the user's
site-packages, where an installation (or a test environment) may put roost or what it needs.
Nor a neutral working directory: each start would have to choose one, and ``-P`` removes
the entry at its source, whatever directory a process is started in.
"""

from __future__ import annotations

import sys

SAFE_PATH = "-P"  # don't prepend the working directory (or a script's) to sys.path


def python_module(module: str, *args: str) -> list[str]:
    """The argv that runs ``module`` (``python -m module ARGS``) in this interpreter, with the
    installed roost and never a ``roost`` package in the working directory."""
    return [sys.executable, SAFE_PATH, "-m", module, *args]
