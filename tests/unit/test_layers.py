"""The import direction (pyproject's [tool.importlinter] contracts, run by `make lint` as
`lint-imports`): kept by the tree as it is, and broken, naming the import, by a copy of it with
one import against the direction or one cycle added."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT), "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "roost", tmp_path / "roost", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def add_import(tree: Path, module: str, line: str) -> None:
    path = tree / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")


def test_the_tree_keeps_every_contract(tree: Path) -> None:
    result = lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "named"),
    [
        # the runtime reaching up into the node daemon
        (
            "roost.actors.runtime.lines",
            "import roost.actors.node.daemon",
            "lines -> roost.actors.node",
        ),
        # two processes of one layer: a supervisor module reading the state store's
        (
            "roost.actors.supervisor.outbox",
            "import roost.actors.state.db",
            "outbox -> roost.actors.state.db",
        ),
        # the hub is above the node, not below it
        ("roost.actors.node.claims", "import roost.actors.hub.actor", "claims -> roost.actors.hub"),
        # the CLI going around the wire
        (
            "roost.cli.output",
            "import roost.actors.node.sessions",
            "roost.cli.output -> roost.actors",
        ),
        # roost ls's fast path importing the protocol (its dataclasses), or msgpack
        (
            "roost.client.fast.zmtp",
            "import roost.wire.protocol",
            "roost.client.fast.zmtp -> roost.wire.protocol",
        ),
        ("roost.client.fast.tinypack", "import msgpack", "roost.client.fast.tinypack -> msgpack"),
        # the wire format reaching up into the client
        ("roost.wire.fields", "import roost.client.locate", "roost.wire.fields -> roost.client"),
        # the client reaching into the router
        (
            "roost.client.client",
            "import roost.broker.router",
            "roost.client.client -> roost.broker",
        ),
        # the CLI going around the client, into the router
        ("roost.cli.output", "import roost.broker.registry", "roost.cli.output -> roost.broker"),
        # a process importing the CLI
        ("roost.actors.runtime.lines", "import roost.cli.table", "lines -> roost.cli"),
        # a cycle inside one package
        (
            "roost.actors.supervisor.terminal",
            "import roost.actors.supervisor.actor",
            ".terminal -> .actor",
        ),
    ],
)
def test_an_import_against_the_direction_breaks_a_contract(
    tree: Path, module: str, line: str, named: str
) -> None:
    add_import(tree, module, line)
    result = lint(tree)
    assert result.returncode != 0, result.stdout
    assert "BROKEN" in result.stdout
    assert named in result.stdout, result.stdout
