"""docs/OPERATIONS.md, docs/PROTOCOL.md and README.md name what the code reads and writes.

The state directory's files as the code names them are each a row of
OPERATIONS' "State directory" table; the runtime directory's base is what ``runtime_dir`` uses
(``tempfile.gettempdir()``, so ``TMPDIR`` first), and both documents say so; every environment
variable the echo agent reads is documented in OPERATIONS and in README's testing section.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from roost.actors.node.hublink import HUB_LINK_FILE
from roost.broker import locate

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = (ROOT / "docs" / "OPERATIONS.md").read_text(encoding="utf-8")
PROTOCOL = (ROOT / "docs" / "PROTOCOL.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
ECHO_SOURCES = [ROOT / "roost" / "adapters" / name for name in ("echo_agent.py", "echo.py")]
ENV_READ = re.compile(r"""(?:environ\.get\(|environ\[|in ctx\.env|")(ROOST_ECHO_[A-Z_]+)""")


def section(doc: str, heading: str) -> str:
    """The text under a ``## `` heading, up to the next one."""
    start = doc.index(f"\n## {heading}\n")
    end = doc.find("\n## ", start + 1)
    return doc[start : end if end != -1 else len(doc)]


def table_paths(text: str) -> set[str]:
    """The backticked paths in the first column of the table in ``text``."""
    return {
        m
        for row in re.findall(r"^\| (.+?) \|", text, re.MULTILINE)
        for m in re.findall(r"`([^`]+)`", row)
    }


def test_every_state_directory_file_is_a_row_of_operations() -> None:
    rows = table_paths(section(OPERATIONS, "State directory"))
    files = {
        locate.NODE_FILE,
        locate.TOKEN_FILE,
        locate.OBSERVER_TOKEN_FILE,
        locate.ACTOR_TOKEN_FILE,
        HUB_LINK_FILE,
        "node.lock",
        "state.db",
    }
    missing = {name for name in files if not any(row.startswith(name) for row in rows)}
    assert not missing, f"OPERATIONS' state directory table lacks {sorted(missing)}"
    assert any(row.startswith("keys/") for row in rows), "keys/ (the CURVE key pair, allowed.json)"


@pytest.fixture
def no_runtime_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    for name in ("ROOST_RUNTIME_DIR", "XDG_RUNTIME_DIR", "TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() looks at the environment again
    yield tmp_path
    tempfile.tempdir = None


def test_the_runtime_dir_base_is_tmpdir_as_both_docs_say(
    no_runtime_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = no_runtime_env / "tmpdir"
    base.mkdir()
    monkeypatch.setenv("TMPDIR", str(base))
    runtime = locate.runtime_dir(no_runtime_env / "state")
    assert runtime.parent == base / f"roost-{os.getuid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(no_runtime_env))  # XDG_RUNTIME_DIR comes first
    assert locate.runtime_dir(no_runtime_env / "state").parent.parent == no_runtime_env
    transports = section(PROTOCOL, "1. Transports and endpoints")
    runtime_ops = section(OPERATIONS, "Runtime directory (sockets)")
    for name, text in (("PROTOCOL.md section 1", transports), ("OPERATIONS.md", runtime_ops)):
        assert "`$TMPDIR`" in text or "`TMPDIR`" in text, f"{name} does not name TMPDIR"
        assert "gettempdir()" in text, f"{name} does not say it is Python's temporary directory"


def echo_variables() -> set[str]:
    found: set[str] = set()
    for source in ECHO_SOURCES:
        found.update(ENV_READ.findall(source.read_text(encoding="utf-8")))
    return found


def test_the_echo_agents_knobs_are_documented_where_a_tester_looks() -> None:
    variables = echo_variables()
    assert {"ROOST_ECHO_DELAY_MS", "ROOST_ECHO_FAIL", "ROOST_ECHO_HOME"} <= variables, variables
    testing = section(README, "Development")
    for name in sorted(variables):
        assert f"`{name}" in OPERATIONS, f"OPERATIONS.md does not document {name}"
        assert name in testing, f"README's Development section does not name {name}"
