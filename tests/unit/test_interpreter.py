"""roost.interpreter: the one place that says how roost starts a Python process of its
own (``python -P -m``), and no other module of roost spelling ``-m`` itself (one that did would
run a ``roost/`` package from its working directory; tests/e2e/test_hostile_cwd.py shows it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from roost.interpreter import python_module

ROOT = Path(__file__).resolve().parents[2]


def test_the_argv_is_the_interpreter_with_a_safe_path() -> None:
    argv = python_module("roost.actors.node", "--state-dir", "/s")
    assert argv == [sys.executable, "-P", "-m", "roost.actors.node", "--state-dir", "/s"]


def test_the_working_directory_is_not_on_the_path_of_such_a_process(tmp_path: Path) -> None:
    (tmp_path / "roost").mkdir()
    (tmp_path / "roost" / "__init__.py").write_text("raise SystemExit('the planted roost')\n")
    out = subprocess.run(
        python_module("roost.interpreter"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    planted = subprocess.run(
        [sys.executable, "-m", "roost.interpreter"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "the planted roost" in planted.stderr  # what -m alone would run


def test_no_other_module_of_roost_starts_python_with_dash_m() -> None:
    found = []
    for path in sorted((ROOT / "roost").rglob("*.py")):
        if path == ROOT / "roost" / "interpreter.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value == "-m":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"start roost's processes with python_module(): {found}"
