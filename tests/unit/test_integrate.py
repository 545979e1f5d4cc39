"""``roost integrate kimi``: a marked block appended to kimi's config.toml, taken out exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from roost import hooks
from roost.cli.integrate import (
    BEGIN,
    END,
    KIMI_HOME,
    find_block,
    integrate_kimi,
    with_block,
    without_block,
)
from roost.wire.errors import RoostError

ODD = [
    "",  # no file content at all
    'default_model = "mock/mock-model"\n',
    "telemetry = false  # no newline at the end",
    "# only a comment\n\n\n",
    '[providers.mock]\ntype = "openai"\napi_key = "sk-mock"  # a key\r\n\r\n[models."a b"]\nx=1\n',
    '[[hooks]]\nevent = "Stop"\ncommand = "notify-send done"\n',  # the user's own hooks
    'title = "unicode: \u00e9\u6f22\u5b57 \U0001f600"\n\t\n',
]


@pytest.mark.parametrize("text", ODD)
def test_the_block_is_appended_and_removed_byte_for_byte(text: str) -> None:
    added = with_block(text)
    assert added.startswith(text) and added.count(BEGIN) == added.count(END) == 1
    assert with_block(added) == added  # idempotent
    assert without_block(added) == text
    assert without_block(text) == text
    doc = tomllib.loads(added)
    ours = [h for h in doc["hooks"] if "roost signal kimi" in h["command"]]
    assert [h["event"] for h in ours] == list(hooks.KIMI_EVENTS)
    assert all(h["command"] == hooks.hook_command("kimi") for h in ours)
    assert set(ours[0]) == {"event", "command", "timeout"}  # kimi refuses any other key


def test_text_the_user_added_after_the_block_stays() -> None:
    base = "telemetry = false\n"
    added = with_block(base) + '\n[providers.other]\ntype = "openai"\n'
    assert without_block(added) == base + '\n[providers.other]\ntype = "openai"\n'


def test_a_block_of_another_roost_is_replaced_in_place() -> None:
    old = with_block("a = 1\n").replace(hooks.hook_command("kimi"), "/old/python -m roost")
    tail = "b = 2\n"
    assert with_block(old + tail) == with_block("a = 1\n") + tail


@pytest.mark.parametrize(
    "text",
    [
        f"a = 1\n{BEGIN}\n",  # no end
        f"{END}\na = 1\n",  # no begin
        f"{END}\n{BEGIN}\n",  # out of order
        f"{BEGIN}\n{END}\n{BEGIN}\n{END}\n",  # twice
    ],
)
def test_a_damaged_block_is_refused(text: str) -> None:
    for change in (with_block, without_block, find_block):
        with pytest.raises(RoostError) as err:
            change(text)
        assert err.value.code == "integration-damaged"


def test_a_file_that_cannot_take_the_block_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    for text in ('hooks = ["inline"]\n', "not toml = = =\n"):
        path.write_text(text)
        with pytest.raises(RoostError) as err:
            integrate_kimi(path, remove=False)
        assert err.value.code == "integration-failed"
        assert path.read_text() == text


def test_the_file_keeps_its_mode_and_a_new_one_is_private(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("a = 1\n")
    path.chmod(0o640)
    done = integrate_kimi(path, remove=False)
    assert done["changed"] and path.stat().st_mode & 0o777 == 0o640
    assert integrate_kimi(path, remove=False)["changed"] is False
    fresh = tmp_path / "home" / "config.toml"
    integrate_kimi(fresh, remove=False)
    assert fresh.stat().st_mode & 0o777 == 0o600


def roost(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-P", "-m", "roost", *args]
    return subprocess.run(
        argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )


def test_the_command_installs_and_removes_under_kimi_code_home(tmp_path: Path) -> None:
    home = tmp_path / "kimi"
    home.mkdir()
    config = home / "config.toml"
    original = '# my config\ndefault_model = "m"\n'
    config.write_text(original)
    env = {"KIMI_CODE_HOME": str(home)}
    done = roost("integrate", "kimi", "--json", env=env)
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    assert doc["changed"] and doc["installed"] and doc["path"] == str(config)
    assert doc["events"] == list(hooks.KIMI_EVENTS)
    assert BEGIN in config.read_text()
    again = roost("integrate", "kimi", env=env)
    assert again.returncode == 0 and "already in" in again.stdout
    gone = roost("integrate", "kimi", "--remove", "--json", env=env)
    assert json.loads(gone.stdout)["changed"] and config.read_text() == original
    config.write_text(f"{BEGIN}\n")
    damaged = roost("integrate", "kimi", "--json", env=env)
    assert damaged.returncode == 1
    assert json.loads(damaged.stdout)["error"]["code"] == "integration-damaged"
    assert config.read_text() == f"{BEGIN}\n"


def test_kimis_home_is_the_adapters() -> None:
    from roost.adapters.kimi import KimiAdapter

    assert KimiAdapter.cli is not None
    assert (KimiAdapter.cli.home_env, KimiAdapter.cli.home_dir) == KIMI_HOME
