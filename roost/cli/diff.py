"""``roost diff ID``: what a session spawned with ``--worktree`` changed against its base.

The node runs git in the record's worktree (``session.diff``); this prints its answer: the branch
and base, the commits made since, every file changed (committed, uncommitted or untracked), then
one patch of it all, as ``git diff`` prints it.
"""

from __future__ import annotations

from typing import Any

import click

from roost.cli.context import Ctx, reader
from roost.cli.output import emit_json

STATUS = {"A": "added", "M": "modified", "D": "deleted", "T": "type changed", "?": "untracked"}


def summary(doc: dict[str, Any]) -> list[str]:
    """The lines before the patch."""
    lines = [
        f"branch {doc['branch']} (worktree {doc['path']})",
        f"base {doc['base'][:12]}, head {doc['head'][:12]}, {len(doc['commits'])} commit(s) since",
    ]
    lines += [f"  {c['sha'][:12]} {c.get('subject', '')}" for c in doc["commits"]]
    if not doc["files"]:
        lines.append("no changes against the base")
    for entry in doc["files"]:
        lines.append(f"  {STATUS.get(entry['status'][:1], entry['status']):<12} {entry['path']}")
    if doc["uncommitted"]:
        lines.append(f"{len(doc['uncommitted'])} file(s) not committed")
    return lines


@click.command()
@click.argument("ref", metavar="ID")
@click.option("--stat", is_flag=True, help="the summary only, without the patch")
@reader
def diff(ctx: Ctx, ref: str, stat: bool) -> None:
    """What a --worktree session changed against its base: commits, files, and the patch
    (committed and uncommitted changes, untracked files included)."""
    doc = ctx.call("session.diff", {"id": ref}, waiting="git in the session's worktree")
    if ctx.json:
        emit_json(doc)
        return
    click.echo("\n".join(summary(doc)))
    if not stat and doc["patch"]:
        click.echo()
        click.echo(doc["patch"], nl=False)
        if doc.get("truncated"):
            click.echo("\n... (the patch is cut here; see git diff in the worktree)")
