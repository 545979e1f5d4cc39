"""``roost hub up|status|nodes|stop``: a lab's hub, from the CLI's side.

The hub's directory is the ``--state-dir`` it is started with: its key pair and the keys it
allows (``roost keys``), a token for local use, its log. ``status``, ``nodes`` and ``stop`` reach
it locally by that directory or over the network with ``--hub``.
"""

from __future__ import annotations

import time
from typing import Any

import click

from roost.cli.context import Ctx, reader
from roost.cli.node import STOP_TIMEOUT, _alive, launch_detached, run_in_foreground
from roost.cli.output import console, emit_json
from roost.client.locate import private_dir, read_node_info
from roost.interpreter import python_module


@click.group()
def hub() -> None:
    """Run a lab's hub: nodes dial out to it, clients reach every node through it."""


@hub.command("up")
@click.option("--listen", required=True, help="tcp://ADDRESS:PORT for nodes and clients (CURVE)")
@click.option(
    "--events-port",
    type=int,
    help="the port of the hub's event endpoint (default: the --listen port + 1)",
)
@click.option(
    "--foreground",
    is_flag=True,
    help="run the hub in this process (a service manager's main process; see deploy/)",
)
@reader
def up(ctx: Ctx, listen: str, events_port: int | None, foreground: bool) -> None:
    """Start the hub in the background; returns once it serves. --foreground runs it in this
    process instead (systemd's Type=notify: it says READY=1 once it serves)."""
    state_dir = private_dir(ctx.state_dir)
    argv = python_module("roost.actors.hub", "--state-dir", str(state_dir))
    if events_port is not None:
        argv += ["--events-port", str(events_port)]
    if foreground:
        run_in_foreground([*argv, "--listen", listen])
    line = launch_detached([*argv, "--listen", listen], private_dir(state_dir / "logs"), "hub")
    if ctx.json:
        emit_json(line)
        return
    console.print(f"hub serving on {line['endpoints']['router']} (pid {line['pid']})")
    console.print(f"  events: {line['endpoints']['events']}")
    console.print(f"  server key: {line['server_key']}")


def _nodes(doc: dict[str, Any]) -> None:
    if not doc["nodes"]:
        console.print("no nodes linked")
    for n in doc["nodes"]:
        if n.get("linked", True):
            seen = f"seen {n['last_seen_s']} s ago"
        else:
            seen = f"NOT LINKED for {n['gone_s']} s"
        console.print(f"  {n['node_id']:<20} incarnation {n['incarnation']}  {seen}")


@hub.command("status")
@reader
def status(ctx: Ctx) -> None:
    """The hub's incarnation, pid, uptime and the nodes linked to it."""
    doc = ctx.call("hub.status", target="hub")
    if ctx.json:
        emit_json(doc)
        return
    console.print(f"hub (incarnation {doc['incarnation']}, pid {doc['pid']})")
    _nodes(doc)


@hub.command("nodes")
@reader
def nodes(ctx: Ctx) -> None:
    """The nodes linked to the hub now."""
    doc = ctx.call("hub.nodes", target="hub")
    emit_json(doc) if ctx.json else _nodes(doc)


@hub.command("stop")
@reader
def stop(ctx: Ctx) -> None:
    """Stop the hub (nodes and their sessions run on, and link again when a hub is back)."""
    if ctx.remote is not None:  # over the network: asked, not watched
        doc = ctx.call("hub.shutdown", target="hub")
        emit_json(doc) if ctx.json else console.print("hub stopping")
        return
    info = read_node_info(ctx.state_dir)
    reply = ctx.call("hub.shutdown", target="hub")
    deadline = time.monotonic() + STOP_TIMEOUT
    while _alive(info.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    doc = {**reply, "pid": info.pid, "stopped": not _alive(info.pid)}
    emit_json(doc) if ctx.json else console.print("hub stopped" if doc["stopped"] else "stopping")
