"""``roost events`` and ``roost workspace``: the durable event log and the registered directories.

``events --follow`` subscribes first, then reads the log from ``--after``, and de-duplicates by
sequence number, so nothing committed between the two is missed (PUB/SUB has slow joiners). With
``--json`` and ``--follow`` it prints JSON Lines: one event document per line. A follower that
hears nothing for a few seconds asks whether the node (or hub) is still there and the same one
(``roost.cli.liveness``): after a restart it subscribes again and reads the log from its last
seq, so nothing is missed; a node or hub gone for ``--retry-for`` seconds fails ``unavailable``.
"""

from __future__ import annotations

from typing import Any

import click

from roost.cli.context import Ctx, command, reader
from roost.cli.liveness import RETRY_FOR_S, Liveness
from roost.cli.output import console, emit_json
from roost.cli.texts import event_line, gap_note
from roost.client.client import Client, EventStream
from roost.wire.errors import RoostError


@click.command()
@click.option("--after", type=int, default=0, help="only events with a larger sequence number")
@click.option("--id", "ref", help="only the events of one record (id or name)")
@click.option("--limit", type=int, default=1000)
@click.option("--follow", is_flag=True, help="keep printing new events as they are committed")
@click.option(
    "--retry-for",
    type=float,
    default=RETRY_FOR_S,
    show_default=True,
    help="--follow: seconds the node (or hub) may be unreachable before it fails unavailable",
)
@reader
def events(
    ctx: Ctx, after: int, ref: str | None, limit: int, follow: bool, retry_for: float
) -> None:
    """The node's durable event log, in sequence."""
    query: dict[str, Any] = {"after": after, "limit": limit}
    if ref:
        query["id"] = ref
    if not follow:
        doc = ctx.call("events.since", query)
        if ctx.json:
            emit_json(doc)
        else:
            _note_gap(doc, after)
            for event in doc["events"]:
                console.print(event_line(event), markup=False)
        return
    _follow(ctx, query, retry_for)


def _follow(ctx: Ctx, query: dict[str, Any], retry_for: float) -> None:
    """Subscribe, read the log, print what comes; a silence is a question (Liveness): a node or
    hub back after a restart is subscribed again and read from the last seq printed."""
    with ctx.client() as client:
        if query.get("id"):  # match events by record id, whatever the user named it by
            query["id"] = client.call("session.show", {"id": query["id"]})["record"]["id"]
        alive = Liveness(client, retry_for)
        stream = client.subscribe("e/")
        last = query["after"]
        try:
            last = _catch_up(ctx, client, query, last)
            while True:
                got = stream.recv(timeout=1.0)
                if got is not None:
                    alive.heard()
                    if got[1]["seq"] > last + 1:  # a gap on PUB: fill it from the log
                        last = _fill(ctx, client, alive, query, last)
                    if got[1]["seq"] <= last + 1:  # else the log has it: read at the next check
                        last = _print_event(ctx, got[1], last, query.get("id"))
                elif alive.due():
                    stream, last = _recheck(ctx, client, alive, stream, query, last)
        except KeyboardInterrupt:
            pass
        except RoostError as err:
            err.detail.setdefault("after", last)  # where `events --after` would go on from
            raise err
        finally:
            stream.close()


def _fill(ctx: Ctx, client: Client, alive: Liveness, query: dict[str, Any], last: int) -> int:
    """Read the log after ``last``; a node that does not answer now is asked again later."""
    try:
        return _catch_up(ctx, client, query, last)
    except RoostError as err:
        alive.lost(err)  # raises unless it is an outage still within --retry-for
        return int(err.detail["after"])  # what was printed before it


def _recheck(
    ctx: Ctx,
    client: Client,
    alive: Liveness,
    stream: EventStream,
    query: dict[str, Any],
    last: int,
) -> tuple[EventStream, int]:
    """After a silence: subscribe again if the node or hub restarted (or moved its events), then
    read what the log has after ``last``."""
    changed = alive.check()
    if changed is None:
        return stream, last
    if changed:
        stream.close()
        stream = client.subscribe("e/")  # subscribe first, then read: nothing falls between
    try:
        last = _catch_up(ctx, client, query, last)
    except RoostError as err:
        alive.lost(err)  # through a hub: the node's link not back yet (unreachable)
        last = int(err.detail["after"])
    else:
        alive.found()
    return stream, last


def _note_gap(doc: dict[str, Any], after: int) -> None:
    """Say on stderr that retention dropped events the reader asked for (``gap``)."""
    if note := gap_note(doc, after):
        click.echo(note, err=True)


def _catch_up(ctx: Ctx, client: Client, query: dict[str, Any], last: int) -> int:
    """Print the log after ``last``, page by page (a page may be cut short by size: ``more``),
    the next page asked for while this one prints (``Client.event_pages``). An error on the
    way says in ``detail.after`` the last seq printed, where reading goes on from."""
    try:
        for doc in client.event_pages({**query, "after": last}):
            if not ctx.json:
                _note_gap(doc, last)
            for event in doc["events"]:
                last = _print_event(ctx, event, last, query.get("id"))
    except RoostError as err:
        err.detail["after"] = last
        raise
    return last


def _print_event(ctx: Ctx, event: dict[str, Any], last: int, ref: str | None) -> int:
    if event["seq"] <= last:
        return last
    if ref and event.get("record") != ref and (event.get("data") or {}).get("name") != ref:
        return int(event["seq"])
    if ctx.json:
        emit_json(event)
    else:
        console.print(event_line(event), markup=False)
    return int(event["seq"])


@click.group()
def workspace() -> None:
    """Register and list workspaces (directories sessions run in)."""


@workspace.command("add")
@click.argument("path", type=click.Path(exists=True, file_okay=False, resolve_path=True))
@click.option("--name", help="a short name to use with spawn --cwd")
@command(op=False)
def workspace_add(ctx: Ctx, path: str, name: str | None) -> None:
    """Register PATH; a registered PATH given another --name is renamed."""
    doc = ctx.call("workspace.add", {"path": path, "name": name})
    if ctx.json:
        emit_json(doc)
        return
    ws = doc["workspace"]
    named = f" ({ws['name']})" if ws.get("name") else ""
    how = "added" if doc.get("created") else "renamed" if doc.get("renamed") else "already added"
    console.print(f"workspace {ws['id']}{named}: {ws['path']}, {how}", markup=False)


@workspace.command("ls")
@reader
def workspace_ls(ctx: Ctx) -> None:
    doc = ctx.call("workspace.list")
    if ctx.json:
        emit_json(doc)
        return
    for ws in doc["workspaces"]:
        console.print(f"{ws['id']}  {ws.get('name') or '-':<16} {ws['path']}")
