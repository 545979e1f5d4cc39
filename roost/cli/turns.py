"""``turn --wait``: a stream-mode turn's output shown as it arrives, until the turn ends.

It subscribes to the record's events first, then reads from the log what the turn already wrote
(PUB/SUB has slow joiners), then prints each of the turn's events as it is published. PUB may
drop, so the end is also asked for (``session.turn.wait`` without waiting) after every silence of
``CHECK_S``, and before it finishes it reads the turn's events from the log once more and prints
those it has not shown. With ``--json`` nothing is printed until the end: one document with the
turn and its events.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from roost.cli.context import Ctx
from roost.cli.output import compact
from roost.client.client import Client
from roost.wire.errors import RoostError

CHECK_S = 2.0  # silence after which the node is asked whether the turn has ended
TRANSIENT = ("timeout", "unreachable", "unavailable")
EXIT_TURN_FAILED = 3  # the turn ended failed or interrupted


class TurnView:
    """The events of one turn, each printed once, in the order they arrive."""

    def __init__(self, turn_id: str, as_json: bool, after: int = 0) -> None:
        self.turn_id, self.json = turn_id, as_json
        self.after = after  # the log holds the turn's events after this seq
        self.seen: set[int] = set()
        self.events: list[dict[str, Any]] = []
        self.ended = False
        self._chunked = False

    def take(self, event: dict[str, Any]) -> None:
        data = event.get("data") or {}
        if data.get("turn") != self.turn_id or event["seq"] in self.seen:
            return
        self.seen.add(event["seq"])
        self.events.append(event)
        if event["kind"] == "session.turn":
            self.ended = True
        if not self.json:
            self._print(event["kind"], data)

    def _print(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "session.chunk":
            click.echo(data.get("text") or "", nl=False)
            self._chunked = True
            return
        if kind == "session.output" and self._chunked:  # its text was shown chunk by chunk
            self._chunked = False
            click.echo()
            return
        if line := event_text(kind, data):
            click.echo(line)


def event_text(kind: str, data: dict[str, Any]) -> str:
    """One turn event as a line of text; empty for those not shown (the end, the input)."""
    if kind == "session.input":
        return f"> {data.get('text') or ''}"
    if kind == "session.output":
        return str(data.get("text") or "")
    if kind == "session.tool_call":
        return f"tool {data.get('name') or '?'} {compact(data.get('input'))}"
    if kind == "session.tool_result":
        mark = "error" if data.get("is_error") else "result"
        return f"  {mark}: {data.get('content') or ''}"
    if kind == "session.stderr":
        return f"  stderr: {data.get('line') or ''}"
    return ""


def follow(
    ctx: Ctx, client: Client, rid: str, turn_id: str, after: int, timeout: float
) -> dict[str, Any]:
    """Show the turn's events (those after seq ``after``) until it ends; returns
    ``session.turn.wait``'s answer, the turn and its events."""
    view = TurnView(turn_id, ctx.json, after)
    stream = client.subscribe(f"e/{rid}/")
    deadline = time.monotonic() + timeout
    try:
        _catch_up(client, rid, view)
        quiet_since = time.monotonic()
        while True:
            got = stream.recv(timeout=0.5)
            if got is not None:
                view.take(got[1])
                quiet_since = time.monotonic()
            if view.ended or time.monotonic() - quiet_since >= CHECK_S:
                quiet_since = time.monotonic()
                ended = _ended(client, rid, turn_id)
                if ended is not None:
                    _catch_up(client, rid, view)
                    return {**ended, "events": sorted(view.events, key=lambda e: e["seq"])}
            if time.monotonic() > deadline:
                raise RoostError("timeout", "the turn has not ended yet", {"turn": turn_id})
    finally:
        stream.close()


def _ended(client: Client, rid: str, turn_id: str) -> dict[str, Any] | None:
    try:
        reply = client.call("session.turn.wait", {"id": rid, "turn": turn_id, "timeout_ms": 0})
    except RoostError as err:
        if err.code in TRANSIENT:  # the node restarting: ask again after the next silence
            return None
        raise
    return reply if reply["ended"] else None


def _catch_up(client: Client, rid: str, view: TurnView) -> None:
    """Read the record's log and take the turn's events not yet shown, in order."""
    for doc in client.event_pages({"id": rid, "after": view.after, "limit": 1000}):
        for event in doc["events"]:
            view.take(event)


def outcome(turn: dict[str, Any]) -> str:
    """Why a turn that did not complete ended, in words."""
    result = turn.get("result") or {}
    said = result.get("reason") or result.get("provider_error")
    if not said and result.get("is_error"):
        said = result.get("result")
    if result.get("exit") not in (None, 0):
        said = f"{said} (exit {result['exit']})" if said else f"exit {result['exit']}"
    return f"turn {turn['id']}: {turn['state']}" + (f": {said}" if said else "")


def finish(ctx: Ctx, doc: dict[str, Any]) -> None:
    """The end of ``turn --wait``: the turn's state; exit 3 when it did not complete."""
    turn = doc["turn"]
    failed = turn["state"] != "completed"
    if not ctx.json:
        click.echo(outcome(turn), err=failed)
    if failed:
        sys.exit(EXIT_TURN_FAILED)
