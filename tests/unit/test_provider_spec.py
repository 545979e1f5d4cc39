"""roost/provider_spec.py: a ``[providers.<name>]`` table that defines a provider, as the
configuration file's module reads it: what it accepts, and each mistake named with key and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from roost import config, providers
from roost.provider_spec import SpecProblem, parse
from roost.wire.errors import RoostError

GOOD = """[spawn]
mode = "pty"

[providers.quill]
command = "~/bin/quill"
args = ["--plain", "--in", "{cwd}"]
fresh = ["--session-id", "{new_id}"]
resume = ["--resume", "{id}"]
ready = '^quill> ?$'
busy = 'thinking'
submit_delay_s = 0.2
env = { QUILL_HOME = "/q" }
home_env = "QUILL_HOME"
install = "pipx install quill"

[providers.quill.attention]
permission = 'Allow .*\\? \\[y/n\\]$'
rate-limit = 'usage limit'
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_a_table_of_a_new_name_defines_a_provider(tmp_path: Path) -> None:
    cfg = config.load(write(tmp_path, GOOD))
    assert cfg.defined_providers() == ("quill",)
    spec = cfg.provider_specs()["quill"]
    assert spec.command == "~/bin/quill" and spec.args == ("--plain", "--in", "{cwd}")
    assert spec.resume == ("--resume", "{id}") and spec.assigns_id
    assert [r for r, _ in spec.attention] == ["permission", "rate-limit"]
    assert spec.submit_delay_s == 0.2 and spec.install == "pipx install quill"
    assert cfg.provider_env("quill") == {"QUILL_HOME": "/q"}
    program, source = cfg.provider_bin("quill", {})
    assert program == str(Path("~/bin/quill").expanduser())
    assert source == config.Source("file", f"{cfg.path}:5")


def test_defining_names_a_provider_beside_the_registered_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(providers, "_defined", [])
    providers.define(("quill", "claude"))  # a registered name is never redefined
    assert providers.defined() == ("quill",)
    assert providers.names() == (*providers.fixed(), "quill")
    assert providers.adapter_path("quill") == providers.GENERIC
    assert providers.bin_env("quill") is None
    providers.define(())
    assert "quill" not in providers.names()


