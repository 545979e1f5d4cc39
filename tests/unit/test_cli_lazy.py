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
    "mcp",  # the MCP SDK and what it brings: roost mcp's alone
    "pydantic",
    "anyio",
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


def test_help_and_the_mcp_command_load_without_the_mcp_sdk() -> None:
    """``roost --help`` loads every command's module, ``roost mcp``'s too: the SDK is imported
    only when ``roost mcp`` runs."""
    code = (
        "import sys\n"
        "from roost.cli.main import cli\n"
        "try:\n"
        "    cli(['--help'], prog_name='roost')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(','.join(sorted(sys.modules)))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "mcp " in run.stdout and "roost.cli.mcp" in run.stdout.splitlines()[-1]
    loaded = set(run.stdout.splitlines()[-1].split(","))
    assert not [m for m in ("mcp", "mcp_types", "pydantic", "anyio", "starlette") if m in loaded]


# What the fast path (roost.cli.quick) answers without: the click CLI's libraries, the client
# library and the wire codec, and what a few of its modules avoid on purpose (typing, ~4 ms;
# json, whose decoder imports re and enum, ~11 ms: roost.cli.listing.dumps).
FENCED = (
    "json",
    "click",
    "zmq",
    "msgpack",
    "rich",
    "structlog",
    "typing",
    "roost.client.client",
    "roost.wire.codec",
    "roost.wire.protocol",
    "roost.cli.output",
    "roost.cli.context",
    *HEAVY,
)
RECORD = {
    "id": "r0123456789",
    "name": "alpha",
    "provider": "echo",
    "mode": "pty",
    "state": "dormant",
    "generation": 2,
    "cwd": "/w",
    "active": {"pid": 5, "agent_pid": 6, "supervisor": {"wire": 3, "roost": "0.1"}},
    "last_exit": {"signal": 15},
}
FAST_PROBE = """
import sys
from roost.cli import quick
from roost.wire.errors import RoostError
docs = {
    "show": {"record": RECORD, "screen": None, "last_screen": "$ \\x1b[1mhi"},
    "op": {"state": "terminal", "result": {"seqs": [4]}},
    "events": {"events": [{"seq": 4, "ts": 1.5, "kind": "k", "record": "r", "data": {"a": 1}}],
               "gap": True, "first_seq": 3},
    "prompt": {"seq": 9, "duplicate": True, "op": {"id": "o"}},
    "send": {"seq": 9}, "key": {"seq": 9},
}
for argv in (["show", "a", "--screen"], ["op", "o"], ["events", "--after", "1"],
             ["prompt", "a", "x"], ["send", "a", "x"], ["key", "a", "enter"]):
    for as_json in ([], ["--json"]):
        line = quick.parse_line([*as_json, *argv], {})
        quick.request(line)
        quick.text_of(line, docs[line.command])
        err = RoostError("session-not-live", "r0123456789 is dormant",
                         {"record": "r0123456789", "state": "dormant"})
        err = quick.explain(None, line, err, "/a state dir", True)
        quick.failure(err, bool(as_json))
        quick.interrupted(line, "/s")
quick._emit([(False, "")])
print(",".join(sorted(sys.modules)))
"""


def test_the_fast_paths_commands_import_none_of_the_click_paths_libraries() -> None:
    """Every command the fast path answers, plain and --json, with its error's next step."""
    code = FAST_PROBE.replace("RECORD", repr(RECORD))
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(run.stdout.splitlines()[-1].split(","))
    assert {"roost.cli.quick", "roost.cli.texts", "datetime", "shlex"} <= loaded
    assert not [m for m in FENCED if m in loaded], sorted(m for m in FENCED if m in loaded)
