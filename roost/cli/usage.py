"""``roost usage [--since WHEN]``: tokens and cost the providers reported, by session, provider
and day.

The node sums them (``node.usage``) and reads ``WHEN`` (a span such as ``7d`` or ``12h``, or an
ISO date); this prints its answer as three tables, or with ``--json`` as it came.
"""

from __future__ import annotations

from typing import Any

import click

from roost.cli.context import Ctx, reader
from roost.cli.output import emit_json
from roost.wire.usage import Usage, check

HEAD = f"{'input':>10} {'cache rd':>10} {'cache wr':>10} {'output':>10} {'cost USD':>10}"


def figures(usage: Usage) -> str:
    """One row's numbers: input, cache read, cache written, output, cost (``-``: none)."""
    cost = f"{usage['cost_usd']:.4f}" if "cost_usd" in usage else "-"
    return (
        f"{usage['input']:>10} {usage['cache_read']:>10} {usage['cache_write']:>10} "
        f"{usage['output']:>10} {cost:>10}"
    )


def usage_lines(doc: dict[str, Any]) -> list[str]:
    """The three tables, each with its total row last."""
    lines: list[str] = []
    for title, rows, key in (
        ("session", doc["session"], "name"),
        ("provider", doc["provider"], "provider"),
        ("day (UTC)", doc["day"], "day"),
    ):
        lines.append(f"{'by ' + title:<24} {HEAD}")
        for row in rows:
            label = str(row.get(key) or row.get("record"))[:22]
            used = check(row["usage"])
            if used is not None:
                lines.append(f"  {label:<22} {figures(used)}")
        lines.append("")
    total = check(doc["total"])
    if total is not None:
        lines.append(f"{'total':<24} {figures(total)}")
    return lines


@click.command("usage")
@click.option(
    "--since",
    metavar="WHEN",
    help="only what was reported since WHEN: a span back from now (7d, 12h, 30m, 2w) "
    "or an ISO date or date-time (UTC unless it says)",
)
@reader
def usage(ctx: Ctx, since: str | None) -> None:
    """Tokens and cost the providers reported, summed by session, provider and day."""
    doc = ctx.call("node.usage", {"since": since} if since is not None else {})
    if ctx.json:
        emit_json(doc)
        return
    if not doc["session"]:
        click.echo("no usage reported" + (f" since {since}" if since else ""))
        return
    click.echo("\n".join(usage_lines(doc)))
