"""roost/providers.py and roost/adapters/registry.py: a provider is its adapter's module and one
line of the registry. A provider registered here, from this file alone, is checked by the
configuration file, launched by the adapter host, examined by ``roost doctor`` and offered by the
CLI; and no other module of roost names a provider."""

from __future__ import annotations

import ast
import asyncio
import io
import json
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import click
import pytest
from click.testing import CliRunner

from roost import config, providers
from roost.actors.adapter_host import AdapterActor
from roost.actors.runtime.peer import Peer
from roost.adapters import doctor
from roost.adapters.base import (
    READY,
    Adapter,
    Classification,
    Launch,
    LaunchContext,
    Runner,
    VendorCli,
)
from roost.adapters.evidence import Evidence
from roost.adapters.registry import adapter_class, adapters
from roost.adapters.settings import with_settings
from roost.cli import completion
from roost.cli.main import cli
from roost.cli.sessions import spawn
from roost.wire import protocol as p
from roost.wire.errors import RoostError

ROOT = Path(__file__).resolve().parents[2]
FAKE = "tests.unit.test_providers:FakeAdapter"


class FakeAdapter(Adapter):
    """A whole provider: a CLI that runs interactively only and says who is logged in."""

    provider = "fake"
    cli = VendorCli(
        install="npm install -g fake-cli",
        line="1.2",
        tested="1.2.3",
        pinned="npm install -g fake-cli@1.2.3",
        home_env="FAKE_HOME",
        home_dir=".fake",
        login="run `fake login`",
    )
    modes = ("pty",)

    def fresh(self, ctx: LaunchContext) -> Launch:
        return Launch([self.named_program(ctx.env) or self.provider])

    def resume(self, provider_session: str, ctx: LaunchContext) -> Launch:
        return Launch([self.named_program(ctx.env) or self.provider, "--resume", provider_session])

    def classify(
        self, screen: str, *, exited: bool, evidence: Evidence | None = None
    ) -> Classification:
        return Classification(READY)

    def login_state(self, path: str, env: dict[str, str], run: Runner) -> tuple[str, str]:
        code, _ = run([path, "whoami"], env)
        return ("logged-in" if code == 0 else "logged-out"), "fake whoami"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry line of the fake provider."""
    monkeypatch.setitem(providers.VENDORS, "fake", FAKE)
    yield


@pytest.fixture
def bindir(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    script = d / "fake"
    script.write_text(
        '#!/bin/sh\ncase "$1" in\n  --version) echo "fake 1.2.3";;\n  whoami) exit 0;;\nesac\n'
    )
    script.chmod(0o755)
    return d


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


FILE = '[providers.fake]\nbin = "/opt/fake"\nenv = { FAKE_HOME = "/h" }\n'


def test_the_config_file_knows_a_registered_provider(tmp_path: Path, fake: None) -> None:
    cfg = config.load(write(tmp_path, FILE))
    assert cfg.provider_bin("fake", {}) == ("/opt/fake", config.Source("file", f"{cfg.path}:2"))
    assert cfg.provider_bin("fake", {"ROOST_FAKE_BIN": "/e"}) == (
        "/e",
        config.Source("env", "ROOST_FAKE_BIN"),
    )
    seen, added = with_settings("fake", LaunchContext("/w", "pty", {}, "/d"), cfg, {})
    assert added == {"FAKE_HOME": "/h", "ROOST_FAKE_BIN": "/opt/fake"}
    assert FakeAdapter().fresh(seen).argv == ["/opt/fake"]
    with pytest.raises(RoostError) as err:
        config.load(write(tmp_path, "[providers.other]\n"))
    assert "known here: claude, codex, echo, fake, kimi" in err.value.message


def test_an_unregistered_provider_is_not_a_setting(tmp_path: Path) -> None:
    with pytest.raises(RoostError) as err:
        config.load(write(tmp_path, FILE))
    assert err.value.code == "config-invalid" and err.value.detail["key"] == "providers.fake"


def test_the_registry_loads_its_adapter(fake: None) -> None:
    assert adapter_class("fake") is FakeAdapter
    assert list(adapters()) == ["echo", "claude", "codex", "kimi", "fake"]
    assert providers.bin_env("fake") == "ROOST_FAKE_BIN" and providers.bin_env("echo") is None


def test_a_registry_line_must_name_the_providers_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(providers.VENDORS, "other", FAKE)
    with pytest.raises(TypeError, match="is not the adapter of 'other'"):
        adapter_class("other")


class Stub:
    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}


def test_the_adapter_host_launches_it_in_its_modes_only(bindir: Path, fake: None) -> None:
    actor = AdapterActor(FakeAdapter(), cast(Peer, Stub()))
    body = {"cwd": "/", "env": {"ROOST_FAKE_BIN": str(bindir / "fake")}, "data_dir": "/d"}
    launched = asyncio.run(actor.launch(cast(p.Header, None), {**body, "mode": "pty"}))
    assert launched["argv"] == [str(bindir / "fake")]
    with pytest.raises(RoostError) as err:
        asyncio.run(actor.launch(cast(p.Header, None), {**body, "mode": "stream"}))
    assert err.value.detail == {"field": "mode"} and "fake runs sessions in mode pty" in str(err)
    missing = {**body, "mode": "pty", "env": {"ROOST_FAKE_BIN": "/nowhere/fake"}}
    with pytest.raises(RoostError) as err:
        asyncio.run(actor.launch(cast(p.Header, None), missing))
    assert err.value.code == "provider-missing"
    assert err.value.detail["install"] == "npm install -g fake-cli"


def test_doctor_checks_it(
    tmp_path: Path,
    bindir: Path,
    fake: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.setenv("ROOST_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setattr(sys, "argv", ["roost-doctor", "--json", "--provider", "fake"])
    doctor.main()
    (report,) = json.loads(capsys.readouterr().out)["providers"]
    assert report["known"] == "1.2.x (tested 1.2.3)" and report["login_how"] == "fake whoami"
    assert [f["what"] for f in report["findings"]] == [
        f"fake 1.2.3 at {bindir / 'fake'}",
        "fake is logged in (fake whoami)",
    ]
    missing = doctor.probe("fake", config.load(tmp_path / "none.toml"), {"PATH": "/nowhere"})
    assert missing["findings"][0]["fix"] == (
        "install it (npm install -g fake-cli@1.2.3) or name it with providers.fake.bin "
        "in the config file or ROOST_FAKE_BIN"
    )
    assert missing["home"] == str(Path.home() / ".fake")


def test_the_cli_offers_it(tmp_path: Path, fake: None) -> None:
    offered = completion.providers(cast(click.Context, None), cast(click.Parameter, None), "f")
    assert [item.value for item in offered] == ["fake"]
    shown = CliRunner().invoke(
        cli, ["config", "show", "--json"], env={"ROOST_CONFIG": str(write(tmp_path, FILE))}
    )
    keys = [row["key"] for row in json.loads(shown.output)["values"]]
    assert "providers.fake.bin" in keys and "providers.fake.env.FAKE_HOME" in keys


def test_the_cli_help_and_choices_are_the_registrys() -> None:
    """Built when the module is imported (``ls`` imports it and should stay fast), from the
    registry: a provider registered first is in the help."""
    assert f"PROVIDER ({', '.join(providers.names())})" in (spawn.help or "")
    choices = {o.name: getattr(o.type, "choices", None) for o in spawn.params}
    assert choices["mode"] == providers.MODES
    assert choices["restore"] == providers.RESTORE_POLICIES
    code = (
        "from roost import providers\n"
        f"providers.VENDORS['fake'] = {FAKE!r}\n"
        "from roost.cli.sessions import spawn\n"
        "print(spawn.help)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert "PROVIDER (echo, claude, codex, kimi, fake)" in run.stdout, run.stderr


@pytest.mark.parametrize("name", providers.names())
def test_each_provider_keeps_the_registrys_conventions(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its class names it; a vendor's knows its CLI and runs the program of the provider's name,
    or the one ``ROOST_<PROVIDER>_BIN`` names (the config file fills that in)."""
    cls = adapter_class(name)
    assert cls.provider == name
    assert (cls.cli is not None) == (name in providers.vendors())
    assert set(cls.modes) <= set(providers.MODES)
    if cls.cli is None:
        return
    assert cls.cli.tested.startswith(f"{cls.cli.line}.") and cls.cli.tested in cls.cli.pinned
    var = providers.bin_env(name)
    assert var is not None
    monkeypatch.delenv(var, raising=False)
    ctx = LaunchContext("/w", "pty", {}, "/d")
    assert cls().fresh(ctx).argv[0] == name
    named = LaunchContext("/w", "pty", {var: "/opt/x"}, "/d")
    assert cls().fresh(named).argv[0] == "/opt/x"


