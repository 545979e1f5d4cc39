"""Session commands: spawn, ls, show, prompt, send, key, resize, rename, stop, resume, fork,
forget."""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import replace
from typing import Any

import click

from roost.cli.context import WAITING, Ctx, command, reader
from roost.cli.listing import ls_text
from roost.cli.output import accepted_text, console, emit_json, record_lines
from roost.cli.progress import waiting
from roost.cli.readiness import READY_TIMEOUT_S, wait_ready
from roost.cli.restore import follow, print_outcomes, print_plan
from roost.cli.table import terminal_width
from roost.cli.texts import show_lines
from roost.providers import MODES, ON_LIMIT, RESTORE_POLICIES, names
from roost.wire.errors import RoostError
from roost.wire.policy import AUTO, HUB

SIZE_RE = re.compile(r"^(\d+)x(\d+)$")


def _size(value: str | None) -> dict[str, int]:
    if not value:
        return {}
    match = SIZE_RE.match(value)
    if not match:
        raise RoostError("bad-request", "size is ROWSxCOLS, for example 40x120", {"field": "size"})
    return {"rows": int(match.group(1)), "cols": int(match.group(2))}


def _env(pairs: tuple[str, ...]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RoostError(
                "bad-request", f"--env takes KEY=VALUE, not {pair!r}", {"field": "env"}
            )
        env[key] = value
    return env


def _record_out(ctx: Ctx, doc: dict[str, Any], verb: str = "") -> None:
    if ctx.json:
        emit_json(doc)
        return
    rec = doc["record"]
    if verb:
        console.print(
            f"{verb} {rec['id']} ({rec.get('name') or 'unnamed'}): {_known(rec)}, "
            f"generation {rec['generation']}"
        )
    else:
        console.print("\n".join(record_lines(rec)))


def _known(rec: dict[str, Any]) -> str:
    """What is known of a record just launched: a pty agent whose screen has not been read yet
    is ``starting`` (it may show a prompt, ask for a login or exit a moment later)."""
    if rec["state"] == "live" and rec.get("activity") == "starting":
        return "starting (the agent runs; its screen is not read yet: --wait-ready waits)"
    if rec["state"] == "attention" and rec.get("attention"):
        return f"attention ({rec['attention']})"
    return str(rec["state"])


def _launched(
    ctx: Ctx,
    method: str,
    body: dict[str, Any],
    verb: str,
    ready: float | None,
    placed: dict[str, Any] | None = None,
) -> None:
    """Spawn or resume; with ``ready`` (--wait-ready) also wait for ready, attention or exit.
    ``placed``: the hub's choice of node (``hub.place``), said first and kept in the JSON."""
    if placed is not None and not ctx.json:
        console.print(f"placed on {placed['node']}: {placed['why']}")
    with ctx.client() as client, waiting(WAITING[method]) as progress:
        doc = client.call(
            method, body, timeout=60.0, op=ctx.op, grant=ctx.grant, on_wait=progress.tick
        )
        progress.done()
        if ready is not None:
            doc = {**doc, "record": wait_ready(client, doc["record"], ready), "ready": True}
    _record_out(ctx, doc if placed is None else {**doc, "placed": placed}, verb)


WAIT_READY = click.option(
    "--wait-ready",
    "wait_ready_",
    is_flag=True,
    help="wait until the session is ready for input; exit 1 if it needs a human or ends first",
)
READY_TIMEOUT = click.option(
    "--ready-timeout",
    type=float,
    default=READY_TIMEOUT_S,
    show_default=True,
    help="--wait-ready: seconds to wait before giving up (timeout)",
)


SPAWN_HELP = f"""Start a live session of PROVIDER ({", ".join(names())}), or of a provider the
    config file defines ([providers.NAME]). The config file's [spawn] mode, size, env, restore and
    on_limit are the defaults of --mode, --size, --env, --restore and --on-limit.

    It answers once the agent runs, before its screen is read (`starting`); --wait-ready waits
    until it is ready for input, and fails (exit 1) if it needs a human or ends first.

    Through a hub, --node auto lets the hub pick the node: a healthy one with the provider
    installed and logged in, the least loaded; it says which and why."""


@click.command(help=SPAWN_HELP)
@click.argument("provider")
@click.option("--name", help="a display name, unique on this node")
@click.option("--cwd", "cwd_", help="a registered workspace (id, name or path) or a directory")
@click.option("--env", "env", multiple=True, help="KEY=VALUE passed to the agent (repeatable)")
@click.option("--size", help="terminal size ROWSxCOLS (default 40x120, or spawn.size)")
@click.option("--mode", type=click.Choice(MODES), help="default pty, or spawn.mode")
@WAIT_READY
@READY_TIMEOUT
@click.option(
    "--worktree",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[BRANCH]",
    help="run in a new git worktree of --cwd's repository, on a new branch BRANCH from HEAD "
    "(default roost/<name>)",
)
@click.option(
    "--restore",
    type=click.Choice(RESTORE_POLICIES),
    help="after a reboot, node up cold-resumes it (resume) or leaves it dormant (never); "
    "default never, or spawn.restore",
)
@click.option(
    "--on-limit",
    type=click.Choice(ON_LIMIT),
    help="at a usage-limit screen, report it (wait) or type the provider's continue prompt once "
    "its reset time has passed (continue); default wait, or spawn.on_limit",
)
@command
def spawn(
    ctx: Ctx,
    provider: str,
    name: str | None,
    cwd_: str | None,
    env: tuple[str, ...],
    size: str | None,
    mode: str | None,
    wait_ready_: bool,
    ready_timeout: float,
    worktree: str | None,
    restore: str | None,
    on_limit: str | None,
) -> None:
    cwd = cwd_ or os.getcwd()
    if cwd_ and os.path.isdir(cwd_):
        cwd = os.path.abspath(cwd_)
    from roost.config import load  # only spawn reads the config file

    defaults = load()
    body = {
        "provider": provider,
        "name": name,
        "cwd": cwd,
        "env": {**defaults.spawn_env(), **_env(env)},
        "mode": mode or defaults.spawn_mode()[0],
        "restore": restore or defaults.spawn_restore()[0],
        "on_limit": on_limit or defaults.spawn_on_limit()[0],
        **_size(size or defaults.spawn_size()[0]),
    }
    if worktree is not None:
        body["worktree"] = worktree or True
    placed = None
    if ctx.node == AUTO:  # the hub picks the node, and says why
        placed = _place(ctx, provider)
        ctx.node = placed["node"]
    ready = ready_timeout if wait_ready_ else None
    _launched(ctx, "session.spawn", body, "spawned", ready, placed)


def _place(ctx: Ctx, provider: str) -> dict[str, Any]:
    """The hub's choice of a node for a session of ``provider`` (``hub.place``)."""
    with replace(ctx, node="").client() as client:
        if client.target != HUB:
            raise RoostError(
                "bad-request",
                "--node auto is for a hub (--hub ENDPOINT): it picks one of its nodes",
                {"field": "node"},
            )
        placed: dict[str, Any] = client.call(
            "hub.place", {"provider": provider}, timeout=max(ctx.timeout, 40.0)
        )
    return placed


@click.command("ls")
@reader
def ls(ctx: Ctx) -> None:
    """The records: id, name, provider, mode, state, generation, provider session id."""
    doc = ctx.call("session.list")
    if ctx.json:
        emit_json(doc)
        return
    out, unanswered = ls_text(doc, terminal_width())
    click.echo(out)
    for line in unanswered:  # through a hub
        click.echo(line, err=True)


@click.command()
@click.argument("ref", metavar="ID")
@click.option("--screen", is_flag=True, help="include the session's current screen")
@reader
def show(ctx: Ctx, ref: str, screen: bool) -> None:
    """A record, and with --screen the session's visible screen."""
    doc = ctx.call("session.show", {"id": ref, "screen": screen})
    if ctx.json:
        emit_json(doc)
        return
    record, screen_lines = show_lines(doc, screen)
    console.print(record)
    for line in screen_lines:  # as they are: a screen keeps its control characters
        click.echo(line)


def _accepted(ctx: Ctx, doc: dict[str, Any], what: str) -> None:
    if ctx.json:
        emit_json(doc)
    else:
        console.print(accepted_text(what, doc))


@click.command()
@click.argument("ref", metavar="ID")
@click.argument("text")
@command
def prompt(ctx: Ctx, ref: str, text: str) -> None:
    """Type TEXT and submit it."""
    _accepted(ctx, ctx.call("session.prompt", {"id": ref, "text": text}), "prompt")


@click.command()
@click.argument("ref", metavar="ID")
@click.argument("text")
@command
def send(ctx: Ctx, ref: str, text: str) -> None:
    """Type raw TEXT, without submitting."""
    _accepted(ctx, ctx.call("session.input", {"id": ref, "text": text}), "input")


@click.command()
@click.argument("ref", metavar="ID")
@click.argument("keys", nargs=-1, required=True)
@command
def key(ctx: Ctx, ref: str, keys: tuple[str, ...]) -> None:
    """Press named KEYS: enter, escape, interrupt, tab, up, down, left, right, ..."""
    _accepted(ctx, ctx.call("session.key", {"id": ref, "keys": list(keys)}), "keys")


@click.command()
@click.argument("ref", metavar="ID")
@click.argument("size")
@command
def resize(ctx: Ctx, ref: str, size: str) -> None:
    """Resize the session's terminal to ROWSxCOLS."""
    doc = ctx.call("session.resize", {"id": ref, **_size(size)})
    emit_json(doc) if ctx.json else console.print(f"resized to {doc['rows']}x{doc['cols']}")


@click.command()
@click.argument("ref", metavar="ID")
@click.argument("name")
@command
def rename(ctx: Ctx, ref: str, name: str) -> None:
    """Give a record a new display name."""
    _record_out(ctx, ctx.call("session.rename", {"id": ref, "name": name}), "renamed")


@click.command()
@click.argument("ref", metavar="ID")
@click.option("--grace-ms", type=int, default=3000, help="SIGTERM grace before SIGKILL")
@command
def stop(ctx: Ctx, ref: str, grace_ms: int) -> None:
    """Stop the live session; the record becomes dormant, its provider session id kept."""
    doc = ctx.call(
        "session.stop",
        {"id": ref, "grace_ms": grace_ms},
        timeout=grace_ms / 1000 + 30,
        waiting=f"{ref} to stop (SIGTERM; SIGKILL after {grace_ms / 1000:g} s)",
    )
    _record_out(ctx, doc, "stopped")


@click.command()
@click.argument("ref", metavar="ID", required=False)
@click.option(
    "--all",
    "all_",
    is_flag=True,
    help="every dormant record whose restore policy is resume, one at a time (as node up "
    "after a reboot)",
)
@click.option(
    "--restore-wait",
    type=float,
    default=120.0,
    show_default=True,
    metavar="SECONDS",
    help="--all: wait this long for the outcomes (0: return at once)",
)
@WAIT_READY
@READY_TIMEOUT
@command
def resume(
    ctx: Ctx,
    ref: str | None,
    all_: bool,
    restore_wait: float,
    wait_ready_: bool,
    ready_timeout: float,
) -> None:
    """Cold-resume a dormant record by its provider session id (a new generation); with
    --wait-ready, wait as for spawn. --all resumes every dormant record whose restore policy is
    resume (spawn --restore), one at a time, and reports each outcome; through a hub without
    --node, on every linked node (one at a time on each, the nodes side by side)."""
    if all_ == bool(ref):
        raise RoostError("bad-request", "give a record ID or --all, not both", {"field": "id"})
    if all_:
        _resume_all(ctx, restore_wait)
        return
    ready = ready_timeout if wait_ready_ else None
    _launched(ctx, "session.resume", {"id": ref}, "resumed", ready)


@click.command()
@click.argument("ref", metavar="NAME")
@click.option("--name", help="the new record's name (default: NAME-fork, then NAME-fork-2, ...)")
@WAIT_READY
@READY_TIMEOUT
@command
def fork(ctx: Ctx, ref: str, name: str | None, wait_ready_: bool, ready_timeout: float) -> None:
    """Start a new record whose conversation begins as a copy of NAME's, by the provider CLI's
    own fork, in NAME's cwd with its mode and settings. NAME (a record id or name) needs its
    provider session id; it and its conversation are left as they are. The new record gets its
    own provider session id (provider-cannot-fork where the CLI has no fork)."""
    body: dict[str, Any] = {"id": ref}
    if name:
        body["name"] = name
    _launched(ctx, "session.fork", body, "forked", ready_timeout if wait_ready_ else None)


def _resume_all(ctx: Ctx, wait_s: float) -> None:
    with ctx.client() as client:
        if client.target == HUB and not ctx.node:
            client.close()
            _resume_fleet(ctx, wait_s)
            return
        plan = client.call("session.restore", {}, op=ctx.op, grant=ctx.grant)
        if not ctx.json:
            if not plan["records"] and not plan["skipped"]:
                console.print("no dormant record has restore policy resume")
            print_plan(plan)
        followed = follow(client, plan, wait_s)
    if ctx.json:
        emit_json(followed)
    else:
        print_outcomes(followed)


def _resume_fleet(ctx: Ctx, wait_s: float) -> None:
    """``resume --all`` through a hub: every linked node restores its own records, one at a
    time on each node and the nodes side by side; then each node's outcomes are followed."""
    nodes = [n["node_id"] for n in ctx.call("hub.nodes", target="hub")["nodes"] if n["linked"]]
    plans, unanswered = {}, {}
    for node_id in nodes:  # each node starts its batch at once and answers with its plan
        try:
            plans[node_id] = replace(ctx, node=node_id).call("session.restore", {})
        except RoostError as err:
            unanswered[node_id] = err.code
    followed = {}
    for node_id, plan in plans.items():
        if not ctx.json:
            click.echo(f"node {node_id}:")
            print_plan(plan)
        try:
            with replace(ctx, node=node_id).client() as client:
                followed[node_id] = follow(client, plan, wait_s)
        except RoostError as err:
            unanswered[node_id] = err.code
            continue
        if not ctx.json:
            print_outcomes(followed[node_id])
    if ctx.json:
        emit_json({"nodes": followed, "unanswered": unanswered})
        return
    if not nodes:
        click.echo("no nodes are linked to this hub")
    for node_id, code in unanswered.items():
        click.echo(f"node {node_id}: did not answer ({code}); run resume --all --node {node_id}")


@click.command()
@click.argument("ref", metavar="ID")
@click.option(
    "--remove-worktree",
    is_flag=True,
    help="also remove its git worktree; refused while the worktree has uncommitted changes",
)
@command
def forget(ctx: Ctx, ref: str, remove_worktree: bool) -> None:
    """Delete a record that is not live (its worktree stays unless --remove-worktree)."""
    doc = ctx.call("session.forget", {"id": ref, "remove_worktree": remove_worktree})
    if ctx.json:
        emit_json(doc)
        return
    console.print(f"forgot {doc['record']['id']}")
    if removed := doc.get("worktree"):
        console.print(f"removed the worktree {removed['path']}; branch {removed['branch']} kept")
        if repo := removed.get("repo"):  # what a new worktree on that branch needs
            delete = f"git -C {shlex.quote(repo)} branch -D {shlex.quote(removed['branch'])}"
            console.print(f"(a new --worktree on that branch needs it gone first: `{delete}`)")
    elif kept := doc["record"].get("worktree"):
        console.print(f"the worktree {kept['path']} (branch {kept['branch']}) is kept")


@click.command()
@click.argument("ref", metavar="ID")
@click.option("--offset", type=int, default=0, help="byte offset to read from")
@click.option("--limit", type=int, default=65536)
@reader
def transcript(ctx: Ctx, ref: str, offset: int, limit: int) -> None:
    """The session's raw terminal output, from a byte offset."""
    doc = ctx.call("session.transcript", {"id": ref, "offset": offset, "limit": limit})
    if ctx.json:
        emit_json(doc)
    else:
        sys.stdout.buffer.write(doc["data"])
        sys.stdout.flush()
