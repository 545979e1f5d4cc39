"""How the CLI prints: one JSON document with ``--json``, readable text otherwise."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from roost.cli.listing import compact as compact
from roost.cli.listing import json_text
from roost.cli.listing import printable as printable
from roost.cli.listing import records_table as records_table
from roost.cli.texts import STRIP
from roost.cli.texts import accepted_text as accepted_text
from roost.cli.texts import exit_text as exit_text
from roost.cli.texts import record_lines as record_lines
from roost.wire.errors import RoostError


class Console:
    """Prints text lines to stdout, as they are: no markup, no highlighting, no emoji codes,
    no wrapping (what is printed is data: keys hold "[" and "]", screens hold anything). It
    stands where a rich Console did, without rich's import on every command's start."""

    def print(self, *objects: Any, sep: str = " ", end: str = "\n", **_: Any) -> None:
        text = sep.join(str(o) for o in objects).translate(STRIP)
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


def show(doc: dict[str, Any], as_json: bool, text: Callable[[dict[str, Any]], None]) -> None:
    if as_json:
        emit_json(doc)
    else:
        text(doc)
