"""`roost node install-service` and `roost hub install-service`: the unit written, enabled and
started (deploy/systemd/ has the same units for installing by hand; roost/cli/service.py says
why they look as they do)."""

from __future__ import annotations

import getpass
import os
import shlex
import subprocess
import sys
from pathlib import Path

import click

from roost.cli import service
from roost.cli.context import Ctx, command
from roost.cli.output import console, emit_json
from roost.interpreter import python_module
from roost.wire.errors import RoostError


def this_roost() -> str:
    """The command that runs this very roost: the ``roost`` script beside this interpreter,
    else the interpreter with ``-P -m roost`` (roost.interpreter: a user unit runs in
    the user's home directory, which may hold a ``roost`` checkout)."""
    script = Path(sys.executable).with_name("roost")
    if script.is_file() and os.access(script, os.X_OK):
        return str(script)
    return " ".join(python_module("roost"))


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def _config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def _install(ctx: Ctx, kind: str, user: bool, start: bool, for_user: str | None) -> None:
    if not user and os.geteuid() != 0:
        raise RoostError(
            "service-failed",
            "a system unit needs root: run it with sudo, or use --user for a user unit",
        )
    instance = for_user or os.environ.get("SUDO_USER") or getpass.getuser()
    # the state directory named (--state-dir, ROOST_STATE_DIR) goes into the unit: the service
    # must serve the directory the user named, not the default one
    named = (
        str(ctx.state_dir)
        if click.get_current_context().find_root().params.get("state_dir")
        else None
    )
    chosen = f"--state-dir {shlex.quote(named)} " if named else ""
    instead = f"roost {chosen}node up" if kind == "node" else f"roost {chosen}hub up --listen ..."
    done = service.install(
        kind,
        user=user,
        roost_bin=this_roost(),
        config_home=_config_home(),
        instance=instance,
        start=start,
        run=_run,
        state_dir=named,
        instead=instead,
    )
    doc = {
        **done.to_json(),
        "exec": this_roost(),
        "scope": "user" if user else "system",
        "state_dir": named,
    }
    if ctx.json:
        emit_json(doc)
        return
    console.print(f"wrote {done.path}" + (f" (it serves {named})" if named else ""))
    for line in done.to_json()["commands"]:
        console.print(f"ran   {line}")
    scope = "--user " if user else ""
    if start:
        console.print(f"{done.unit} is enabled and started: systemctl {scope}status {done.unit}")
    else:
        console.print(f"{done.unit} is enabled; start it with systemctl {scope}start {done.unit}")
    if user:
        console.print("to keep it running without a login session: loginctl enable-linger")


def _options(fn: click.decorators.FC) -> click.decorators.FC:
    fn = click.option(
        "--for",
        "for_user",
        metavar="USER",
        help="the system unit's instance (default: the sudo user, else you)",
    )(fn)
    fn = click.option("--no-start", is_flag=True, help="enable it only; start it yourself")(fn)
    fn = click.option("--user", is_flag=True, help="a user unit (~/.config/systemd/user)")(fn)
    return fn


@click.command("install-service")
@_options
@command(op=False, grant=False)
def node_install(ctx: Ctx, user: bool, no_start: bool, for_user: str | None) -> None:
    """Write the node's systemd unit (deploy/systemd/), reload systemd and enable it (and start
    it, unless --no-start). A system unit (without --user) is a template run as the user."""
    _install(ctx, "node", user, not no_start, for_user)


@click.command("install-service")
@_options
@command(op=False, grant=False)
def hub_install(ctx: Ctx, user: bool, no_start: bool, for_user: str | None) -> None:
    """Write the hub's systemd unit, reload systemd and enable it (and start it, unless
    --no-start). Its listen endpoint is ROOST_HUB_LISTEN (default tcp://0.0.0.0:7800), set in
    ~/.config/roost/hub.env (a user unit) or /etc/roost/hub-USER.env (a system one)."""
    _install(ctx, "hub", user, not no_start, for_user)
