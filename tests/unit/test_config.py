"""roost/config.py: the file's values, their sources, and the errors that name key and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from roost import config
from roost.wire.errors import RoostError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def refused(path: Path) -> RoostError:
    with pytest.raises(RoostError) as err:
        config.load(path)
    assert err.value.code == "config-invalid"
    return err.value


def test_a_missing_file_is_every_default(tmp_path: Path) -> None:
    cfg = config.load(tmp_path / "none.toml")
    assert not cfg.exists
    assert cfg.spawn_mode() == ("pty", config.DEFAULT)
    assert cfg.spawn_size() == (None, config.DEFAULT)
    assert cfg.detach_key() == ("ctrl-]", b"\x1d", config.DEFAULT)
    assert cfg.desktop() == (True, config.NOTIFY_EVENTS)
    assert cfg.notify_commands() == []
    assert cfg.provider_bin("claude", {}) == ("claude", config.DEFAULT)
    assert cfg.spawn_restore() == ("never", config.DEFAULT)
    assert cfg.spawn_on_limit() == ("wait", config.DEFAULT)
    assert cfg.restore_pause() == (config.RESTORE_PAUSE_S, config.DEFAULT)


def test_the_restore_policy_and_pause_come_from_the_file(tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, '[spawn]\nrestore = "resume"\n[node]\nrestore_pause_s = 0\n'))
    assert cfg.spawn_restore() == ("resume", config.Source("file", f"{cfg.path}:2"))
    assert cfg.restore_pause() == (0.0, config.Source("file", f"{cfg.path}:4"))


def test_the_path_is_roost_config_else_xdg_config_home(tmp_path: Path) -> None:
    assert config.config_path({"ROOST_CONFIG": "/x/c.toml"}) == (
        Path("/x/c.toml"),
        config.Source("env", "ROOST_CONFIG"),
    )
    assert config.config_path({"XDG_CONFIG_HOME": str(tmp_path)})[0] == (
        tmp_path / "roost" / "config.toml"
    )
    assert config.config_path({})[0] == Path.home() / ".config" / "roost" / "config.toml"


def test_values_and_the_lines_they_come_from(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """# roost
[providers.kimi]
bin = "~/kimi/bin/kimi"
env = { KIMI_CODE_HOME = "/k" }

[spawn]
size = "30x100"

[[notify.command]]
argv = ["notify-me"]

[[notify.command]]
on = ["exit"]
shell = "cat >> log"
timeout_s = 2

[attach]
detach_key = "Ctrl-B"
""",
    )
    cfg = config.load(path)
    program, source = cfg.provider_bin("kimi", {})
    assert program == str(Path.home() / "kimi" / "bin" / "kimi")
    assert source == config.Source("file", f"{path}:3")
    assert cfg.provider_env("kimi") == {"KIMI_CODE_HOME": "/k"}
    assert cfg.spawn_size() == ("30x100", config.Source("file", f"{path}:7"))
    first, second = cfg.notify_commands()
    assert first.on == config.NOTIFY_EVENTS and first.command() == ["notify-me"]
    assert second.on == ("exit",) and second.timeout_s == 2
    assert second.command() == ["/bin/sh", "-c", "cat >> log"]
    assert cfg.source("notify.command[1].timeout_s").where == f"{path}:15"
    assert cfg.detach_key()[1:] == (b"\x02", config.Source("file", f"{path}:18"))


def test_the_environment_wins_over_the_file_and_the_record_over_both(tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, '[providers.codex]\nbin = "/file/codex"\n'))
    env = {"ROOST_CODEX_BIN": "/env/codex"}
    assert cfg.provider_bin("codex", env) == ("/env/codex", config.Source("env", "ROOST_CODEX_BIN"))
    record = {"ROOST_CODEX_BIN": "/record/codex"}
    assert cfg.provider_bin("codex", env, record)[0] == "/record/codex"
    assert cfg.provider_bin("codex", {})[0] == "/file/codex"


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        ("[spawn]\nmode = 'tty'\n", "spawn.mode", 2),
        ("[spawn]\nsize = '1x5000'\n", "spawn.size", 2),
        ("[spawn]\nrestore = 'always'\n", "spawn.restore", 2),
        ("[spawn]\non_limit = 'retry'\n", "spawn.on_limit", 2),
        ("[node]\nrestore_pause_s = -1\n", "node.restore_pause_s", 2),
        ("\n\n[providers.gemini]\nbin = 'g'\n", "providers.gemini", 3),
        ("[providers.claude]\nbinary = 'c'\n", "providers.claude.binary", 2),
        ("[providers.claude]\nenv = { A = 1 }\n", "providers.claude.env", 2),
        ("colour = true\n", "colour", 1),
        ("[notify]\ndesktop_on = ['bell']\n", "notify.desktop_on", 2),
        ("[[notify.command]]\nargv = ['a']\nshell = 'b'\n", "notify.command[0]", 1),
        ("[[notify.command]]\non = ['exit']\n", "notify.command[0]", 1),
        (
            "[[notify.command]]\nargv = ['a']\n[[notify.command]]\nargv = []\n",
            "notify.command[1].argv",
            4,
        ),
        ("[notify]\ntimeout_s = 0\n", "notify.timeout_s", 2),
        ("[attach]\ndetach_key = 'ctrl-m'\n", "attach.detach_key", 2),
        ("spawn = 3\n", "spawn", 1),
    ],
)
def test_a_bad_key_or_value_is_named_with_its_line(
    tmp_path: Path, text: str, key: str, line: int
) -> None:
    path = write(tmp_path, text)
    err = refused(path)
    assert err.detail == {"file": str(path), "key": key, "line": line}
    assert err.message.startswith(f"{path}:{line}: {key!r} ")


def test_a_file_that_is_not_toml_names_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[spawn]\nmode = pty\n")
    err = refused(path)
    assert err.detail["line"] == 2 and "not valid TOML" in err.message


def test_key_lines_follow_tables_arrays_and_dotted_keys() -> None:
    lines = config.key_lines(
        'a.b = 1\n[x]\n"quoted key" = 2\n[[arr]]\nk = 1\n[[arr]]\nk = 2\n[t.u]\nv.w = 3\n'
    )
    assert lines["a.b"] == 1 and lines["x.quoted key"] == 3
    assert lines["arr[0].k"] == 5 and lines["arr[1].k"] == 7 and lines["arr"] == 4
    assert lines["t.u.v.w"] == 9


def test_the_documented_examples_are_valid_files(tmp_path: Path) -> None:
    """docs/OPERATIONS.md's and README.md's config.toml examples load as they are."""
    root = Path(__file__).resolve().parents[2]
    for doc in ("docs/OPERATIONS.md", "README.md"):
        text = (root / doc).read_text(encoding="utf-8")
        example = text.split("```toml\n", 1)[1].split("```", 1)[0]
        cfg = config.load(write(tmp_path, example))
        assert cfg.exists and cfg.provider_bin("claude", {})[1].kind == "file", doc


def test_the_usage_limit_policy_comes_from_the_file(tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, '[spawn]\non_limit = "continue"\n'))
    assert cfg.spawn_on_limit() == ("continue", config.Source("file", f"{cfg.path}:2"))
