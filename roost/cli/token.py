"""``roost token new|list|revoke``: scoped tokens, for an agent that drives only its own sessions.

A scoped token is kept in the node's state directory as its SHA-256 (``scoped-tokens.json``);
``new`` prints it once. A client that connects with it (``ROOST_TOKEN``, e.g. ``roost mcp`` given
to an agent) is an operator of only the sessions it spawned and their forks; every other record
and every node-wide method is ``forbidden``. The node reads the file again when it changes: a
revoked token is refused from its next request.
"""

from __future__ import annotations

import time
from dataclasses import asdict

import click

from roost.cli.context import Ctx, reader
from roost.cli.output import console, emit_json
from roost.client import scoped
from roost.client.locate import private_dir


@click.group("token")
def token() -> None:
    """Scoped tokens: a token that sees and drives only the sessions spawned with it."""


@token.command("new")
@click.option(
    "--scope",
    type=click.Choice(scoped.SCOPES),
    required=True,
    help="own: only the sessions spawned with this token, and their forks",
)
@click.option("--name", default="", help="what the token is for (shown by token list)")
@click.option("--max-live", type=int, help="at most this many of its sessions live at once")
@reader
def new(ctx: Ctx, scope: str, name: str, max_live: int | None) -> None:
    """Make a scoped token and print it once (it is kept only as a hash): give it to the client
    as ROOST_TOKEN, e.g. in an agent's MCP server entry for `roost mcp`."""
    secret, entry = scoped.new(private_dir(ctx.state_dir), scope, name, max_live)
    if ctx.json:
        emit_json({"token": secret, **asdict(entry)})
        return
    console.print(f"scoped token {entry.id} ({entry.scope}" + (f", {name}" if name else "") + ")")
    click.echo(secret)
    console.print("shown only now: give it to the client as ROOST_TOKEN; revoke with")
    console.print(f"  roost token revoke {entry.id}")


@token.command("list")
@reader
def listing(ctx: Ctx) -> None:
    """The scoped tokens (their ids, names, scopes and limits; never the tokens)."""
    entries = [asdict(e) for e in scoped.listed(ctx.state_dir)]
    if ctx.json:
        emit_json({"tokens": entries})
        return
    if not entries:
        console.print("no scoped tokens")
    for e in entries:
        limit = f", at most {e['max_live']} live" if e["max_live"] is not None else ""
        made = time.strftime("%Y-%m-%d %H:%M", time.localtime(e["created"]))
        console.print(f"{e['id']}  {e['scope']}{limit}  made {made}  {e['name']}")


@token.command("revoke")
@click.argument("token_id", metavar="ID")
@reader
def revoke(ctx: Ctx, token_id: str) -> None:
    """Revoke a scoped token: refused from its next request, on connections already open too.
    Its sessions run on, for the node's own operators."""
    entry = scoped.revoke(ctx.state_dir, token_id)
    emit_json({"revoked": asdict(entry)}) if ctx.json else console.print(f"revoked {entry.id}")
