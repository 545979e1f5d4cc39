"""``roost ls``'s fast path: the command lines it takes (the rest are the click CLI's), and that
what it reads and sends is what the client library reads and sends."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import zmq
from rich.cells import cell_len, set_cell_size

from roost.cli import listing, quick, table
from roost.client.fast import nodefile
from roost.client.fast.zmtp import Dealer, ZmtpError
from roost.client.locate import default_state_dir
from roost.wire import codec as wire
from roost.wire import protocol as p
from roost.wire.errors import RoostError

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


@pytest.mark.parametrize(
    ("argv", "env", "command", "args", "values", "as_json"),
    [
        (["show", "r1"], ENV, "show", ["r1"], {}, False),
        (["--json", "show", "--screen", "r1"], ENV, "show", ["r1"], {}, True),
        (["show", "r1", "--screen", "--json"], ENV, "show", ["r1"], {}, True),
        (["prompt", "r1", "hello there"], ENV, "prompt", ["r1", "hello there"], {}, False),
        (["prompt", "r1", "-"], ENV, "prompt", ["r1", "-"], {}, False),  # "-" is an argument
        (["send", "--op", "o1", "r1", "x"], ENV, "send", ["r1", "x"], {"--op": "o1"}, False),
        (["send", "r1", "x", "--op=o1", "--op", "o2"], ENV, "send", ["r1", "x"], {"--op": "o2"}, 0),
        (["key", "r1", "escape", "enter"], ENV, "key", ["r1", "escape", "enter"], {}, False),
        (["key", "r1", "tab"], {"ROOST_GRANT": "g1"}, "key", ["r1", "tab"], {"--grant": "g1"}, 0),
        (["key", "r1", "tab", "--grant", "g2"], {"ROOST_GRANT": "g1"}, "key", ["r1", "tab"], {}, 0),
        (["op", "o1", "--json"], ENV, "op", ["o1"], {}, True),
        (["events"], ENV, "events", [], {}, False),
        (["events", "--after=12", "--limit", "3", "--id", "r1"], ENV, "events", [], {}, False),
    ],
)
def test_the_command_lines_of_a_scripts_loop_it_serves(
    argv: list[str],
    env: dict[str, str],
    command: str,
    args: list[str],
    values: dict[str, str],
    as_json: bool,
) -> None:
    line = quick.parse_line(argv, env)
    assert line is not None
    assert (line.command, line.args, line.json) == (command, args, as_json)
    assert values.items() <= line.values.items()
    if line.changes:
        given = argv[argv.index("--grant") + 1] if "--grant" in argv else None
        assert line.values["--grant"] == (given or env.get("ROOST_GRANT", ""))
    assert quick.parse(argv, env) is None  # not ls


@pytest.mark.parametrize(
    "argv",
    [
        ["show"],
        ["show", "r1", "r2"],
        ["show", "r1", "--json=1"],
        ["show", "r1", "-h"],
        ["prompt", "r1"],
        ["prompt", "r1", "a", "b"],
        ["prompt", "r1", "-n"],  # click takes it for an option it does not have
        ["prompt", "r1", "x", "--wait"],
        ["prompt", "r1", "--", "-x"],
        ["send", "r1", "x", "--op"],
        ["send", "r1", "x", "--op", ""],
        ["send", "r1", "x", "--grant="],
        ["key", "r1"],
        ["op"],
        ["op", "o1", "--op", "o2"],
        ["events", "--follow"],
        ["events", "--retry-for", "3"],
        ["events", "--after", "-1"],
        ["events", "--after", "1.5"],
        ["events", "--limit", "٣"],  # click.INT takes it; here only ASCII digits are
        ["events", "r1"],
        ["show", "r1", "--state-dir", "/s"],
        ["turn", "r1", "x"],
        ["--hub", "tcp://127.0.0.1:1", "show", "r1"],
    ],
)
def test_every_other_command_line_of_theirs_is_the_click_clis(argv: list[str]) -> None:
    assert quick.parse_line(argv, ENV) is None


def test_a_changes_header_carries_its_operation_and_grant_as_the_client_librarys(
    tmp_path: Path,
) -> None:
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind(f"ipc://{tmp_path}/r")
    conn = _conn(f"ipc://{tmp_path}/r")
    try:
        rid = conn.send("session.prompt", {"id": "r1", "text": "hi"}, "op-1", "g-1")
        _, header, body = sock.recv_multipart()
        theirs = p.Header(
            kind=p.REQUEST, rid=rid, method="session.prompt", target="node", grant="g-1", op="op-1"
        )
        assert header == theirs.encode() and body == p.pack({"id": "r1", "text": "hi"})
    finally:
        conn.dealer.close()
        sock.close(0)


def test_a_change_unanswered_says_so_after_a_second_and_times_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sent once and waited for until ``--timeout``, with the click path's progress note and
    error (never handed over: the click path would send it again)."""
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind(f"ipc://{tmp_path}/r")
    conn = _conn(f"ipc://{tmp_path}/r")
    try:
        rid = conn.send("session.input", {"id": "r1", "text": "x"})
        started = time.monotonic()
        with pytest.raises(RoostError) as caught:
            quick.await_reply(conn, rid, "session.input", 1.6)
        assert 1.5 < time.monotonic() - started < 3
        assert str(caught.value) == "timeout: no answer to session.input in time"
        said = capsys.readouterr().err
        assert said == "roost: waiting for the node's answer (session.input)\n"
        conn.dealer.extend(5.0)
        rid = conn.send("session.input", {"id": "r1", "text": "y"})
        sock.recv_multipart()  # the first request, never answered
        routing_id, header, _ = sock.recv_multipart()
        assert p.Header.decode(header).rid == rid
        reply = p.Header(kind=p.RESPONSE, rid=rid).encode()
        sock.send_multipart([routing_id, reply, p.pack({"seq": 7})])
        assert quick.await_reply(conn, rid, "session.input", 5.0) == {"seq": 7}
    finally:
        conn.dealer.close()
        sock.close(0)


