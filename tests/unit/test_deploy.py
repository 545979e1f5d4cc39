"""deploy/: the systemd units are what roost renders (roost/cli/service.py), systemd accepts them
(`systemd-analyze verify`, where it exists), and every ExecStart runs a real command of this roost
with real flags. The properties the units exist for (Type=notify, KillMode=process, PrivateTmp
off) are checked by name, so a change that loses one fails here."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from roost.cli import service

ROOT = Path(__file__).resolve().parents[2]
PYTHONPATH = os.environ.get("PYTHONPATH", "")
SYSTEMD = ROOT / "deploy" / "systemd"
ROOST = Path(sys.executable).with_name("roost")


def roost_env() -> dict[str, str]:
    """The environment in which ROOST runs this checkout's roost (PYTHONPATH first: an editable
    install of another checkout is not what is checked)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), PYTHONPATH]))}


def roost_accepts(words: list[str]) -> subprocess.CompletedProcess[str]:
    """``roost WORDS --help``: click refuses an unknown command or flag before it looks at
    --help, so exit 0 means every word is understood by this roost."""
    return subprocess.run(
        [str(ROOST), *words, "--help"], capture_output=True, text=True, timeout=60, env=roost_env()
    )


def directives(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


@pytest.mark.parametrize("unit", service.UNITS, ids=lambda u: u.name)
def test_the_shipped_unit_is_the_rendered_one(unit: service.Unit) -> None:
    assert (SYSTEMD / unit.name).read_text() == service.render(unit)


def test_deploy_ships_every_unit_and_nothing_else() -> None:
    assert sorted(p.name for p in SYSTEMD.glob("*.service")) == sorted(
        u.name for u in service.UNITS
    )


@pytest.mark.parametrize("unit", service.UNITS, ids=lambda u: u.name)
def test_a_restart_never_kills_the_sessions_and_readiness_is_notified(
    unit: service.Unit,
) -> None:
    found = directives(service.render(unit))
    assert found["KillMode"] == ["process"]
    assert found["Type"] == ["notify"]
    assert found["PrivateTmp"] == ["no"]
    assert found["Restart"] == ["on-failure"]
    assert ("User" in found) == (unit.scope == "system")


def exec_args(unit: service.Unit) -> list[str]:
    """ExecStart's arguments after the binary, with systemd's specifiers and the environment
    variable filled in as systemd would."""
    (start,) = directives(service.render(unit))["ExecStart"]
    argv = shlex.split(start)
    assert argv[0] == service.DEPLOYED_BIN
    filled = []
    for arg in argv[1:]:
        arg = arg.replace("%h", "/home/someone").replace("%i", "someone")
        arg = re.sub(r"\$\{ROOST_HUB_LISTEN\}", "tcp://127.0.0.1:7800", arg)
        filled.append(arg)
    return filled


@pytest.mark.parametrize("unit", service.UNITS, ids=lambda u: u.name)
def test_exec_start_is_a_real_command_with_real_flags(unit: service.Unit) -> None:
    """click refuses an unknown command or flag before it looks at --help: exit 0 means every
    word of ExecStart is understood by this roost."""
    done = roost_accepts(exec_args(unit))
    assert done.returncode == 0, done.stderr
    assert "--foreground" in done.stdout


def test_the_flag_check_can_fail() -> None:
    done = roost_accepts(["node", "up", "--no-such-flag"])
    assert done.returncode != 0 and "no-such-flag" in done.stderr


VERIFY = shutil.which("systemd-analyze")


@pytest.mark.skipif(VERIFY is None, reason="systemd-analyze is not installed here")
@pytest.mark.parametrize("unit", service.UNITS, ids=lambda u: u.name)
def test_systemd_accepts_the_unit(unit: service.Unit, tmp_path: Path) -> None:
    assert VERIFY is not None
    # a template is verified as an instance; the binary must exist, so this roost's is named
    name = unit.name.replace("@.", "@someone.")
    path = tmp_path / name
    path.write_text(service.render(unit, str(ROOST)))
    done = subprocess.run([VERIFY, "verify", str(path)], capture_output=True, text=True, timeout=60)
    complaints = [
        line for line in (done.stdout + done.stderr).splitlines() if name in line or "roost" in line
    ]
    assert done.returncode == 0 and not complaints, done.stdout + done.stderr


@pytest.mark.skipif(VERIFY is None, reason="systemd-analyze is not installed here")
def test_systemd_accepts_a_named_state_directory_quoted(tmp_path: Path) -> None:
    """install-service keeps a named state directory: spaces, ``%`` and ``$`` quoted for
    systemd (``exec_word``), and the unit still verifies."""
    assert VERIFY is not None
    odd = "/srv/my state 100% $HOME"
    text = service.render(service.unit_named("roost-node.service"), str(ROOST), odd)
    start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    assert start.endswith(' --state-dir "/srv/my state 100%% $$HOME" node up --foreground')
    path = tmp_path / "roost-node.service"
    path.write_text(text)
    done = subprocess.run([VERIFY, "verify", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(VERIFY is None, reason="systemd-analyze is not installed here")
def test_verify_catches_a_broken_unit(tmp_path: Path) -> None:
    """The check above can fail: a bad directive is reported, a missing binary refused."""
    assert VERIFY is not None
    text = service.render(service.UNITS[0], str(ROOST))
    bad = tmp_path / "roost-bad.service"
    bad.write_text(text.replace("KillMode=process", "KillMode=bogus"))
    done = subprocess.run([VERIFY, "verify", str(bad)], capture_output=True, text=True)
    assert "roost-bad.service" in done.stdout + done.stderr
    missing = tmp_path / "roost-missing.service"
    missing.write_text(service.render(service.UNITS[0], "/nonexistent/roost"))
    done = subprocess.run([VERIFY, "verify", str(missing)], capture_output=True, text=True)
    assert done.returncode != 0


EXAMPLES = ROOT / "deploy" / "examples"
COMPOSE = ROOT / "deploy" / "compose"


@pytest.mark.parametrize(
    "path", sorted(EXAMPLES.rglob("*.toml")), ids=lambda p: str(p.relative_to(EXAMPLES))
)
def test_every_example_config_file_loads(path: Path) -> None:
    from roost import config

    loaded = config.load(path, environ={})
    assert loaded is not None


def test_the_hub_env_file_names_the_variable_the_unit_reads() -> None:
    lines = [
        line
        for line in (EXAMPLES / "hub.env").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert [line.split("=", 1)[0] for line in lines] == ["ROOST_HUB_LISTEN"]
    assert "${ROOST_HUB_LISTEN}" in service.render(service.unit_named("roost-hub.service"))


def roost_commands(script: str) -> list[list[str]]:
    """The roost invocations of a shell script, one per logical line, with command substitutions
    and variables replaced by plain words (their values do not matter to click's parsing)."""
    logical = script.replace("\\\n", " ")
    found = []
    for line in logical.splitlines():
        line = line.strip()
        if line.startswith("#") or "roost " not in line:
            continue
        line = re.sub(r'"\$\([^)]*\)"|\$\([^)]*\)', "WORD", line)
        line = re.sub(r'"\$\{?\w+\}?"|\$\{?\w+\}?', "WORD", line)
        for cut in (" | ", " > ", " >/dev/null", " && ", " || ", " 2>&1"):
            line = line.split(cut)[0]
        words = shlex.split(line)
        words = words[words.index("roost") + 1 :]
        found.append(words)
    return found


def test_the_lab_entry_script_is_sh_and_runs_real_commands() -> None:
    entry = COMPOSE / "lab-entry.sh"
    assert subprocess.run(["sh", "-n", str(entry)], capture_output=True).returncode == 0
    commands = roost_commands(entry.read_text())
    assert {tuple(w for w in c if not w.startswith("-") and w != "WORD")[:2] for c in commands} >= {
        ("keys", "new"),
        ("keys", "show"),
        ("keys", "allow"),
        ("hub", "up"),
        ("node", "run"),  # a node's main process outlives its daemon
    }
    for words in commands:
        done = roost_accepts(words)
        assert done.returncode == 0, (words, done.stderr)


def test_the_compose_lab_parses_and_runs_the_entry_script() -> None:
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    services = doc["services"]
    assert set(services) == {"hub", "lab-1", "lab-2", "lab-3"}
    assert services["hub"]["command"] == ["hub"]
    for name in ("lab-1", "lab-2", "lab-3"):
        assert services[name]["command"] == ["node", name]
        assert services[name]["depends_on"] == ["hub"]
        assert "lab:/lab" in services[name]["volumes"]
    build = services["hub"]["build"]
    dockerfile = (COMPOSE / build["context"] / build["dockerfile"]).resolve()
    assert dockerfile == COMPOSE / "Dockerfile"
    text = dockerfile.read_text()
    assert 'ENTRYPOINT ["/usr/local/bin/lab-entry.sh"]' in text
    assert "COPY deploy/compose/lab-entry.sh /usr/local/bin/lab-entry.sh" in text
    # the agents' CLIs only when asked for, by a build argument empty by default
    assert 'ARG PROVIDER_PACKAGES=""' in text
    assert services["hub"].get("init") is True  # the hub's daemon is its main process
