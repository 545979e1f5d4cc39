"""How the CLI prints: one JSON document with ``--json``, readable text otherwise."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from roost.broker.errors import RoostError

# No markup: what is printed is data (keys hold "[" and "]", screens hold anything).
console = Console(highlight=False, soft_wrap=True, markup=False)


def _default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(type(value).__name__)


def emit_json(doc: Any) -> None:
    click.echo(json.dumps(doc, default=_default, sort_keys=True))


def fail(err: RoostError, as_json: bool) -> None:
    """Print an error the way the caller asked and exit 1."""
    if as_json:
        emit_json({"error": err.to_body()})
    else:
        click.echo(f"error: {err.code}: {err.message}", err=True)
    sys.exit(1)


def records_table(records: Iterable[dict[str, Any]]) -> Table:
    """One row a record; through a hub, led by the node that holds it."""
    records = list(records)
    nodes = any("node" in rec for rec in records)
    table = Table(box=None, pad_edge=False)
    columns = ("ID", "NAME", "PROVIDER", "MODE", "STATE", "GEN", "PROVIDER SESSION")
    for col in ("NODE", *columns) if nodes else columns:
        table.add_column(col)
    for rec in records:
        state = rec["state"] + (f" ({rec['attention']})" if rec.get("attention") else "")
        table.add_row(
            *([rec.get("node") or "-"] if nodes else []),
            rec["id"],
            rec.get("name") or "-",
            rec["provider"],
            rec["mode"],
            state,
            str(rec["generation"]),
            rec.get("provider_session") or "-",
        )
    return table


def record_lines(rec: dict[str, Any]) -> list[str]:
    active = rec.get("active") or {}
    lines = [
        f"id:               {rec['id']}",
        f"name:             {rec.get('name') or '-'}",
        f"provider:         {rec['provider']} ({rec['mode']})",
        f"state:            {rec['state']}"
        + (f" ({rec['attention']})" if rec.get("attention") else ""),
        f"generation:       {rec['generation']}",
        f"provider session: {rec.get('provider_session') or '-'}",
        f"cwd:              {rec['cwd']}",
    ]
    if active:
        lines.append(f"supervisor pid:   {active.get('pid')}  agent pid: {active.get('agent_pid')}")
    if rec.get("last_exit"):
        lines.append(f"last exit:        {rec['last_exit']}")
    return lines


def show(doc: dict[str, Any], as_json: bool, text: Callable[[dict[str, Any]], None]) -> None:
    if as_json:
        emit_json(doc)
    else:
        text(doc)
