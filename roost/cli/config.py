"""``roost config show``: every setting in force and where it came from.

Sources: ``default`` (built in), ``file PATH:LINE`` (the configuration file), ``env VAR`` (an
environment variable, which wins over the file where one exists) and ``flag --OPTION``. The
values are this shell's: the node reads the same file and variables from its own environment at
``roost node up`` (``roost doctor`` shows what the node sees of the providers).
"""

from __future__ import annotations

import os
from typing import Any

import click
from click.core import ParameterSource

from roost.cli.context import Ctx, reader
from roost.cli.output import console, emit_json
from roost.config import DEFAULT, Config, Source, load
from roost.providers import fixed, vendors

Row = dict[str, Any]


def _row(key: str, value: Any, source: Source) -> Row:
    return {"key": key, "value": value, "source": source.to_wire(), "from": source.label()}


def _state_dir(ctx: Ctx) -> Row:
    root = click.get_current_context().find_root()
    origin = root.get_parameter_source("state_dir")
    if origin == ParameterSource.COMMANDLINE:
        source = Source("flag", "--state-dir")
    elif origin == ParameterSource.ENVIRONMENT:
        source = Source("env", "ROOST_STATE_DIR")
    else:
        source = DEFAULT
    return _row("state_dir", str(ctx.state_dir), source)


def _table(cfg: Config, prefix: str, values: dict[str, str]) -> list[Row]:
    return [_row(f"{prefix}.{k}", v, cfg.source(f"{prefix}.{k}")) for k, v in values.items()]


def rows(ctx: Ctx, cfg: Config) -> list[Row]:
    """Every value in force, in the file's order of sections."""
    out = [_row("config_file", str(cfg.path), cfg.path_source), _state_dir(ctx)]
    for provider in vendors():
        program, source = cfg.provider_bin(provider, os.environ)
        out.append(_row(f"providers.{provider}.bin", program, source))
    for provider in fixed():
        out += _table(cfg, f"providers.{provider}.env", cfg.provider_env(provider))
    for provider in cfg.defined_providers():  # a provider the file defines: its program
        program, source = cfg.provider_bin(provider, os.environ)
        out.append(_row(f"providers.{provider}.command", program, source))
        out += _table(cfg, f"providers.{provider}.env", cfg.provider_env(provider))
    mode, mode_from = cfg.spawn_mode()
    size, size_from = cfg.spawn_size()
    out += [_row("spawn.mode", mode, mode_from), _row("spawn.size", size or "40x120", size_from)]
    out += _table(cfg, "spawn.env", cfg.spawn_env())
    restore, restore_from = cfg.spawn_restore()
    pause, pause_from = cfg.restore_pause()
    out += [_row("spawn.restore", restore, restore_from)]
    out += [_row("node.restore_pause_s", pause, pause_from)]
    desktop, desktop_on = cfg.desktop()
    notify: tuple[tuple[str, Any], ...] = (
        ("desktop", desktop),
        ("desktop_on", list(desktop_on)),
        ("timeout_s", cfg.notify_timeout()),
    )
    for key, value in notify:
        given = cfg.exists and f"notify.{key}" in cfg.lines
        out.append(_row(f"notify.{key}", value, cfg.source(f"notify.{key}") if given else DEFAULT))
    for i, cmd in enumerate(cfg.notify_commands()):
        run: dict[str, Any] = {"shell": cmd.shell} if cmd.shell else {"argv": list(cmd.argv)}
        entry = {"on": list(cmd.on), **run, "timeout_s": cmd.timeout_s}
        out.append(_row(cmd.name, entry, cfg.source(f"notify.command[{i}]")))
    name, _, source = cfg.detach_key()
    out.append(_row("attach.detach_key", name, source))
    return out


def _text(value: Any) -> str:
    if isinstance(value, dict):
        run = f"sh -c {value['shell']!r}" if "shell" in value else " ".join(value["argv"])
        return f"on {','.join(value['on'])}: {run} (timeout {value['timeout_s']:g} s)"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@click.group("config")
def config_group() -> None:
    """The configuration file ($XDG_CONFIG_HOME/roost/config.toml, or ROOST_CONFIG)."""


@config_group.command("show")
@reader
def show(ctx: Ctx) -> None:
    """Every setting in force and where it came from (default, file, env, flag)."""
    cfg = load()
    found = rows(ctx, cfg)
    if ctx.json:
        emit_json({"file": str(cfg.path), "exists": cfg.exists, "values": found})
        return
    if not cfg.exists:
        console.print(f"no configuration file at {cfg.path}: built-in defaults")
    width = max(len(r["key"]) for r in found)
    for r in found:
        console.print(f"{r['key']:<{width}}  {_text(r['value'])}  ({r['from']})")
