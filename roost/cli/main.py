"""The operator CLI ``roost``; it speaks only the wire protocol, through the client library."""

from __future__ import annotations

import importlib
import os

import click

from roost import __version__

# Each command's module is imported when the command runs (or help lists it), not at start:
# `roost ls` then loads the client and its table, never the dashboard, attach or doctor.
LAZY = {
    **{name: "roost.cli.sessions" for name in ("spawn", "ls", "show", "prompt", "send", "key")},
    **{name: "roost.cli.sessions" for name in ("resize", "rename", "stop", "resume", "forget")},
    "transcript": "roost.cli.sessions",
    "fork": "roost.cli.sessions",
    **{name: "roost.cli.control" for name in ("turn", "op", "claim", "release")},
    "node": "roost.cli.main:_node",
    "hub": "roost.cli.main:_hub",
    "events": "roost.cli.events",
    "workspace": "roost.cli.events",
    "keys": "roost.cli.keys",
    "attach": "roost.cli.attach",
    "tui": "roost.cli.tui",
    "diff": "roost.cli.diff",
    "config": "roost.cli.config:config_group",
    "doctor": "roost.cli.doctor",
    "logs": "roost.cli.logs",
    "completion": "roost.cli.completion",
    "signal": "roost.cli.integrate",
    "integrate": "roost.cli.integrate",
    "usage": "roost.cli.usage",
    "fleet": "roost.cli.fleet",
    "mcp": "roost.cli.mcp",
    "token": "roost.cli.token",
    "web": "roost.cli.web",
}


def _node() -> click.Command:
    from roost.cli.backup import node_backup
    from roost.cli.install import node_install
    from roost.cli.node import node

    node.add_command(node_install)
    node.add_command(node_backup)
    return node


def _hub() -> click.Command:
    from roost.cli.hub import hub
    from roost.cli.install import hub_install

    hub.add_command(hub_install)
    return hub


def _load(name: str) -> click.Command:
    module, _, attr = LAZY[name].partition(":")
    found = getattr(importlib.import_module(module), attr or name)
    command = found() if attr.startswith("_") else found
    assert isinstance(command, click.Command) and command.name == name, name
    return command


class LazyGroup(click.Group):
    """A group whose commands are imported by name when first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY:
            command = _load(cmd_name)
            if os.environ.get("_ROOST_COMPLETE"):  # completing a command line: ids, providers
                from roost.cli.completion import install

                install(command)
            self.add_command(command)
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as err:  # no such command: the closest (click's own sees none)
            from roost.suggest import close_matches, did_you_mean

            typed = args[0] if args else ""
            hint = did_you_mean(close_matches(typed, self.list_commands(ctx)))
            if not hint or typed.startswith("-"):
                raise
            raise click.UsageError(f"{err.message} D{hint[1:]}", ctx) from None  # as click says


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="roost")
@click.option("--state-dir", envvar="ROOST_STATE_DIR", help="the node's state directory")
@click.option("--json", "as_json", is_flag=True, help="print one JSON document")
@click.option("--timeout", type=float, default=15.0, help="seconds to wait for an answer")
@click.option("--connect", envvar="ROOST_CONNECT", help="a node's tcp:// endpoint (not local)")
@click.option("--server-key", envvar="ROOST_SERVER_KEY", help="the node's CURVE public key")
@click.option("--key-file", envvar="ROOST_KEY_FILE", help="this client's key pair (keys new)")
@click.option("--hub", envvar="ROOST_HUB", help="a hub's tcp:// endpoint (like --connect)")
@click.option(
    "--node",
    "node_id",
    envvar="ROOST_NODE",
    help="through a hub: the node to address (spawn: auto, the hub picks)",
)
@click.pass_context
def cli(
    ctx: click.Context,
    state_dir: str | None,
    as_json: bool,
    timeout: float,
    connect: str | None,
    server_key: str | None,
    key_file: str | None,
    hub: str | None,
    node_id: str | None,
) -> None:
    """roost: durable, supervised sessions for AI coding-agent CLIs."""
    from roost.cli.context import Remote, make_ctx

    ctx.obj = make_ctx(state_dir, as_json, timeout)
    endpoint = hub or connect
    ctx.obj.remote = Remote(endpoint, server_key, key_file) if endpoint else None
    ctx.obj.node = node_id or ""


def main() -> None:
    if os.environ.get("_ROOST_COMPLETE"):  # completing: roost's shell classes, not click's
        from roost.cli.completion import register

        register()
    cli(prog_name="roost")


if __name__ == "__main__":
    main()
