"""docs/OPERATIONS.md, docs/PROTOCOL.md and README.md name what the code reads and writes.

The state directory's files as the code names them are each a row of
OPERATIONS' "State directory" table; the runtime directory's base is what ``runtime_dir`` uses
(``tempfile.gettempdir()``, so ``TMPDIR`` first), and both documents say so; every environment
variable the echo agent reads is documented in OPERATIONS and in README's testing section; every
path in the tree (``roost/...``, ``tests/...``, ...) and ``roost.`` module that docs/*.md and
README.md name exists.
"""

from __future__ import annotations

import importlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from roost.actors.node.hublink import HUB_LINK_FILE
from roost.client import locate

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


# A path in the tree or a module of roost's as the documents write one: not the tail of another
# path (``~/.config/roost/...``, ``.../roost/fix-login``) and not a placeholder
# (``roost.actors.<kind>`` is ``roost.actors``; ``tests/unit/test_<module>.py`` is no path).
TREE_PATH = re.compile(r"(?<![\w/.~<-])(?:roost|tests|bench|deploy|clients)/[\w./-]*+(?!<)")
ROOST_MODULE = re.compile(r"(?<![\w/.~<-])roost(?:\.[A-Za-z_]\w*)+")


def documents() -> list[Path]:
    return [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


def named_paths(text: str) -> set[str]:
    """Paths under roost/, tests/, bench/, deploy/ and clients/: a file (``.py`` or another
    extension), a folder (``/`` at the end) or anything two folders deep; a single name without
    either (``roost/fix``, a branch spawn --worktree names; ``tests/e2e``) is not checked."""
    found = {m.rstrip(".") for m in TREE_PATH.findall(text)}
    return {m for m in found if m.endswith("/") or "." in m[m.rfind("/") :] or m.count("/") >= 2}


def missing_module(dotted: str) -> str | None:
    """Why ``dotted`` names nothing in the tree (None when it does): a module or package, or one
    name defined in one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:i])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            break
    rest = parts[i:]
    if not rest:
        return None
    if len(rest) > 1:
        return f"no module {'.'.join(parts[: i + 1])}"
    module = importlib.import_module(".".join(parts[:i]))
    return None if hasattr(module, rest[0]) else f"{'.'.join(parts[:i])} has no {rest[0]}"


def test_named_paths_keep_to_what_they_mean() -> None:
    text = "`roost/wire/policy.py`, roost/cli/, (roost/actors/node/x.py). ~/.config/roost/a.toml"
    more = "branch roost/fix, `.../roost/fix-login/web`, `roost/adapters/<provider>.py`, tests/e2e"
    assert named_paths(text + more + " bench/README.md, deploy/systemd/") == {
        "roost/wire/policy.py",
        "roost/cli/",
        "roost/actors/node/x.py",
        "bench/README.md",
        "deploy/systemd/",
    }
    found = ROOST_MODULE.findall("`python -m roost.actors.<kind>`, fish/completions/roost.fish")
    assert found == ["roost.actors"]
    assert missing_module("roost.wire.protocol.CLIENT_METHODS") is None
    assert missing_module("roost.wire.protocol.NO_SUCH_NAME") is not None
    assert missing_module("roost.broker.nowhere.thing") == "no module roost.broker.nowhere"


def test_every_path_and_module_the_docs_name_exists() -> None:
    wrong = []
    for doc in documents():
        text = doc.read_text(encoding="utf-8")
        wrong += [f"{doc.name}: {path}" for path in named_paths(text) if not (ROOT / path).exists()]
        for dotted in sorted(set(ROOST_MODULE.findall(text))):
            if (why := missing_module(dotted)) is not None:
                wrong.append(f"{doc.name}: {dotted} ({why})")
    assert not wrong, "the documents name what is not in the tree:\n" + "\n".join(wrong)
