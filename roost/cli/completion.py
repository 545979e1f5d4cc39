"""Shell completion (bash, zsh, fish) through click's machinery.

``roost completion SHELL`` prints the script to ``eval`` (the same as ``_ROOST_COMPLETE=
bash_source roost``). Record ids and names are asked of the node, with a short deadline and in
silence: with no node running (or none answering within a second) they simply do not complete.
Providers and key names are known here. ``install`` gives every ``ID`` argument (and ``--id``)
of the command tree its completer, so the commands themselves need not know about completion.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import zmq
from click.shell_completion import CompletionItem, get_completion_class

from roost.broker.client import Client
from roost.broker.errors import RoostError
from roost.broker.locate import default_state_dir
from roost.broker.protocol import KEY_NAMES
from roost.cli.context import Ctx, reader
from roost.cli.output import emit_json
from roost.providers import names

ASK_S = 1.0  # how long completion waits for the node
SHELLS = ("bash", "zsh", "fish")


def _state_dir(ctx: click.Context) -> Path:
    given = ctx.find_root().params.get("state_dir")
    return Path(given).expanduser().resolve() if given else default_state_dir()


def _ask(ctx: click.Context, method: str) -> dict[str, Any]:
    try:
        with Client.for_state_dir(_state_dir(ctx), timeout=ASK_S) as client:
            return client.call(method, timeout=ASK_S)
    except (RoostError, zmq.ZMQError, OSError):
        return {}


def records(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Record names and ids that start with ``incomplete``, each with its provider and state."""
    found = []
    for rec in _ask(ctx, "session.list").get("records") or []:
        about = f"{rec.get('provider')} {rec.get('state')}"
        for value in (rec.get("name"), rec.get("id")):
            if value and str(value).startswith(incomplete):
                found.append(CompletionItem(str(value), help=about))
    return found


def providers(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(p) for p in names() if p.startswith(incomplete)]


def keys(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(k) for k in KEY_NAMES if k.startswith(incomplete)]


def workspaces(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Workspace names of the node, then directories."""
    found = [
        CompletionItem(str(ws["name"]), help=str(ws.get("path") or ""))
        for ws in _ask(ctx, "workspace.list").get("workspaces") or []
        if ws.get("name") and str(ws["name"]).startswith(incomplete)
    ]
    return [*found, CompletionItem(incomplete, type="dir")]


def _completer(command: click.Command, param: click.Parameter) -> Any:
    if param.name == "ref" and getattr(param, "metavar", None) != "KEY_OR_NAME":
        return records
    if param.name == "provider":
        return providers
    if param.name == "keys" and command.name == "key":
        return keys
    if param.name == "cwd_":
        return workspaces
    return None


def install(command: click.Command) -> None:
    """Give the parameters of ``command`` (and of every command under it) their completer."""
    if isinstance(command, click.Group):
        for cmd in command.commands.values():
            install(cmd)
        return
    for param in command.params:
        completer = _completer(command, param)
        if completer is not None and param._custom_shell_complete is None:
            param._custom_shell_complete = completer


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
@reader
def completion(ctx: Ctx, shell: str) -> None:
    """Print the completion script for SHELL: eval "$(roost completion bash)" in ~/.bashrc (zsh:
    the same in ~/.zshrc; fish: roost completion fish > ~/.config/fish/completions/roost.fish)."""
    root = click.get_current_context().find_root()
    cls = get_completion_class(shell)
    assert cls is not None  # every name in SHELLS has one
    script = cls(root.command, {}, "roost", "_ROOST_COMPLETE").source()
    if ctx.json:
        emit_json({"shell": shell, "script": script})
    else:
        click.echo(script)
