"""``roost attach`` in a real terminal: the screen drawn, output followed, keys typed, detach.

The attaching CLI runs in a PTY of its own (ptyprocess), as a person's terminal would; what it
writes is collected by a reader thread and searched for the session's output.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from ptyprocess import PtyProcess

from tests.e2e.conftest import FAKES, JsonLines, Node, wait_for

DETACH = b"\x1d"


class Terminal:
    """``roost attach ARGS`` in a PTY; ``seen`` holds everything it has written."""

    def __init__(
        self,
        node: Node,
        *args: str,
        env: dict[str, str] | None = None,
        dimensions: tuple[int, int] = (30, 100),
    ) -> None:
        self.proc = PtyProcess.spawn(
            [sys.executable, "-m", "roost", "attach", *args],
            env=env or node.env,
            dimensions=dimensions,
        )
        self.seen = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = self.proc.read(4096)
            except EOFError:
                return
            with self._lock:
                self.seen += data

    def text(self) -> str:
        with self._lock:
            return self.seen.decode("utf-8", "replace")

    def raw(self) -> bytes:
        with self._lock:
            return bytes(self.seen)

    def wait_text(self, text: str, timeout: float = 15.0) -> str:
        return wait_for(lambda: self.text() if text in self.text() else None, timeout, repr(text))

    def type(self, data: bytes) -> None:
        self.proc.write(data)

    def wait_exit(self, timeout: float = 10.0) -> int:
        wait_for(lambda: not self.proc.isalive(), timeout, "roost attach to exit")
        self._reader.join(5)
        return int(self.proc.exitstatus if self.proc.exitstatus is not None else -1)

    def close(self) -> None:
        if self.proc.isalive():
            self.proc.terminate(force=True)
        self.proc.close(force=True)


@pytest.fixture
def up(node: Node) -> Node:
    node.up()
    return node


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    try:
        yield opened
    finally:
        for term in opened:
            term.close()


def _spawn(node: Node, project: Path, name: str) -> str:
    rid = str(node.run("spawn", "echo", "--name", name, "--cwd", str(project))["record"]["id"])
    node.wait_screen(rid, "echo-ready>")
    return rid


def _inputs(node: Node, rid: str) -> list[dict[str, Any]]:
    return [e for e in node.events() if e["kind"] == "session.input" and e["record"] == rid]


def _typed(node: Node, rid: str) -> str:
    """Everything typed into the record, from its session.input events, joined."""
    return "".join(e["data"].get("text", "") for e in _inputs(node, rid))


def _size(node: Node, rid: str) -> tuple[int, int]:
    rec = node.record(rid)
    return int(rec["rows"]), int(rec["cols"])


def test_attach_draws_follows_types_and_detaches(
    up: Node, project: Path, terminals: list[Terminal]
) -> None:
    rid = _spawn(up, project, "att")
    up.run("prompt", rid, "before attach")
    up.wait_screen(rid, "echo: before attach")

    term = Terminal(up, "att")
    terminals.append(term)
    term.wait_text("Ctrl-] detaches")
    term.wait_text("echo: before attach")  # the screen as the supervisor holds it

    up.run("prompt", rid, "from elsewhere")  # another client's prompt shows up live
    term.wait_text("echo: from elsewhere")

    term.type(b"typed here\r")
    up.wait_screen(rid, "echo: typed here")
    term.wait_text("echo: typed here")
    assert "typed here\r" in _typed(up, rid)  # committed to the log like any input
    term.type(b"h\xc3")  # a character split across two writes arrives whole
    term.type(b"\xa9llo\r")
    up.wait_screen(rid, "echo: h\u00e9llo")

    term.type(DETACH)
    assert term.wait_exit() == 0
    assert "detached from" in term.text()
    assert up.record(rid)["state"] == "live"  # the session runs on


def test_watchers_never_type(up: Node, project: Path, terminals: list[Terminal]) -> None:
    rid = _spawn(up, project, "watched")
    observer_env = {**up.env, "ROOST_TOKEN": (up.state_dir / "observer-token").read_text()}
    watchers = [Terminal(up, rid, env=observer_env), Terminal(up, "--read-only", rid)]
    terminals.extend(watchers)
    for term in watchers:
        term.wait_text("read-only")
        term.wait_text("echo-ready>")
        term.type(b"never sent\r")

    up.run("prompt", rid, "marker")  # both views follow the session
    for term in watchers:
        term.wait_text("echo: marker")
    assert "never sent" not in _typed(up, rid)
    assert "never sent" not in up.screen(rid)

    watchers[1].type(b"\x03")  # Ctrl-C leaves a read-only view; it never reaches the agent
    assert watchers[1].wait_exit() == 0
    up.run("stop", rid)  # the observer's view ends with the session
    watchers[0].wait_text("is dormant")
    assert watchers[0].wait_exit() == 0
    assert "never sent" not in _typed(up, rid)


def test_attach_survives_a_node_restart(up: Node, project: Path, terminals: list[Terminal]) -> None:
    rid = _spawn(up, project, "durable")
    term = Terminal(up, rid)
    terminals.append(term)
    term.wait_text("echo-ready>")

    daemon = psutil.Process(up.pid())
    daemon.send_signal(signal.SIGKILL)
    daemon.wait(10)
    up.up()
    up.wait_state(rid, "live")
    up.run("prompt", rid, "after the restart")
    term.wait_text("echo: after the restart", timeout=20)  # the SUB found the new node

    term.type(b"and typed\r")  # the attach's connection initializes again and types
    up.wait_screen(rid, "echo: and typed", timeout=20)
    term.type(DETACH)
    assert term.wait_exit() == 0


def test_attach_json_lines(up: Node, project: Path) -> None:
    rid = _spawn(up, project, "lines")
    lines = JsonLines(up.env, "attach", rid)
    try:
        first = lines.get()
        assert "echo-ready>" in first["screen"] and isinstance(first["offset"], int)
        shown = ""

        def answered() -> bool:  # prompt until the output shows: the SUB may join late
            nonlocal shown
            up.run("prompt", rid, "as json")
            shown += "".join(d.get("data", "") for d in lines.drain())
            return "echo: as json" in shown

        wait_for(answered, 20, "the output as JSON lines")
        up.run("stop", rid)
        ended = wait_for(lambda: (d := lines.get()).get("ended") and d, 20, "the session's end")
        assert ended == {"ended": "dormant"}
        assert lines.proc.wait(10) == 0
    finally:
        lines.close()


def test_attach_refusals(up: Node, project: Path) -> None:
    assert up.error("attach", "nobody")["code"] == "not-found"
    stream = up.run("spawn", "echo", "--mode", "stream", "--cwd", str(project))["record"]["id"]
    assert up.error("attach", stream)["code"] == "bad-request"
    rid = _spawn(up, project, "gone")
    up.run("stop", rid)
    assert up.error("attach", rid)["code"] == "session-not-live"


def test_attach_fits_the_session_to_its_window_and_gives_the_screen_back(
    up: Node, project: Path, terminals: list[Terminal]
) -> None:
    """The session is sized to the attached window and follows it (``--no-resize`` opts out), and
    attach draws in the alternate screen, so detaching gives the user's terminal back as it was."""
    rid = _spawn(up, project, "fit")
    assert _size(up, rid) == (40, 120)
    # the window's own size wins over $COLUMNS/$LINES a shell (or a test runner) left behind
    stale = {**up.env, "COLUMNS": "80", "LINES": "24"}
    term = Terminal(up, rid, env=stale, dimensions=(20, 70))
    terminals.append(term)
    term.wait_text("echo-ready>")
    wait_for(lambda: _size(up, rid) == (20, 70), 10, "the session at the window's size")
    term.proc.setwinsize(25, 80)  # the window changes: the session follows
    wait_for(lambda: _size(up, rid) == (25, 80), 10, "the session to follow the window")
    term.type(DETACH)
    assert term.wait_exit() == 0
    seen = term.raw()
    enter, leave = seen.index(b"\x1b[?1049h"), seen.rindex(b"\x1b[?1049l")
    assert enter < seen.index(b"echo-ready>") < leave < seen.index(b"detached from")

    kept = Terminal(up, "--no-resize", rid, dimensions=(15, 50))  # opting out
    terminals.append(kept)
    kept.wait_text("echo-ready>")
    kept.type(DETACH)
    assert kept.wait_exit() == 0
    assert _size(up, rid) == (25, 80)


