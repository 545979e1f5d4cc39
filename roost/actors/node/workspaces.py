"""What the node says when a spawn's ``cwd`` names no workspace and no directory."""

from __future__ import annotations

from typing import Any

from roost.wire.errors import RoostError

LISTED = 20  # workspaces named in the message; ``detail.workspaces`` has them all


def unknown_cwd(value: str, workspaces: list[dict[str, Any]]) -> RoostError:
    """``bad-cwd`` naming the value asked for and the registered workspaces (by name, else id)."""
    shown = value[:256]
    known = [f"{w.get('name') or w['id']} ({w['path']})" for w in workspaces]
    if known:
        more = f", and {len(known) - LISTED} more" if len(known) > LISTED else ""
        listed = "; registered workspaces: " + ", ".join(known[:LISTED]) + more
    else:
        listed = "; no workspace is registered (`roost workspace add PATH --name NAME`)"
    return RoostError(
        "bad-cwd",
        f"{shown!r} is neither a registered workspace (id, name or path) nor an existing "
        f"absolute directory{listed}",
        {
            "field": "cwd",
            "value": value[:4096],
            "workspaces": [{k: w.get(k) for k in ("id", "name", "path")} for w in workspaces],
        },
    )
