"""The Makefile: ``make test`` explains that it needs npm instead of
failing with ``npm: No such file``, and ``make install`` puts ``roost`` on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")


def make(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assert MAKE is not None
    return subprocess.run(
        [MAKE, "-s", "-C", str(ROOT), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_npm_make_says_what_it_is_for_and_how_to_get_it(tmp_path: Path) -> None:
    proc = make("check-npm", env={"PATH": str(tmp_path), "HOME": str(tmp_path)})
    assert proc.returncode != 0
    assert "npm (Node.js) is needed for the Node.js client's tests" in proc.stderr
    assert "apt install nodejs npm" in proc.stderr and "No such file" not in proc.stderr


def test_the_npm_check_guards_the_node_clients_install() -> None:
    text = (ROOT / "Makefile").read_text()
    recipe = text.split("$(NODE_STAMP): ", 1)[1].split("\n\n", 1)[0]
    assert recipe.splitlines()[1].strip() == "@$(CHECK_NPM)"


def test_install_links_roost_into_prefix_bin_and_uninstall_removes_it(tmp_path: Path) -> None:
    if not (ROOT / ".venv" / "bin" / "roost").exists():
        pytest.skip("no .venv yet (make install would build it)")
    env = {**os.environ, "PATH": f"/usr/bin:/bin:{os.environ.get('PATH', '')}"}
    # -o: never rebuild .venv from here (that would reach the package index)
    proc = make("-o", ".venv/.installed", "install", f"PREFIX={tmp_path}", env=env)
    assert proc.returncode == 0, proc.stderr
    link = tmp_path / "bin" / "roost"
    assert link.is_symlink() and "is not on your PATH" in proc.stdout
    version = subprocess.run([str(link), "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.startswith("roost, version")
    assert make("uninstall", f"PREFIX={tmp_path}", env=env).returncode == 0
    assert not link.exists()
