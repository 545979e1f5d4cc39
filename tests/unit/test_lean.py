"""Each roost process's entry point keeps out the libraries none of them uses (runtime/lean.py):
rich and pygments (which structlog would import for pretty tracebacks) and ssl (asyncio's)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ACTORS = Path(__file__).resolve().parents[2] / "roost" / "actors"
KINDS = ("node", "state", "supervisor", "hub")

PROBE = """
import sys
from roost.actors.runtime import lean
lean.keep_out()
import roost.actors.{kind}.{module}
loaded = sorted(n for n in lean.UNUSED if sys.modules.get(n) is not None)
print(",".join(loaded) or "none")
"""


@pytest.mark.parametrize(
    ("kind", "module"),
    [("node", "daemon"), ("state", "store"), ("supervisor", "actor"), ("hub", "actor")],
)
def test_a_process_loads_none_of_the_unused_libraries(kind: str, module: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(kind=kind, module=module)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "none", out.stdout + out.stderr


def test_without_it_structlog_would_load_them() -> None:
    """The check above can fail: the same import without keep_out loads rich and ssl."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE.replace("lean.keep_out()", "").format(kind="supervisor", module="actor"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert {"rich", "pygments", "ssl"} <= set(out.stdout.strip().split(",")), out.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_each_entry_point_keeps_them_out_before_any_other_import(kind: str) -> None:
    tree = ast.parse((ACTORS / kind / "__main__.py").read_text())
    body = [
        node for node in tree.body if not isinstance(node, ast.Expr) or node is not tree.body[0]
    ]
    first_import, first_call = body[0], body[1]
    assert isinstance(first_import, ast.ImportFrom) and first_import.names[0].name == "lean"
    assert isinstance(first_call, ast.Expr) and "keep_out" in ast.unparse(first_call)
