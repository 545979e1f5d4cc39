"""``roost signal``: each real hook document as its signal, and a hook that never fails its CLI.

The documents are the real CLIs' (``tests/fixtures/hooks``); the sender runs as the CLIs run it,
a process with the document on stdin, against a datagram socket bound here.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roost import hooks
from roost.cli import hook as sender
from roost.wire import signals
from roost.wire.signals import ENV_GENERATION, ENV_RECORD, ENV_SOCKET, Signal, decode

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hooks"


def fixture(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return doc


def env_for(path: Path, record: str = "r0123456789", generation: str = "4") -> dict[str, str]:
    return {ENV_SOCKET: str(path), ENV_RECORD: record, ENV_GENERATION: generation}


# -- the mapping, one real document per event ------------------------------------------------------

CLAUDE = {
    "SessionStart": ("session", {"how": "startup"}),
    "UserPromptSubmit": ("turn-start", {}),
    "Stop": ("turn-end", {"status": "ok"}),
    "StopFailure": (
        "turn-end",
        {"status": "error", "error": "API Error: 400 prompt is broken on purpose"},
    ),
    "PermissionRequest": (
        "attention",
        {"reason": "permission", "message": "Bash: touch made_by_mock.txt"},
    ),
    "Notification": (
        "attention",
        {"reason": "permission", "message": "Claude needs your permission"},
    ),
    "SessionEnd": ("session-end", {"how": "prompt_input_exit"}),
}
KIMI = {
    "SessionStart": ("session", {"how": "startup"}),
    "TurnStarted": ("turn-start", {}),
    "Stop": ("turn-end", {"status": "ok"}),
    "StopFailure": ("turn-end", {"status": "error", "error": "400 prompt is broken on purpose"}),
    "Interrupt": ("turn-end", {"status": "interrupted"}),
    "PermissionRequest": (
        "attention",
        {"reason": "permission", "message": "Bash: touch made_by_mock.txt"},
    ),
    "PermissionResult": ("attention", {"reason": "permission", "answered": "rejected"}),
    "SessionEnd": ("session-end", {"how": "exit"}),
}


@pytest.mark.parametrize("event", sorted(CLAUDE))
def test_each_claude_hook_document_is_its_signal(event: str) -> None:
    doc = fixture(f"claude/{event}")
    assert doc["hook_event_name"] == event
    kind, data = CLAUDE[event]
    assert sender.claude_signal(doc) == (kind, {"provider_session": doc["session_id"], **data})


@pytest.mark.parametrize("event", sorted(KIMI))
def test_each_kimi_hook_document_is_its_signal(event: str) -> None:
    doc = fixture(f"kimi/{event}")
    assert doc["hook_event_name"] == event
    kind, data = KIMI[event]
    assert sender.kimi_signal(doc) == (kind, {"provider_session": doc["session_id"], **data})


def test_the_events_each_cli_is_given_are_the_events_mapped() -> None:
    assert set(hooks.CLAUDE_EVENTS) == set(CLAUDE)
    assert set(hooks.KIMI_EVENTS) == set(KIMI)


def test_events_roost_does_not_use_give_no_signal() -> None:
    idle = {**fixture("claude/Notification"), "notification_type": "idle_prompt"}
    assert sender.claude_signal(idle) is None  # an idle input box is ready, not attention
    assert sender.claude_signal({"hook_event_name": "PreToolUse"}) is None
    assert sender.kimi_signal({"hook_event_name": "SessionHeartbeat"}) is None
    assert sender.claude_signal({}) is None


def test_the_status_line_is_usage_and_one_short_line() -> None:
    doc = fixture("claude-statusline")
    kind, data = sender.statusline_usage(doc)
    window, cost = doc["context_window"], doc["cost"]
    assert kind == "usage"
    assert data == {
        "provider_session": doc["session_id"],
        "input_tokens": window["total_input_tokens"],
        "output_tokens": window["total_output_tokens"],
        "cache_read_tokens": window["current_usage"]["cache_read_input_tokens"],
        "cache_write_tokens": window["current_usage"]["cache_creation_input_tokens"],
        "cost_usd": cost["total_cost_usd"],
    }
    assert data["input_tokens"] > 0 and data["cost_usd"] > 0  # a turn had run
    assert sender.status_text(doc) == f"Opus 5.5 · ${cost['total_cost_usd']:.2f}"
    assert sender.statusline_usage({}) == ("usage", {})  # nothing known: nothing said
    assert sender.status_text({"model": "x\ny"}) == ""


def test_a_signal_is_addressed_from_the_environment(tmp_path: Path) -> None:
    doc = fixture("claude/Stop")
    sig = sender.signal_of("claude", doc, env_for(tmp_path / "s"), seq=7)
    assert sig is not None
    assert (sig["record"], sig["generation"], sig["seq"]) == ("r0123456789", 4, 7)
    assert (sig["source"], sig["kind"], sig["event"]) == ("hook", "turn-end", "Stop")
    line = fixture("claude-statusline")
    status = sender.signal_of("claude-statusline", line, env_for(tmp_path), 1)
    assert status is not None and status["event"] == "statusLine"
    assert status["source"] == "statusline"
    assert sender.signal_of("claude", doc, env_for(tmp_path, generation="x"), 1) is None


# -- the sender, as a hook runs it -----------------------------------------------------------------


@pytest.fixture
def channel(tmp_path: Path) -> Iterator[tuple[socket.socket, Path]]:
    path = tmp_path / "sig.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(10)
    try:
        yield sock, path
    finally:
        sock.close()


def hook(source: str, stdin: bytes, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """``roost signal SOURCE`` as a CLI runs it: the entry point's fast path, a clean env."""
    argv = [sys.executable, "-P", "-m", "roost", "signal", source]
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return subprocess.run(argv, input=stdin, env={**base, **env}, capture_output=True, timeout=30)


