"""The real claude and kimi running roost's hooks: each hook arrives at a datagram socket bound
here as the signal ``roost signal`` makes of it.

Each CLI runs in a PTY of its own, with the launch the adapter plans (claude: its argv and the
per-record settings file) and the channel's environment a supervisor gives it, against the
loopback model stand-in. Nothing answers a permission: a test only reads.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from roost import hooks
from roost.actors.node.sessions import write_launch_files
from roost.actors.supervisor.terminal import Terminal
from roost.adapters.base import LaunchContext
from roost.adapters.claude import ClaudeAdapter
from roost.adapters.kimi import KimiAdapter
from roost.cli.integrate import integrate_kimi
from roost.wire.signals import ENV_GENERATION, ENV_RECORD, ENV_SOCKET, Signal, decode
from tests.fakes.model_api import ModelApi
from tests.kit import wait_until
from tests.real.harness import Cli, claude_env, kimi_env

pytestmark = pytest.mark.timeout(300)
RECORD, GENERATION = "r0123456789", 3


class Channel:
    """The supervisor's end, as a test holds it: a bound datagram socket, read by a thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.got: list[Signal] = []
        self.closed = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.closed:
            with contextlib.suppress(TimeoutError, OSError):
                self.got.append(decode(self.sock.recv(65536)))

    def env(self) -> dict[str, str]:
        return {ENV_SOCKET: str(self.path), ENV_RECORD: RECORD, ENV_GENERATION: str(GENERATION)}

    def wait(
        self,
        kind: str,
        what: str,
        timeout: float = 60,
        check: Callable[[dict[str, Any]], bool] = lambda _: True,
        **data: Any,
    ) -> Signal:
        """The first signal of ``kind`` whose data holds ``data`` and passes ``check``."""

        def found() -> Signal | None:
            for sig in list(self.got):
                holds = all(sig["data"].get(k) == v for k, v in data.items())
                if sig["kind"] == kind and holds and check(sig["data"]):
                    return sig
            return None

        wait_until(lambda: found() is not None, f"{what}: a {kind} signal {data}", timeout)
        sig = found()
        assert sig is not None
        assert (sig["record"], sig["generation"], sig["v"]) == (RECORD, GENERATION, 1)
        return sig

    def close(self) -> None:
        self.closed = True
        self.thread.join(5)
        self.sock.close()


class Agent:
    """A CLI in a PTY of its own session (120x40); its output read into a terminal screen."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True
        )
        os.close(slave)
        self.master, self.term, self.lock = master, Terminal(40, 120), threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            with self.lock:
                self.term.feed(data)

    def screen(self) -> str:
        with self.lock:
            return self.term.text()

    def wait_screen(self, text: str, timeout: float = 60) -> None:
        try:
            wait_until(lambda: text in self.screen(), f"{text!r} on the screen", timeout)
        except AssertionError as err:
            raise AssertionError(f"{err}; the screen:\n{self.screen()}") from None

    def type(self, text: str, pause: float = 0.0) -> None:
        """``text``, and Enter once the screen shows it and ``pause`` has passed: the adapter's
        ``submit_delay_s``, as the supervisor types (kimi takes a fast burst as a paste)."""
        os.write(self.master, text.encode())
        self.wait_screen(text)
        time.sleep(pause)  # pacing the TUI needs, as roost's keyboard paces it; not a wait
        os.write(self.master, b"\r")

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        os.close(self.master)
        self.thread.join(5)


@pytest.fixture
def channel(tmp_path: Path) -> Iterator[Channel]:
    chan = Channel(tmp_path / "sig.sock")
    try:
        yield chan
    finally:
        chan.close()


@contextlib.contextmanager
def running(argv: list[str], env: dict[str, str], cwd: Path) -> Iterator[Agent]:
    agent = Agent(argv, env, cwd)
    try:
        yield agent
    finally:
        agent.close()


# -- claude ----------------------------------------------------------------------------------------


def claude_launch(
    claude: Cli, tmp_path: Path, env: dict[str, str], cwd: Path
) -> tuple[list[str], dict[str, Any]]:
    """The adapter's fresh launch (its settings file written where the node writes it)."""
    session_dir = tmp_path / "sessions" / RECORD
    session_dir.mkdir(parents=True)
    ctx = LaunchContext(str(cwd), "pty", env, str(tmp_path / "data"), str(session_dir))
    launch = ClaudeAdapter().fresh(ctx)
    write_launch_files(session_dir, launch.files)
    settings: dict[str, Any] = json.loads((session_dir / "claude-settings.json").read_text())
    return [*claude.argv, *launch.argv[1:]], settings