def test_typed_keys_go_as_one_event_per_burst(
    up: Node, project: Path, terminals: list[Terminal]
) -> None:
    """Keys typed in a burst are not each their own durable event."""
    rid = _spawn(up, project, "burst")
    term = Terminal(up, rid)
    terminals.append(term)
    term.wait_text("Ctrl-] detaches")
    term.wait_text("echo-ready>")
    for key in b"hello world\r":
        term.type(bytes([key]))
        time.sleep(0.01)  # a fast typist's pace (not a synchronisation)
    up.wait_screen(rid, "echo: hello world")
    typed = _inputs(up, rid)
    assert "".join(e["data"]["text"] for e in typed) == "hello world\r"
    assert len(typed) <= 2, [e["data"] for e in typed]
    term.type(DETACH)
    assert term.wait_exit() == 0


def test_a_secret_typed_into_a_login_screen_is_logged_as_its_length_only(
    up: Node, project: Path, tmp_path: Path, terminals: list[Terminal]
) -> None:
    """A token pasted into a login screen stays out of state.db and `roost events`: while the
    screen is classified login (or api-key) only its length is kept."""
    env = [f"ROOST_CLAUDE_BIN={FAKES / 'claude'}", f"CLAUDE_CONFIG_DIR={tmp_path / 'c'}"]
    pairs = [a for pair in [*env, "FAKE_CLAUDE_SCREEN=login"] for a in ("--env", pair)]
    rid = up.run("spawn", "claude", "--cwd", str(project), *pairs)["record"]["id"]
    assert up.wait_state(rid, "attention")["attention"] == "login"
    secret = "sk-ant-secretTOKENxyz"  # no digit, no Enter: the fake's dialog ignores it
    term = Terminal(up, rid)
    terminals.append(term)
    term.wait_text("Select login method")
    term.type(secret.encode())
    typed = wait_for(lambda: _inputs(up, rid), 10, "the input's event")
    assert [e["data"] for e in typed] == [
        {"input": "input", "length": len(secret), "withheld": "login"}
    ]
    up.run("send", rid, secret)  # a paste through `roost send` too
    term.type(DETACH)
    assert term.wait_exit() == 0
    events = subprocess.run(
        [sys.executable, "-m", "roost", "events", "--json"],
        env=up.env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert '"withheld": "login"' in events and secret not in events
    for db in up.state_dir.glob("state.db*"):
        assert secret.encode() not in db.read_bytes(), db.name
