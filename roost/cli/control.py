"""``roost turn``, ``roost op``, ``roost claim`` and ``roost release``."""

from __future__ import annotations

from typing import Any

import click

from roost.cli import turns
from roost.cli.context import Ctx, command, reader, roost_line
from roost.cli.output import accepted_text, console, emit_json
from roost.cli.texts import op_text
from roost.wire.errors import RoostError


@click.command()
@click.argument("ref", metavar="ID")
@click.argument("text", required=False)
@click.option("--wait", is_flag=True, help="wait for the turn (or the latest one) to end")
@click.option("--wait-timeout", type=float, default=600.0, help="seconds --wait waits at most")
@command
def turn(ctx: Ctx, ref: str, text: str | None, wait: bool, wait_timeout: float) -> None:
    """Run a stream-mode turn with TEXT; --wait shows its output as it comes and waits for its
    end (exit 3 when it failed or was interrupted)."""
    if text is None and not wait:
        raise RoostError(
            "bad-request", "give TEXT to start a turn, or --wait to wait for one", {"field": "text"}
        )
    doc: dict[str, Any] = {}
    if text is not None:
        doc = ctx.call("session.turn", {"id": ref, "text": text}, timeout=60.0)
        if not wait:
            _print(ctx, doc, accepted_text(f"turn {doc.get('turn')}", doc))
            return
    with ctx.client() as client:
        if doc.get("turn"):
            rid = doc.get("record") or client.call("session.show", {"id": ref})["record"]["id"]
            turn_id, after = doc["turn"], int(doc.get("seq") or 1) - 1
        else:  # the latest turn of the record
            latest = client.call("session.turn.wait", {"id": ref, "timeout_ms": 0})["turn"]
            rid, turn_id, after = latest["record"], latest["id"], 0
        _goes_on(ctx, ref, rid, turn_id, after)
        doc.update(turns.follow(ctx, client, rid, turn_id, after, wait_timeout))
    if ctx.json:
        emit_json(doc)
    turns.finish(ctx, doc)


def _goes_on(ctx: Ctx, ref: str, rid: str, turn_id: str, after: int) -> None:
    """What Ctrl-C in the wait says: the turn goes on, and how to follow it."""
    events = roost_line(ctx, "events", "--follow", "--id", rid, "--after", str(after))
    said = (
        f"turn {turn_id} of {ref} goes on: follow it with `{events}`, or wait for it again with"
        f" `{roost_line(ctx, 'turn', ref, '--wait')}`"
    )
    if ctx.op:
        said += f"; `{roost_line(ctx, 'op', ctx.op)}` says what became of it"
    ctx.goes_on, ctx.goes_on_detail = said, {"record": rid, "turn": turn_id}


def _print(ctx: Ctx, doc: dict[str, Any], text: str) -> None:
    emit_json(doc) if ctx.json else console.print(text)


@click.command("op")
@click.argument("op_id", metavar="OPID")
@reader
def op(ctx: Ctx, op_id: str) -> None:
    """Look up an operation id: accepted, terminal (with its result), interrupted or unknown."""
    doc = ctx.call("operation.lookup", {"op": op_id}, op="")
    _print(ctx, doc, op_text(op_id, doc))


@click.command()
@click.argument("ref", metavar="ID")
@click.option("--lease-ms", type=int, default=30_000, help="lease length; renew before it lapses")
@click.option("--take-over", is_flag=True, help="fence the current holder's grant")
@click.option("--renew", default="", help="renew this grant instead of claiming anew")
@reader
def claim(ctx: Ctx, ref: str, lease_ms: int, take_over: bool, renew: str) -> None:
    """Claim a session for control: others' mutating requests are refused while it lasts."""
    doc = ctx.call(
        "session.claim",
        {"id": ref, "lease_ms": lease_ms, "take_over": take_over, "renew": renew or None},
    )
    c = doc["claim"]
    _print(
        ctx,
        doc,
        f"grant {c['grant']} on {c['record']} (generation {c['generation']}), "
        f"{c['expires_in_ms']} ms",
    )


@click.command()
@click.argument("ref", metavar="ID")
@click.argument("grant_id", metavar="GRANT")
@reader
def release(ctx: Ctx, ref: str, grant_id: str) -> None:
    """Release a claim."""
    doc = ctx.call("session.release", {"id": ref, "grant": grant_id})
    _print(ctx, doc, f"released {doc['record']}")