def test_claudes_hooks_arrive_for_the_start_a_turn_and_a_permission_prompt(
    claude: Cli, model_api: ModelApi, channel: Channel, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = claude_env(tmp_path / "homes", model_api, cwd, manual=True)
    argv, _ = claude_launch(claude, tmp_path, env, cwd)
    session = argv[argv.index("--session-id") + 1]
    with running(argv, {**env, **channel.env()}, cwd) as agent:
        start = channel.wait("session", "the session start", how="startup")
        assert start["data"]["provider_session"] == session
        assert (start["source"], start["event"]) == ("hook", "SessionStart")
        agent.wait_screen("manual mode on")
        agent.type("hello")
        channel.wait("turn-start", "the prompt", provider_session=session)
        end = channel.wait("turn-end", "the turn's end", status="ok")
        assert end["event"] == "Stop" and end["seq"] > start["seq"]
        usage = channel.wait("usage", "the turn's usage", check=lambda d: d["input_tokens"] > 0)
        assert usage["data"]["cost_usd"] > 0 and usage["event"] == "statusLine"
        agent.wait_screen("Opus 5.5 · $")  # the status line roost's hook printed
        agent.wait_screen("Hello from the mock.")
        agent.type("please PERMTEST")
        asked = channel.wait("attention", "the permission prompt", reason="permission")
        assert asked["event"] == "PermissionRequest"
        assert asked["data"]["message"] == "Bash: touch made_by_mock.txt"
        agent.wait_screen("Do you want to proceed?")
        channel.wait("attention", "the permission notice", timeout=90, message=NEEDS_YOU)
        assert "Do you want to proceed?" in agent.screen()  # the hooks answered nothing
    assert not (cwd / "made_by_mock.txt").exists()


NEEDS_YOU = "Claude needs your permission"


def test_claude_runs_the_users_hooks_beside_roosts(
    claude: Cli, model_api: ModelApi, channel: Channel, tmp_path: Path
) -> None:
    """``--settings`` hooks merge with the user's own (``CLAUDE_CONFIG_DIR/settings.json``):
    both run, for the same event. A user's ``statusLine`` would be replaced by one in
    ``--settings``, so the adapter leaves its own out and the user's runs."""
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = claude_env(tmp_path / "homes", model_api, cwd)
    marks = tmp_path / "marks"
    marks.mkdir()
    user = {
        "hooks": {
            event: [{"hooks": [{"type": "command", "command": f"touch {marks}/{event}"}]}]
            for event in ("SessionStart", "UserPromptSubmit", "Stop")
        },
        "statusLine": {"type": "command", "command": f"touch {marks}/status; echo MINE"},
    }
    (Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json").write_text(json.dumps(user))
    argv, settings = claude_launch(claude, tmp_path, env, cwd)
    assert "statusLine" not in settings
    with running(argv, {**env, **channel.env()}, cwd) as agent:
        channel.wait("session", "roost's SessionStart hook")
        wait_until(lambda: (marks / "SessionStart").exists(), "the user's SessionStart hook", 60)
        agent.wait_screen("MINE")  # the user's status line
        agent.type("hello")
        channel.wait("turn-end", "roost's Stop hook", status="ok")
        wait_until(lambda: (marks / "Stop").exists(), "the user's Stop hook", 60)
    assert (marks / "UserPromptSubmit").exists() and (marks / "status").exists()
    assert not [s for s in channel.got if s["kind"] == "usage"]  # the user's line sends none


# -- kimi ------------------------------------------------------------------------------------------


def test_kimis_hooks_arrive_with_the_integration_in_place(
    kimi: Cli, model_api: ModelApi, channel: Channel, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = kimi_env(tmp_path / "homes", model_api, cwd)
    config = Path(env["KIMI_CODE_HOME"]) / "config.toml"
    before = config.read_text()
    integrate_kimi(config, remove=False)
    with running(kimi.argv, {**env, **channel.env()}, cwd) as agent:
        agent.wait_screen("Send /help for help information.")
        agent.type("hello", KIMI_PAUSE)
        start = channel.wait("session", "the session start (at the first message)", how="startup")
        session = start["data"]["provider_session"]
        assert session.startswith("session_") and start["source"] == "hook"
        channel.wait("turn-start", "TurnStarted", provider_session=session)
        channel.wait("turn-end", "Stop", status="ok")
        agent.wait_screen("Hello from the mock.")
        agent.type("please PERMTEST", KIMI_PAUSE)
        agent.wait_screen("Run this command?")
        asked = channel.wait("attention", "PermissionRequest", reason="permission")
        assert asked["data"]["message"] == "Bash: touch made_by_mock.txt"
        agent.type("3", KIMI_PAUSE)  # the test, as a person would, rejects it: kimi then says so
        channel.wait("attention", "PermissionResult", answered="rejected")
        wait_until(lambda: len([s for s in channel.got if s["kind"] == "turn-end"]) >= 2, "Stop")
        agent.type("LONG please", KIMI_PAUSE)
        agent.wait_screen("Sentence 3 of the long answer")
        os.write(agent.master, b"\x1b")  # Escape interrupts the turn
        interrupted = channel.wait("turn-end", "Interrupt", status="interrupted")
        assert interrupted["event"] == "Interrupt"
        exit_kimi(agent)
        channel.wait("session-end", "SessionEnd", how="exit")
    assert not (cwd / "made_by_mock.txt").exists()
    integrate_kimi(config, remove=True)
    assert config.read_text() == before


def test_without_the_integration_kimi_sends_nothing(
    kimi: Cli, model_api: ModelApi, channel: Channel, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = kimi_env(tmp_path / "homes", model_api, cwd)
    with running(kimi.argv, {**env, **channel.env()}, cwd) as agent:
        agent.wait_screen("Send /help for help information.")
        agent.type("hello", KIMI_PAUSE)
        agent.wait_screen("Hello from the mock.")
        exit_kimi(agent)  # kimi has run every hook it has by the time it says how to resume
    assert channel.got == []
    config = Path(env["KIMI_CODE_HOME"]) / "config.toml"
    assert hooks.hook_command("kimi") not in config.read_text()


KIMI_PAUSE = KimiAdapter.submit_delay_s


def exit_kimi(agent: Agent) -> None:
    agent.type("/exit", KIMI_PAUSE)
    agent.wait_screen("To resume this session: kimi -r session_")