def test_a_hook_sends_one_datagram_and_prints_nothing(
    channel: tuple[socket.socket, Path],
) -> None:
    sock, path = channel
    raw = (FIXTURES / "claude" / "PermissionRequest.json").read_bytes()
    done = hook("claude", raw, env_for(path))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    sig = decode(sock.recv(65536))
    assert (sig["kind"], sig["data"]["reason"], sig["event"]) == (
        "attention",
        "permission",
        "PermissionRequest",
    )


def test_the_status_line_prints_one_line_and_sends_usage(
    channel: tuple[socket.socket, Path],
) -> None:
    sock, path = channel
    raw = (FIXTURES / "claude-statusline.json").read_bytes()
    done = hook("claude-statusline", raw, env_for(path))
    assert done.returncode == 0 and done.stdout.decode().count("\n") == 1
    assert done.stdout.decode().startswith("Opus 5.5 · $")
    assert decode(sock.recv(65536))["kind"] == "usage"


def test_without_the_environment_a_hook_does_nothing(
    channel: tuple[socket.socket, Path],
) -> None:
    sock, path = channel
    raw = (FIXTURES / "claude" / "Stop.json").read_bytes()
    for env in ({}, {ENV_SOCKET: str(path)}, {ENV_SOCKET: str(path), ENV_RECORD: "r1"}):
        done = hook("claude", raw, env)
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    status = hook("claude-statusline", (FIXTURES / "claude-statusline.json").read_bytes(), {})
    assert (status.returncode, status.stdout) == (0, b"")
    sock.setblocking(False)
    with pytest.raises(BlockingIOError):
        sock.recv(65536)
    hook("claude", raw, env_for(path))  # the same run with it does send: the check can fail
    sock.settimeout(10)
    assert decode(sock.recv(65536))["kind"] == "turn-end"


@pytest.mark.parametrize(
    "stdin", [b"", b"not json", b"[1, 2]", b"\xff\xfe", b'{"hook_event_name": 5}', b"{" * 100000]
)
def test_garbage_on_stdin_is_nothing_sent_and_exit_0(
    channel: tuple[socket.socket, Path], stdin: bytes
) -> None:
    sock, path = channel
    done = hook("claude", stdin, env_for(path))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    sock.setblocking(False)
    with pytest.raises(BlockingIOError):
        sock.recv(65536)