def _swap(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


@pytest.mark.parametrize(
    ("text", "key", "line", "words"),
    [
        (_swap("command", "cmd"), "providers.quill", 4, "needs 'command'"),
        (_swap("busy =", "buzy ="), "providers.quill.buzy", 10, "not a setting"),
        (_swap("'thinking'", "'(thinking'"), "providers.quill.busy", 10, "regular expression"),
        (_swap("{id}", "{session}"), "providers.quill.resume", 8, "{session}"),
        (_swap('"{new_id}"', '"{id}"'), "providers.quill.fresh", 7, "unknown placeholder"),
        (_swap("{cwd}", "{cwd!r}"), "providers.quill.args", 6, "format or conversion"),
        (_swap("{cwd}", "{cwd"), "providers.quill.args", 6, "bad template"),
        (_swap('resume = ["--resume", "{id}"]\n', ""), "providers.quill", 4, "'resume'"),
        (_swap("ready = '^quill> ?$'\n", ""), "providers.quill", 4, "'ready'"),
        (
            _swap("submit_delay_s = 0.2", "submit_delay_s = 9"),
            "providers.quill.submit_delay_s",
            11,
            "0 <= s <= 5",
        ),
        (_swap("rate-limit", "hungry"), "providers.quill.attention.hungry", 18, "not a reason"),
        (
            _swap("'usage limit'", "'usage ['"),
            "providers.quill.attention.rate-limit",
            18,
            "regular",
        ),
        (_swap("[providers.quill]", "[providers.Quill]"), "providers.Quill", 4, "provider name"),
        (
            _swap('env = { QUILL_HOME = "/q" }', "env = { QUILL_HOME = 1 }"),
            "providers.quill.env",
            12,
            "strings",
        ),
        (
            _swap(
                'fresh = ["--session-id", "{new_id}"]', 'fresh = []\nid_screen = "session: (.+)"'
            ).replace(
                'resume = ["--resume", "{id}"]',
                'resume = ["--resume", "{id}"]\nid_file = { dir = "/", glob = "*",regex = "(.)" }',
            ),
            "providers.quill.id_screen",
            8,
            "second source",
        ),
        (_swap('"{new_id}"', '"new"'), "providers.quill.resume", 8, "uses {id}, but nothing"),
        (
            _swap('fresh = ["--session-id", "{new_id}"]', 'id_screen = "session: .+"'),
            "providers.quill.id_screen",
            7,
            "exactly 1 group",
        ),
        (
            _swap(
                'fresh = ["--session-id", "{new_id}"]',
                'id_file = { dir = "{root}", glob = "*", regex = "(.+)" }',
            ),
            "providers.quill.id_file.dir",
            7,
            "{root}",
        ),
        (
            _swap('fresh = ["--session-id", "{new_id}"]', 'id_file = { dir = "/x", glob = "*" }'),
            "providers.quill.id_file",
            7,
            "needs 'regex'",
        ),
        (
            _swap(
                'fresh = ["--session-id", "{new_id}"]',
                'id_file = { dir = "/x", glob = "*", regex = "(.+)", search = "name" }',
            ),
            "providers.quill.id_file.search",
            7,
            "'text' or 'path'",
        ),
        ("[providers.claude]\ncommand = 'my-claude'\n", "providers.claude.command", 2, "built in"),
        ("[providers.echo]\nready = 'x'\n", "providers.echo.ready", 2, "name of its own"),
        ("providers = 3\n", "providers", 1, "must be a table"),
        ("[providers]\nquill = 3\n", "providers.quill", 2, "must be a table"),
    ],
)
def test_a_bad_definition_is_named_with_its_key_and_line(
    tmp_path: Path, text: str, key: str, line: int, words: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(RoostError) as err:
        config.load(path)
    assert err.value.code == "config-invalid"
    assert err.value.detail == {"file": str(path), "key": key, "line": line}
    assert err.value.message.startswith(f"{path}:{line}: {key!r} ") and words in err.value.message


def test_a_spec_problem_names_the_key_inside_the_table() -> None:
    with pytest.raises(SpecProblem) as err:
        parse("quill", {"command": "q", "resume": [], "ready": "x", "busy": 3})
    assert err.value.key == "busy" and "regular expression" in err.value.problem


def test_a_cli_that_keeps_one_conversation_per_folder_needs_no_id_source() -> None:
    """Resumed without an id (aider's --restore-chat-history): roost keeps an id of its own."""
    spec = parse("aid", {"command": "aid", "resume": ["--restore"], "ready": "^> $"})
    assert spec.assigns_id and spec.id_file is None and spec.id_screen is None


def test_the_documented_examples_define_their_providers(tmp_path: Path) -> None:
    """docs/OPERATIONS.md's gemini and aider tables load as they are."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "OPERATIONS.md").read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```toml\n")[1:]]
    for name in ("gemini", "aider"):
        [block] = [b for b in blocks if f"[providers.{name}]" in b]
        cfg = config.load(write(tmp_path, block))
        assert cfg.defined_providers() == (name,)
        assert cfg.provider_specs()[name].ready is not None


def test_config_show_lists_a_defined_providers_command_and_env(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from roost.cli.main import cli

    path = write(tmp_path, GOOD)
    shown = CliRunner().invoke(cli, ["config", "show", "--json"], env={"ROOST_CONFIG": str(path)})
    values = {row["key"]: row for row in json.loads(shown.output)["values"]}
    command = values["providers.quill.command"]
    assert command["value"] == str(Path("~/bin/quill").expanduser())
    assert command["source"] == {"kind": "file", "where": f"{path}:5"}
    assert values["providers.quill.env.QUILL_HOME"]["value"] == "/q"
