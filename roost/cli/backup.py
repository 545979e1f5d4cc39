"""``roost node backup DEST``: a consistent copy of the node's state database, taken while it
serves. The state store writes it (SQLite's online backup); DEST is a path on the node's machine,
made absolute here against the current directory."""

from __future__ import annotations

import os

import click

from roost.cli.context import Ctx, command
from roost.cli.output import console, emit_json

BACKUP_TIMEOUT_S = 630.0  # the node's own limit (600 s) and the way back


@click.command("backup")
@click.argument("dest", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="replace DEST if it exists")
@command(op=False, grant=False)
def node_backup(ctx: Ctx, dest: str, force: bool) -> None:
    """Copy the state database (records, events, workspaces, the node id) to DEST, a new file
    (mode 0600), while the node keeps serving. Not in it: keys, tokens, allowed.json, session
    transcripts and logs (docs/OPERATIONS.md, Backups, says how to restore)."""
    path = os.path.abspath(os.path.expanduser(dest))
    reply = ctx.call(
        "node.backup",
        {"path": path, "force": force},
        timeout=BACKUP_TIMEOUT_S,
        waiting="the state store to copy the database",
    )
    if ctx.json:
        emit_json(reply)
        return
    console.print(
        f"backup written: {reply['path']} ({reply['bytes']:,} bytes, events up to seq "
        f"{reply['last_seq']}, {reply['seconds']:.2f} s)"
    )
