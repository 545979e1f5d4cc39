"""The operator CLI ``roost``; it speaks only the wire protocol, through the client library."""

from __future__ import annotations

import click

from roost import __version__
from roost.cli import completion, control, install, sessions
from roost.cli.attach import attach
from roost.cli.backup import node_backup
from roost.cli.config import config_group
from roost.cli.context import Remote, make_ctx
from roost.cli.diff import diff
from roost.cli.doctor import doctor
from roost.cli.events import events, workspace
from roost.cli.hub import hub as hub_group
from roost.cli.keys import keys
from roost.cli.logs import logs
from roost.cli.node import node
from roost.cli.tui import tui


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="roost")
@click.option("--state-dir", envvar="ROOST_STATE_DIR", help="the node's state directory")
@click.option("--json", "as_json", is_flag=True, help="print one JSON document")
@click.option("--timeout", type=float, default=15.0, help="seconds to wait for an answer")
@click.option("--connect", envvar="ROOST_CONNECT", help="a node's tcp:// endpoint (not local)")
@click.option("--server-key", envvar="ROOST_SERVER_KEY", help="the node's CURVE public key")
@click.option("--key-file", envvar="ROOST_KEY_FILE", help="this client's key pair (keys new)")
@click.option("--hub", envvar="ROOST_HUB", help="a hub's tcp:// endpoint (like --connect)")
@click.option("--node", "node_id", envvar="ROOST_NODE", help="through a hub: the node to address")
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
    ctx.obj = make_ctx(state_dir, as_json, timeout)
    endpoint = hub or connect
    ctx.obj.remote = Remote(endpoint, server_key, key_file) if endpoint else None
    ctx.obj.node = node_id or ""


node.add_command(install.node_install)
node.add_command(node_backup)
hub_group.add_command(install.hub_install)
cli.add_command(node)
cli.add_command(events)
cli.add_command(workspace)
cli.add_command(keys)
cli.add_command(attach)
cli.add_command(hub_group)
cli.add_command(tui)
cli.add_command(diff)
for cmd in (*sessions.COMMANDS, *control.COMMANDS):
    cli.add_command(cmd)
for cmd in (config_group, doctor, logs, completion.completion):
    cli.add_command(cmd)
completion.install(cli)  # after every command is added: record ids, providers, key names


def main() -> None:
    cli(prog_name="roost")


if __name__ == "__main__":
    main()
