"""``roost keys new|show|allow|revoke``: CURVE keys for network endpoints (local files)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from roost.cli.context import Ctx, reader
from roost.cli.output import console, emit_json
from roost.client import keys as k
from roost.wire.errors import RoostError


@click.group("keys")
def keys() -> None:
    """The node's CURVE key pair and the client keys allowed to connect over the network.

    In a shell, give a key in single quotes ('KEY'): z85 keys hold <>&()#!{}[] and more."""


@keys.command("new")
@click.option(
    "--client",
    "client_file",
    type=click.Path(dir_okay=False),
    help="write a client key pair to this file (0600) instead of the node's",
)
@click.option("--force", is_flag=True, help="replace the node's existing key pair")
@reader
def new(ctx: Ctx, client_file: str | None, force: bool) -> None:
    """Make the node's key pair (or, with --client FILE, a client's)."""
    if client_file:
        public, secret = k.new_pair()
        path = Path(client_file)
        if path.exists() and not force:
            raise RoostError("bad-request", "the key file exists (use --force to replace it)")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"public": public, "secret": secret}, fh)
        doc = {"client": True, "public": public}
    else:
        doc = {"client": False, "public": k.make_node_keys(ctx.state_dir, force=force)}
    emit_json(doc) if ctx.json else console.print(f"public key: {doc['public']}")


@keys.command("show")
@reader
def show(ctx: Ctx) -> None:
    """The node's public key and the authorised client keys with their roles."""
    pair = k.node_keys(ctx.state_dir)
    table = k.allowed(ctx.state_dir)
    if ctx.json:
        emit_json({"node_public": pair[0] if pair else None, "allowed": table})
        return
    console.print(f"node public key: {pair[0] if pair else '(none: roost keys new)'}")
    for key, entry in sorted(table.items()):
        console.print(f"  {key}  {entry['role']:<9} {entry.get('name') or ''}")


class KeyCommand(click.Command):
    """A command whose argument may be a z85 key beginning with "-" (one in 85 does): such a
    40-character argument is read as the key, not as a cluster of short options."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" not in args:
            keys = [a for a in args if len(a) == 40 and a.startswith("-")]
            if keys:
                args = [a for a in args if a not in keys] + ["--", *keys]
        return super().parse_args(ctx, args)


@keys.command("allow", cls=KeyCommand)
@click.argument("public")
@click.option("--role", type=click.Choice(k.ROLES), default="operator")
@click.option("--name", default="", help="a name to revoke it by (role node: the node id)")
@click.option("--replace", is_flag=True, help="role node: revoke the key the node id has now")
@reader
def allow(ctx: Ctx, public: str, role: str, name: str, replace: bool) -> None:
    """Authorise a public key, with a role. The same key again replaces its role and name; a
    node id has one key (another is refused node-id-conflict without --replace)."""
    doc = k.allow(ctx.state_dir, public, role, name, replace=replace)
    if ctx.json:
        emit_json(doc)
        return
    was = doc["replaced"]
    console.print(
        f"allowed {public} as {role}"
        + (f" (was {was['role']} {was.get('name') or ''})" if was else "")
    )
    for key in doc["revoked"]:
        console.print(f"revoked {key}, the key node {name} had")


@keys.command("revoke", cls=KeyCommand)
@click.argument("ref", metavar="KEY_OR_NAME")
@reader
def revoke(ctx: Ctx, ref: str) -> None:
    """Stop accepting a key, or every key allowed under a name (its next message is refused)."""
    doc = k.revoke(ctx.state_dir, ref)
    if ctx.json:
        emit_json(doc)
    elif doc["by"] == "key":
        console.print(f"revoked {ref}")
    else:
        console.print(f"revoked {doc['count']} key(s) named {ref!r}: {', '.join(doc['revoked'])}")