# -- no provider is named anywhere else -------------------------------------------------------

# file -> why it may name a provider
NAMING = {
    "roost/demo.py": "`make demo` is a script of an operator's commands on the built-in echo agent",
    "roost/cli/hook.py": "`roost signal claude|kimi` reads those CLIs' hook documents, before "
    "anything is imported (the CLI imports no adapter)",
    "roost/cli/integrate.py": "`roost integrate kimi` writes kimi's own config file",
}


def _docstrings(source: str) -> set[int]:
    """The first lines of the module's, classes' and functions' docstrings."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(first.lineno)
    return found


def _own(path: Path) -> bool:
    """The registry, and a provider's adapter module with its helpers (``echo_agent.py``)."""
    rel = path.relative_to(ROOT)
    if rel.as_posix() == "roost/providers.py":
        return True
    stem = path.stem.split("_")[0]
    return rel.parent.as_posix() == "roost/adapters" and stem in providers.names()


def test_no_string_of_roost_names_a_provider_but_its_own_and_the_registrys() -> None:
    """String literals only: comments and docstrings may use a provider as an example, except
    the CLI's docstrings, which are its help."""
    word = re.compile(rf"\b(?:{'|'.join(providers.names())})\b")
    found = []
    for path in sorted((ROOT / "roost").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if _own(path) or rel in NAMING:
            continue
        source = path.read_text(encoding="utf-8")
        prose = set() if rel.startswith("roost/cli/") else _docstrings(source)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if (
                tok.type == tokenize.STRING
                and tok.start[0] not in prose
                and word.search(tok.string)
            ):
                found.append(f"{rel}:{tok.start[0]}: {tok.string[:60]}")
    assert not found, "\n".join(found)
    assert all((ROOT / rel).is_file() for rel in NAMING)
