"""Shared CLI plumbing: global options, finding the node, turning errors into exit codes."""

from __future__ import annotations

import functools
import json
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast, overload

import click

from roost.cli import texts
from roost.cli.output import fail
from roost.cli.progress import Progress
from roost.cli.texts import next_step as next_step
from roost.cli.texts import suggested, wants_suggestions
from roost.client.client import Client, Curve
from roost.client.locate import default_state_dir
from roost.wire.errors import RoostError
from roost.wire.policy import AUTO, node_address

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Remote:
    """A node reached over the network: its endpoint, and CURVE keys unless it is loopback."""

    endpoint: str
    server_key: str | None
    key_file: str | None

    def client(self, timeout: float) -> Client:
        curve = None
        if self.server_key or self.key_file:
            if not (self.server_key and self.key_file):
                raise RoostError("bad-request", "CURVE needs both --server-key and --key-file")
            try:
                pair = json.loads(Path(self.key_file).read_text())
                curve = Curve(self.server_key, pair["public"], pair["secret"])
            except (OSError, ValueError, KeyError, TypeError):
                raise RoostError("bad-request", "the key file cannot be read") from None
        token = os.environ.get("ROOST_TOKEN", "")
        client = Client(self.endpoint, token, timeout=timeout, curve=curve)
        client.initialize()
        return client


@dataclass
class Ctx:
    state_dir: Path
    json: bool
    timeout: float
    op: str = ""
    grant: str = ""
    remote: Remote | None = None
    node: str = ""  # through a hub: the node addressed (--node)
    quiet: bool = False  # no progress notes (the dashboard owns the terminal)
    # What goes on when Ctrl-C stops the command's wait, and how to follow it (``interrupted``)
    goes_on: str = ""
    goes_on_detail: dict[str, Any] = field(default_factory=dict)

    def client(self) -> Client:
        if self.remote is not None:
            client = self.remote.client(self.timeout)
        else:
            try:
                client = Client.for_state_dir(self.state_dir, timeout=self.timeout)
            except RoostError as err:
                raise not_running(err, self.state_dir) from None
        if self.node == AUTO:
            client.close()
            raise RoostError(
                "bad-request",
                "--node auto is spawn's (the hub picks a node for a new session); name the node",
                {"field": "node"},
            )
        if self.node:
            if client.target != "hub":
                client.close()
                raise RoostError(
                    "bad-request",
                    "--node names a node behind a hub; this is a node",
                    {"field": "node"},
                )
            client.via(node_address(self.node))
        return client

    def call(
        self,
        method: str,
        body: dict[str, Any] | None = None,
        *,
        waiting: str = "",
        **kw: Any,
    ) -> dict[str, Any]:
        """One request, carrying the command's operation id and claim grant, if any; after a
        second without an answer it says on stderr what it waits for (``waiting``)."""
        kw.setdefault("op", self.op)
        kw.setdefault("grant", self.grant)
        with self.client() as client:
            if self.quiet:
                return client.call(method, body, **kw)
            progress = Progress(waiting or WAITING.get(method) or f"the node's answer ({method})")
            try:
                return client.call(method, body, on_wait=progress.tick, **kw)
            finally:
                progress.done()


WAITING = {
    "session.spawn": "the session to start",
    "session.resume": "the session to resume",
    "session.fork": "the fork to start",
    "session.stop": "the session to stop (SIGTERM, then SIGKILL after the grace)",
    "node.shutdown": "the node to stop",
}


def not_running(err: RoostError, state_dir: Path) -> RoostError:
    """``node-not-running`` that names the state directory and the command that fixes it."""
    if err.code != "node-not-running":
        return err
    hub = click.get_current_context(silent=True)
    what = (
        "hub up --listen tcp://ADDRESS:PORT"
        if hub and " hub " in f"{hub.command_path} "
        else "node up"
    )
    fix = f"roost {what}"
    if state_dir != default_state_dir():
        fix = f"roost --state-dir {shlex.quote(str(state_dir))} {what}"
    kind = "hub" if "hub up" in fix else "node"
    if "pid" in err.detail:  # node.json names a daemon that died (SIGKILL, a crash)
        said = f"the {kind} of the state directory {state_dir} (pid {err.detail['pid']}) is gone"
    else:
        said = f"no {kind} is running for the state directory {state_dir}"
    return RoostError(
        "node-not-running",
        f"{said}; start it with `{fix}`",
        {**err.detail, "state_dir": str(state_dir), "fix": fix},
    )


