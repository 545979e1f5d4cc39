"""``roost ls``'s fast path: the command lines it takes (the rest are the click CLI's), and that
what it reads and sends is what the client library reads and sends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.cells import cell_len, set_cell_size

from roost.cli import quick, table
from roost.client.fast import nodefile
from roost.client.locate import default_state_dir
from roost.wire import codec as wire
from roost.wire import protocol as p

ENV: dict[str, str] = {}


@pytest.mark.parametrize(
    ("argv", "env", "parsed"),
    [
        (["ls"], ENV, (None, False, 15.0)),
        (["ls", "--json"], ENV, (None, True, 15.0)),
        (["--json", "ls"], ENV, (None, True, 15.0)),
        (["--state-dir", "/s", "ls"], ENV, ("/s", False, 15.0)),
        (["--state-dir=/s", "--timeout=2.5", "ls"], ENV, ("/s", False, 2.5)),
        (["--timeout", "3", "--json", "ls", "--json"], ENV, (None, True, 3.0)),
        (["ls"], {"ROOST_STATE_DIR": "/e"}, ("/e", False, 15.0)),
        (["--state-dir", "/s", "ls"], {"ROOST_STATE_DIR": "/e"}, ("/s", False, 15.0)),
        (["ls"], {"ROOST_STATE_DIR": ""}, (None, False, 15.0)),
        (["ls"], {"ROOST_TOKEN": "t", "ROOST_SERVER_KEY": "k"}, (None, False, 15.0)),
    ],
)
def test_the_command_lines_it_serves(
    argv: list[str], env: dict[str, str], parsed: tuple[str | None, bool, float]
) -> None:
    assert quick.parse(argv, env) == parsed


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["show", "x"],
        ["ls", "x"],
        ["ls", "--op", "x"],
        ["ls", "ls"],
        ["ls", "-h"],
        ["--help"],
        ["--version"],
        ["ls", "--json=1"],
        ["--state-dir", "ls"],  # ls is the directory; the command is missing
        ["--state-dir", "", "ls"],
        ["--state-dir", "-x", "ls"],
        ["--timeout", "soon", "ls"],
        ["--timeout", "0", "ls"],
        ["--timeout", "-1", "ls"],
        ["--timeout", "inf", "ls"],
        ["--timeout", "nan", "ls"],
        ["--connect", "tcp://127.0.0.1:1", "ls"],
        ["--node", "n1", "ls"],
        ["--hub", "tcp://127.0.0.1:1", "ls"],
        ["--state", "/s", "ls"],
        ["ls", "--state-dir", "/s"],  # a group option after the command: click refuses it
        ["--", "ls"],
    ],
)
def test_every_other_command_line_is_the_click_clis(argv: list[str]) -> None:
    assert quick.parse(argv, ENV) is None


@pytest.mark.parametrize("name", [*quick.HANDOVER_ENV, "ROOST_NO_QUICK"])
def test_a_remote_node_or_the_knob_in_the_environment_is_the_click_clis(name: str) -> None:
    assert quick.parse(["ls"], {name: "x"}) is None


@pytest.mark.parametrize("xdg", [None, "/tmp/xdg", "", "~/rel/.."])
def test_the_state_directory_is_the_one_the_click_cli_resolves(
    xdg: str | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ROOST_STATE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    if xdg is None:
        monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_STATE_HOME", xdg)
    assert quick.state_dir_of(None) == str(default_state_dir())
    for given in ("~/s", "s/../t", str(tmp_path / "x" / ".")):
        assert quick.state_dir_of(given) == str(Path(given).expanduser().resolve())


def test_the_request_header_is_the_client_librarys() -> None:
    mine = wire.pack(
        {"v": wire.PROTOCOL_VERSION, "k": "request", "id": "ab:1", "m": "session.list", "t": "n"}
    )
    theirs = p.Header(kind=p.REQUEST, rid="ab:1", method="session.list", target="n").encode()
    assert mine == theirs


@pytest.mark.parametrize(
    "text",
    [
        '{"pid": 12, "endpoints": {"router": "ipc:///r"}, "x": [1.5, -2, null, true]}',
        ' \n{"a": "\\u00e9\\ud83d\\ude00"}\r\n',
        "[NaN, Infinity, -Infinity]",
        '"just a string"',
    ],
)
def test_node_json_reads_as_json_loads_reads_it(text: str) -> None:
    assert repr(nodefile.loads(text)) == repr(json.loads(text))


@pytest.mark.parametrize("text", ["", "{", '{"a": 1} {}', '{"a": }', "nul", '{"a": 1}x'])
def test_what_json_loads_refuses_it_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        nodefile.loads(text)


@pytest.mark.parametrize(
    "text", ["", "abc", "a b~", "日本語", "é", "tab\there", "\x1b[31m", "e\u0301", "👍🏽", "x" * 40]
)
def test_cell_widths_are_richs(text: str) -> None:
    assert table.cell_len(text) == cell_len(text)
    for total in (-1, 0, 1, 2, 5, 50):
        assert table.set_cell_size(text, total) == set_cell_size(text, total), total
