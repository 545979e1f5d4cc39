"""Shell completion (bash, zsh, fish) through click's machinery.

``roost completion SHELL`` prints the script to ``eval`` (the same as ``_ROOST_COMPLETE=
bash_source roost``). Record ids and names are asked of the node, with a short deadline and in
silence: with no node running (or none answering within a second) they simply do not complete.
Providers and key names are known here. ``install`` gives every ``ID`` argument (and ``--id``)
of the command tree its completer, so the commands themselves need not know about completion.

Record names hold anything printable (``Fix Login!``, emoji, commas). ``register`` puts roost's
bash and fish classes in click's place: bash gets each value escaped for its command line and
a script that inserts it as given (click's inserts it unquoted, so a name with a space became
two words); fish's script splits a line at its first comma only. zsh's ``compadd`` quotes what
it inserts, and click escapes its colons.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import zmq
from click.shell_completion import (
    BashComplete,
    CompletionItem,
    FishComplete,
    add_completion_class,
    get_completion_class,
)

from roost.cli.context import Ctx, reader
from roost.cli.output import emit_json
from roost.client.client import Client
from roost.client.locate import default_state_dir
from roost.providers import names
from roost.wire.errors import RoostError
from roost.wire.protocol import KEY_NAMES

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
    """The providers roost registers, and those the config file defines (none when the file
    cannot be read: ``roost doctor`` says why)."""
    from roost.config import load  # only when a provider is completed

    try:
        defined = load().defined_providers()
    except RoostError:
        defined = ()
    return [CompletionItem(p) for p in (*names(), *defined) if p.startswith(incomplete)]


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


# What bash reads as syntax in a word: escaped with a backslash in a completion it inserts.
BASH_SPECIAL = frozenset(" \t\n!\"#$&'()*;<>?[\\]^`{|}~:=")


def bash_word(value: str) -> str:
    """``value`` as one word of a bash command line: ``Fix Login!`` -> ``Fix\\ Login\\!``."""
    return "".join("\\" + c if c in BASH_SPECIAL else c for c in value)


class Bash(BashComplete):
    """click's bash completion, each value escaped by roost and inserted as it comes."""

    source_template = BashComplete.source_template.replace(
        "IFS=',' read type value", "IFS=',' read -r type value"
    ).replace("COMPREPLY+=($value)", 'COMPREPLY+=("$value")')

    def format_completion(self, item: CompletionItem) -> str:
        if item.type == "plain":
            return f"plain,{bash_word(item.value)}"
        return super().format_completion(item)


class Fish(FishComplete):
    """click's fish completion, its lines split at the first comma only (names hold commas)."""

    source_template = FishComplete.source_template.replace(
        'string split "," $completion', 'string split -m 1 "," -- $completion'
    )


def register() -> None:
    """roost's bash and fish classes in click's place (before click completes a command line)."""
    add_completion_class(Bash, "bash")
    add_completion_class(Fish, "fish")


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
    register()
    cls = get_completion_class(shell)
    assert cls is not None  # every name in SHELLS has one
    script = cls(root.command, {}, "roost", "_ROOST_COMPLETE").source()
    if ctx.json:
        emit_json({"shell": shell, "script": script})
    else:
        click.echo(script)
