"""The operator CLI ``roost``; it speaks only the wire protocol, through the client library."""

from __future__ import annotations

import click

from roost import __version__
from roost.cli import control, sessions
from roost.cli.context import make_ctx
from roost.cli.events import events, workspace
from roost.cli.node import node


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="roost")
@click.option("--state-dir", envvar="ROOST_STATE_DIR", help="the node's state directory")
@click.option("--json", "as_json", is_flag=True, help="print one JSON document")
@click.option("--timeout", type=float, default=15.0, help="seconds to wait for an answer")
@click.pass_context
def cli(ctx: click.Context, state_dir: str | None, as_json: bool, timeout: float) -> None:
    """roost: durable, supervised sessions for AI coding-agent CLIs."""
    ctx.obj = make_ctx(state_dir, as_json, timeout)


cli.add_command(node)
cli.add_command(events)
cli.add_command(workspace)
for cmd in (*sessions.COMMANDS, *control.COMMANDS):
    cli.add_command(cmd)


def main() -> None:
    cli(prog_name="roost")


if __name__ == "__main__":
    main()