def _conn(endpoint: str) -> quick.Conn:
    """A Conn on ``endpoint`` as if initialize had said the target is ``node``."""
    conn = object.__new__(quick.Conn)
    conn.prefix, conn.ids, conn.target = "ab:", 0, "node"
    conn.dealer = Dealer(endpoint, 5.0)
    return conn


@pytest.mark.parametrize(
    "doc",
    [
        {"b": 1, "a": [1.5, -0.0, 1e300, float("nan"), float("inf"), -float("inf"), None]},
        {"t": [True, False, "é\x1b\u2028日本\ud800", b"by\xfftes", 2**70, -1.0e-7, ("t", 1)]},
        {"z": {"y": [{"x": 1}]}, "": {}},
        {2: "int keys", 1: "as strings"},
        "a string\x00",
        3,
        [],
    ],
)
def test_the_json_it_prints_is_json_dumps(doc: object) -> None:
    for ensure_ascii in (True, False):
        theirs = json.dumps(
            doc, default=listing._default, ensure_ascii=ensure_ascii, sort_keys=True
        )
        assert listing.dumps(doc, ensure_ascii) == theirs


def test_a_suggestions_lookup_that_fails_hands_a_read_over_and_leaves_a_change_as_said(
    tmp_path: Path,
) -> None:
    """``did you mean`` asks the node for its records: a read hands over when that fails on the
    fast path's way (the click CLI asks again), a change (sent already) says its error as is."""
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind(f"ipc://{tmp_path}/r")
    conn = _conn(f"ipc://{tmp_path}/r")
    conn.dealer.extend(0.2)  # the router never answers
    err = RoostError("not-found", "no record with id or name 'x'", {"ref": "x"})
    try:
        show, send = quick.parse_line(["show", "x"], ENV), quick.parse_line(["send", "x", "t"], ENV)
        assert show is not None and send is not None
        with pytest.raises(ZmtpError):
            quick.explain(conn, show, err, "/s", True)
        conn.dealer.extend(0.2)
        said = quick.explain(conn, send, err, "/s", False)
        assert (said.code, said.message) == ("not-found", err.message)
    finally:
        conn.dealer.close()
        sock.close(0)