def test_no_socket_an_unknown_source_or_bad_arguments_exit_0(tmp_path: Path) -> None:
    raw = (FIXTURES / "kimi" / "Stop.json").read_bytes()
    for source in ("kimi", "nobody"):
        done = hook(source, raw, env_for(tmp_path / "absent.sock"))
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    (tmp_path / "file").write_text("not a socket")
    done = hook("kimi", raw, env_for(tmp_path / "file"))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_a_full_socket_drops_the_signal_at_once(channel: tuple[socket.socket, Path]) -> None:
    """Nobody reads the channel: its queue fills, and a hook neither waits nor fails."""
    _, path = channel
    filler = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    filler.setblocking(False)
    sent = 0
    with filler, pytest.raises(BlockingIOError):
        for _ in range(100000):
            filler.sendto(b"x" * 4096, str(path))
            sent += 1
    assert sent > 0
    raw = (FIXTURES / "claude" / "Stop.json").read_bytes()
    assert sender.send(str(path), b"one more") is False
    done = hook("claude", raw, env_for(path))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_the_hook_command_runs_this_interpreter_without_path() -> None:
    command = hooks.hook_command("kimi")
    assert command.split()[:3] == [sys.executable, "-P", "-m"]
    assert command.endswith(" roost signal kimi")


# -- the datagram, written without roost.wire.signals' import ------------------------------------


def test_the_format_s_names_and_limits_are_the_wire_s() -> None:
    assert sender.ENV_NAMES == signals.ENV_NAMES
    assert (sender.VERSION, sender.MAX_DATAGRAM, sender.MAX_TEXT) == (
        signals.VERSION,
        signals.MAX_DATAGRAM,
        signals.MAX_TEXT,
    )
    assert set(sender.SOURCES.values()) <= set(signals.SOURCES)


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"status": "ok", "provider_session": "s"},
        {"message": "é" * 2000, "n": -(2**40), "f": 0.1, "b": True, "none": None},
        {"nested": {"k" * 100: [1, "x" * 600, {"deep": (1, 2)}], "l": list(range(50))}},
        {f"key{i}": "v" * 500 for i in range(40)},  # too big for one datagram: data dropped
        {"odd": object.__name__, "bytes-like": 3.5e300},
    ],
)
def test_a_hook_s_datagram_is_the_wire_s_byte_for_byte(data: dict[str, Any]) -> None:
    sig: Signal = {
        "v": 1,
        "record": "r0123456789",
        "generation": 2,
        "seq": 123456789012345,
        "source": "hook",
        "kind": "attention",
        "at": 1796323562.68,
        "data": data,
        "event": "PermissionRequest" * 10,
    }
    raw = sender.encode(sig)
    assert raw == signals.encode(sig)
    assert decode(raw)["record"] == "r0123456789"


def test_a_hook_imports_neither_click_nor_msgpack_nor_typing(tmp_path: Path) -> None:
    raw = (FIXTURES / "claude" / "Stop.json").read_bytes()
    argv = [sys.executable, "-X", "importtime", "-P", "-m", "roost", "signal", "claude"]
    env = {"PATH": os.environ.get("PATH", ""), **env_for(tmp_path / "none.sock")}
    done = subprocess.run(argv, input=raw, env=env, capture_output=True, timeout=30)
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines()}
    assert "roost.cli.hook" in loaded and "json" in loaded  # the check reads the right list
    assert not loaded & {"click", "msgpack", "typing", "zmq", "roost.wire.signals", "socket"}


def test_by_hand_with_json_it_says_what_it_sent(channel: tuple[socket.socket, Path]) -> None:
    """``--json`` goes through the click CLI (a hook's command line never carries it)."""
    sock, path = channel
    raw = (FIXTURES / "kimi" / "Interrupt.json").read_bytes()
    argv = [sys.executable, "-P", "-m", "roost", "signal", "kimi", "--json"]
    env = {**os.environ, **env_for(path)}
    done = subprocess.run(argv, input=raw, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["source"] == "kimi" and said["signal"]["data"]["status"] == "interrupted"
    assert decode(sock.recv(65536))["seq"] == said["signal"]["seq"]
    env = {k: v for k, v in env.items() if k not in signals.ENV_NAMES}
    done = subprocess.run(argv, input=raw, env=env, capture_output=True, timeout=60)
    assert json.loads(done.stdout) == {"source": "kimi", "signal": None}
