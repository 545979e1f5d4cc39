"""How the CLI prints: one JSON document with ``--json``, readable text otherwise."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from roost.cli.listing import compact as compact
from roost.cli.listing import json_text
from roost.cli.listing import printable as printable
from roost.cli.listing import records_table as records_table
from roost.wire.errors import RoostError

# Control characters that would move the cursor or ring: dropped from text output (as rich's
# Text dropped them when it printed for us). Escape sequences in screens stay the user's to see.
_STRIP = dict.fromkeys((7, 8, 11, 12, 13))


class Console:
    """Prints text lines to stdout, as they are: no markup, no highlighting, no emoji codes,
    no wrapping (what is printed is data: keys hold "[" and "]", screens hold anything). It
    stands where a rich Console did, without rich's import on every command's start."""

    def print(self, *objects: Any, sep: str = " ", end: str = "\n", **_: Any) -> None:
        text = sep.join(str(o) for o in objects).translate(_STRIP)
        click.echo(text + end, nl=False)


console = Console()


def emit_json(doc: Any) -> None:
    click.echo(json_text(doc))


EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT) stopped a wait, as a shell reports it: 128 + 2


def fail(err: RoostError, as_json: bool) -> None:
    """Print an error the way the caller asked and exit 1 (130 for ``interrupted``)."""
    if as_json:
        emit_json({"error": err.to_body()})
    else:
        click.echo(f"error: {err.code}: {err.message}", err=True)
    sys.exit(EXIT_INTERRUPTED if err.code == "interrupted" else 1)


def exit_text(last: dict[str, Any]) -> str:
    """``last_exit`` in words: an exit code, a signal, a loss or a launch error."""
    if "lost" in last:
        return f"lost ({last['lost']})"
    if isinstance(err := last.get("error"), dict):
        return f"failed to start: {err.get('code')}: {err.get('message')}"
    if last.get("signal"):
        number = int(last["signal"])
        try:
            name = f" ({signal.Signals(number).name})"
        except ValueError:
            name = ""
        return f"killed by signal {number}{name}"
    if last.get("code") is not None:
        return f"exited with code {last['code']}"
    return ", ".join(f"{k} {v}" for k, v in sorted(last.items()) if v is not None) or "-"


def record_lines(rec: dict[str, Any]) -> list[str]:
    active = rec.get("active") or {}
    lines = [
        f"id:               {rec['id']}",
        f"name:             {printable(rec.get('name') or '-')}",
        f"provider:         {rec['provider']} ({rec['mode']})",
        f"state:            {rec['state']}"
        + (f" ({rec['attention']})" if rec.get("attention") else ""),
        f"generation:       {rec['generation']}",
        f"provider session: {rec.get('provider_session') or '-'}",
        f"cwd:              {rec['cwd']}",
    ]
    if worktree := rec.get("worktree"):
        lines.append(
            f"worktree:         branch {worktree['branch']} of {worktree['repo']} "
            f"(base {str(worktree['base'])[:12]})"
        )
    if active.get("pid"):
        agent = f"  agent pid: {active['agent_pid']}" if active.get("agent_pid") else ""
        lines.append(f"supervisor pid:   {active['pid']}{agent}")
    if supervisor := active.get("supervisor"):
        release = supervisor.get("roost")
        runs = f"roost {release}" if release else "a release that does not say (before wire 2)"
        lines.append(f"supervisor:       wire {supervisor.get('wire')}, {runs}")
    if rec.get("last_exit"):
        lines.append(f"last exit:        {exit_text(rec['last_exit'])}")
    return lines


def plain(value: Any) -> str:
    """A value as words, not a Python repr: maps as ``key value, ...``, lists comma-separated."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {plain(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(plain(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "-" if value is None else str(value)


def endpoint_text(name: str, endpoint: Any) -> str:
    """One line of ``node status``'s endpoints; a hub link says whether it is up."""
    if name == "hub" and isinstance(endpoint, dict):
        linked = "linked" if endpoint.get("linked") else "NOT linked"
        return f"{endpoint.get('endpoint')} ({linked})"
    return plain(endpoint)


def accepted_text(what: str, doc: dict[str, Any]) -> str:
    """``prompt accepted (event 12)``; a repeated operation says it was the first outcome."""
    seq = f" (event {doc['seq']})" if doc.get("seq") is not None else ""
    again = f", already, under operation {doc['op']['id']}" if doc.get("duplicate") else ""
    return f"{what} accepted{seq}{again}"


def show(doc: dict[str, Any], as_json: bool, text: Callable[[dict[str, Any]], None]) -> None:
    if as_json:
        emit_json(doc)
    else:
        text(doc)
