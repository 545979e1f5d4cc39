"""deploy/: the systemd units are what roost renders (roost/cli/service.py), systemd accepts them
(`systemd-analyze verify`, where it exists), and every ExecStart runs a real command of this roost
with real flags. The properties the units exist for (Type=notify, KillMode=process, PrivateTmp
off) are checked by name, so a change that loses one fails here."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from roost.cli import service

ROOT = Path(__file__).resolve().parents[2]
SYSTEMD = ROOT / "deploy" / "systemd"
ROOST = Path(sys.executable).with_name("roost")


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
    args = exec_args(unit)
    done = subprocess.run([str(ROOST), *args, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--foreground" in done.stdout


def test_the_flag_check_can_fail() -> None:
    done = subprocess.run(
        [str(ROOST), "node", "up", "--no-such-flag", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
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
