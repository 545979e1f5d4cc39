"""Each real CLI's PTY output for a long streamed answer, with the time between reads: the
replay fixtures of the screen's cost and correctness (``tests/replay.py``).

The CLI runs as a supervisor runs it (the adapter's fresh argv, a 120x40 PTY) against the model
stand-in, whose LONG answer streams over ``STREAM_S``: the CLI redraws its screen as the text
arrives, as it does for a real model. The test checks the recording holds the whole answer and
replays to a screen that shows its end; with ``ROOST_RECORD_REPLAY=1`` it also writes the fixture
(``tests/fixtures/replay/<provider>.bin.gz``), so a new CLI version is recorded by running this
file with it.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from roost.actors.supervisor.pty_backend import PosixPty
from roost.actors.supervisor.terminal import Terminal
from tests.fakes.model_api import LONG_END, ModelApi
from tests.real.harness import Cli, claude_env, codex_env, kimi_env, new_session_id
from tests.replay import Replay, path_of

ROWS, COLS = 40, 120
STREAM_S = 40.0  # the long answer's stream: about the pace of a real model's answer
PROMPT = "Please give a LONG answer"
QUIET_S = 3.0  # no output for this long: the screen has settled
RECORD = os.environ.get("ROOST_RECORD_REPLAY") == "1"


class Recorder:
    def __init__(self, cli: Cli, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.pty = PosixPty([*cli.argv, *argv], str(cwd), env, ROWS, COLS)
        self.term = Terminal(ROWS, COLS)
        self.chunks: list[tuple[float, bytes]] = []
        self._last = time.monotonic()
        self._output_at = self._last

    def pump(self, timeout: float) -> None:
        fd = self.pty.fd
        assert fd is not None
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return
        try:
            data = self.pty.read(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            raise AssertionError(f"the CLI ended early; its screen:\n{self.term.text()}")
        now = time.monotonic()
        self.chunks.append((now - self._last, data))
        self._last = self._output_at = now
        self.term.feed(data)

    def until(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} in {timeout} s; the screen:\n{self.term.text()}")
            self.pump(0.05)

    def quiet(self) -> bool:
        return time.monotonic() - self._output_at >= QUIET_S

    def shows(self, text: str) -> bool:
        return "".join(text.split()) in "".join(self.term.text().split())

    def close(self) -> None:
        self.pty.signal_group(9)
        deadline = time.monotonic() + 10
        while self.pty.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)


def _version(cli: Cli, env: dict[str, str], cwd: Path) -> str:
    try:
        out = subprocess.run(
            [*cli.argv, "--version"], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        return "unknown"
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "unknown"


def _record(cli: Cli, tmp_path: Path) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    with ModelApi(log_path=tmp_path / "api.jsonl", slow_seconds=STREAM_S).start() as api:
        homes = tmp_path / "homes"
        if cli.name == "claude":
            env, argv = claude_env(homes, api, cwd), ["--session-id", new_session_id()]
        elif cli.name == "codex":
            env, argv = codex_env(homes, api, cwd), ["--no-daemon"]
        else:
            env, argv = kimi_env(homes, api, cwd), []
        rec = Recorder(cli, argv, env, cwd)
        try:
            rec.until(lambda: bool(rec.chunks) and rec.quiet(), 90, "quiet start-up screen")
            rec.pty.write(PROMPT.encode())
            rec.until(lambda: rec.shows(PROMPT), 30, "typed prompt")
            rec.until(rec.quiet, 30, "settled prompt")
            rec.pty.write(b"\r")
            rec.until(lambda: rec.shows(LONG_END), STREAM_S * 4, "end of the long answer")
            rec.until(rec.quiet, 60, "settled answer")
        finally:
            rec.close()
    replay = Replay(
        {
            "provider": cli.name,
            "version": _version(cli, env, cwd),
            "rows": ROWS,
            "cols": COLS,
            "prompt": PROMPT,
            "stream_s": STREAM_S,
        },
        rec.chunks,
    )
    replayed = Terminal(ROWS, COLS)
    replayed.feed(replay.data())
    assert "".join(LONG_END.split()) in "".join(replayed.text().split())
    assert replay.size > 20_000  # a long answer's redraws, not a blank screen
    if RECORD:
        replay.write(path_of(cli.name))


@pytest.mark.timeout(400)
def test_record_claude(claude: Cli, tmp_path: Path) -> None:
    _record(claude, tmp_path)


@pytest.mark.timeout(400)
def test_record_codex(codex: Cli, tmp_path: Path) -> None:
    _record(codex, tmp_path)


@pytest.mark.timeout(400)
def test_record_kimi(kimi: Cli, tmp_path: Path) -> None:
    _record(kimi, tmp_path)
