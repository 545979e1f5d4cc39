"""``roost fleet``: every node of a hub's lab at a glance (``hub.fleet``).

A line a node: linked or not, healthy or what is wrong, its roost version, its providers with
their login, its sessions live and waiting for a human, its load and free memory. Through a hub
only (``--hub``, or the hub's ``--state-dir`` on its host).
"""

from __future__ import annotations

from typing import Any

import click

from roost.cli.context import Ctx, reader
from roost.cli.output import emit_json
from roost.cli.table import Column, render, terminal_width
from roost.wire.errors import RoostError
from roost.wire.policy import HUB

COLUMNS = (
    Column("NODE"),
    Column("STATE", shrink=True, floor=10),
    Column("ROOST", drop=2),
    Column("PROVIDERS", shrink=True, floor=12),
    Column("LIVE"),
    Column("WAITING"),
    Column("LOAD", drop=1),
    Column("FREE MB", drop=1),
)
LOGIN = {"logged-in": "", "logged-out": " (logged out)", "unknown": " (login?)", None: ""}


@click.command()
@reader
def fleet(ctx: Ctx) -> None:
    """Every node of the hub's lab: linked, healthy, roost version, providers and their login,
    sessions live and waiting for a human, load and free memory."""
    with ctx.client() as client:
        if client.target != HUB:
            raise RoostError(
                "bad-request",
                "roost fleet is a hub's view: give --hub ENDPOINT (or the hub's --state-dir)",
                {"field": "hub"},
            )
        doc = client.call("hub.fleet", timeout=max(ctx.timeout, 40.0))
    if ctx.json:
        emit_json(doc)
        return
    if not doc["nodes"]:
        click.echo("no nodes have linked to this hub since it started")
        return
    click.echo(render(COLUMNS, [_row(n) for n in doc["nodes"]], terminal_width()))


def _row(node: dict[str, Any]) -> list[str]:
    if not node.get("linked"):
        return [node["node_id"], f"down ({node.get('gone_s', 0):.0f} s)", "", "", "", "", "", ""]
    if not node["answered"]:
        return [node["node_id"], f"not answering ({node['problem']})", "", "", "", "", "", ""]
    host = node.get("host") or {}
    load = host.get("load") or ["-"]
    sessions = node["sessions"]
    return [
        node["node_id"],
        "ok" if node["healthy"] else str(node["problem"]),
        str(node.get("roost") or "?"),
        providers(node["providers"]) or "-",
        str(sessions["live"]),
        str(sessions["attention"]),
        f"{load[0]}/{host.get('cpus', '?')}",
        str((host.get("memory_mb") or {}).get("available", "?")),
    ]


def providers(checked: dict[str, Any]) -> str:
    """The providers a node can run, each with its login where that is not plain."""
    shown = []
    for name, one in checked.items():
        if one.get("installed"):
            shown.append(name + LOGIN.get(one.get("login"), ""))
    return ", ".join(shown)
