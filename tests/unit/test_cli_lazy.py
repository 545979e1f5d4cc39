"""The CLI imports a command's module only when that command runs, so a command starts fast."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click

from roost.cli import main

# Never needed to list records: the dashboard, attach's terminal, doctor's probes, rich's
# console, the actors' asyncio, psutil, and what a mistyped name or a first start needs.
HEAVY = (
    "textual",
    "rich.console",
    "asyncio",
    "psutil",
    "roost.cli.tui",
    "roost.cli.attach",
    "roost.cli.doctor",
    "roost.cli.node",
    "roost.config",
    "difflib",
    "hashlib",
    "secrets",
)


def test_every_lazy_name_loads_the_command_of_that_name() -> None:
    group = main.cli
    assert isinstance(group, main.LazyGroup)
    ctx = click.Context(group)
    assert group.list_commands(ctx) == sorted(main.LAZY)
    for name in main.LAZY:
        command = group.get_command(ctx, name)
        assert command is not None and command.name == name
    node = group.get_command(ctx, "node")
    hub = group.get_command(ctx, "hub")
    assert isinstance(node, click.Group) and isinstance(hub, click.Group)
    assert {"install-service", "backup", "up", "stop"} <= set(node.commands)
    assert "install-service" in hub.commands
    assert group.get_command(ctx, "no-such-command") is None


def test_ls_imports_only_what_it_uses(tmp_path: Path) -> None:
    code = (
        "import sys, json\n"
        "from roost.cli.main import cli\n"
        "try:\n"
        "    cli(['--state-dir', sys.argv[1], 'ls'], prog_name='roost')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "no-node")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "node-not-running" in run.stderr  # it did run the command, to its error
    loaded = set(json.loads(run.stdout.splitlines()[-1]))
    assert "roost.cli.sessions" in loaded and "zmq" in loaded
    assert not [m for m in HEAVY if m in loaded]