@overload
def command(fn: F, *, op: bool = ..., grant: bool = ...) -> F: ...
@overload
def command(fn: None = ..., *, op: bool = ..., grant: bool = ...) -> Callable[[F], F]: ...
def command(fn: F | None = None, *, op: bool = True, grant: bool = True) -> Any:
    """Adds ``--json`` to a command (and, for commands that change something, ``--op`` and
    ``--grant``: ``@command(op=False, grant=False)`` for one that only reads) and turns
    RoostError into an error document and exit 1."""
    if fn is None:
        return functools.partial(command, op=op, grant=grant)

    @functools.wraps(fn)
    def wrapper(*args: Any, as_json: bool = False, **kwargs: Any) -> Any:
        ctx: Ctx = click.get_current_context().obj
        ctx.json = ctx.json or as_json
        ctx.op = kwargs.pop("op", "") or ctx.op
        ctx.grant = kwargs.pop("grant", "") or ctx.grant
        try:
            return fn(ctx, *args, **kwargs)
        except RoostError as err:
            fail(explain(ctx, suggest(ctx, err)), ctx.json)
        except KeyboardInterrupt:  # not click's bare "Aborted!": what goes on, how to follow it
            fail(interrupted(ctx), ctx.json)

    options = [click.option("--json", "as_json", is_flag=True, help="print one JSON document")]
    if op:
        options.append(
            click.option(
                "--op", default="", help="operation id: a repeat returns the first outcome"
            )
        )
    if grant:
        options.append(
            click.option(
                "--grant",
                default="",
                envvar="ROOST_GRANT",
                help="the claim grant to act under (env ROOST_GRANT)",
            )
        )
    for option in options:
        wrapper = option(wrapper)
    return cast(F, wrapper)


def reader(fn: F) -> F:
    """A command that only reads: ``--json``, and no ``--op``/``--grant``."""
    return command(fn, op=False, grant=False)


def suggest(ctx: Ctx, err: RoostError) -> RoostError:
    """A record the command's ID did not find: ``did you mean`` the records named closest."""
    if not wants_suggestions(err, click.get_current_context().params.get("ref")):
        return err
    try:
        records = ctx.call("session.list", op="", grant="")["records"]
    except RoostError:
        return err
    return suggested(err, records)


def interrupted(ctx: Ctx) -> RoostError:
    """Ctrl-C during a wait: the wait stops, not what the node was asked to do."""
    if ctx.goes_on:
        said = ctx.goes_on
    else:
        said = "a request already sent may still be carried out"
        if ctx.op:
            said += f": `{roost_line(ctx, 'op', ctx.op)}` says what became of it"
    detail = {**ctx.goes_on_detail, **({"op": ctx.op} if ctx.op else {})}
    return RoostError("interrupted", f"stopped waiting (Ctrl-C); {said}", detail)


def roost_line(ctx: Ctx, *args: str) -> str:
    """The ``roost`` command line of ARGS for this node (its ``--state-dir`` when not the
    default one), quoted for a shell."""
    return texts.roost_line(str(ctx.state_dir) if not_default(ctx) else "", *args)


def not_default(ctx: Ctx) -> bool:
    return ctx.remote is None and ctx.state_dir != default_state_dir()


def explain(ctx: Ctx, err: RoostError) -> RoostError:
    """An error about the record the command's ID named, as the user named it: the name typed
    beside the record id the node said, and the command that comes next (``detail.fix``)."""
    current = click.get_current_context()
    given = str(ctx.state_dir) if not_default(ctx) else ""
    return texts.explained(err, current.params.get("ref"), current.command.name or "", given)


def make_ctx(state_dir: str | None, as_json: bool, timeout: float) -> Ctx:
    path = Path(state_dir).expanduser().resolve() if state_dir else default_state_dir()
    return Ctx(path, as_json, timeout)


def cwd() -> str:
    return os.getcwd()
