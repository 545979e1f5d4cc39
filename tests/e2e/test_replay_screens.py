"""Each recorded CLI answer (tests/fixtures/replay) drawn by a real terminal, tmux, and by the
supervisor's terminal (roost.actors.supervisor.terminal, with its fast reader of redraws): the
final screens are the same, row by row."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from roost.actors.supervisor.terminal import Terminal
from tests.e2e.test_tui import Tmux
from tests.kit import wait_until
from tests.replay import PROVIDERS, load

TMUX = shutil.which("tmux")


def rows_of(text: str) -> list[str]:
    """The rows, trailing blanks and the blank rows at the end aside."""
    rows = [row.rstrip() for row in text.split("\n")]
    while rows and not rows[-1]:
        rows.pop()
    return rows


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed: the comparison needs it")
@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_final_screen_of_a_recorded_answer_is_tmuxs(provider: str, tmp_path: Path) -> None:
    recorded = load(provider)
    data, done = tmp_path / "replay.bin", tmp_path / "done"
    data.write_bytes(recorded.data())
    sock = Path(f"/tmp/roost-replay-{uuid.uuid4().hex[:12]}.sock")  # a socket path is short
    tmux = Tmux(sock, {"PATH": "/usr/bin:/bin", "TERM": "xterm-256color", "HOME": str(tmp_path)})
    # raw: the recorded bytes are what the CLI's terminal handed over, already translated, and
    # nothing tmux answers to the CLI's queries is echoed
    command = f"stty raw -echo; cat {data}; touch {done}; sleep 600"
    try:
        tmux.start(command, recorded.cols, recorded.rows)
        wait_until(done.exists, "the replay in tmux", timeout=60)
        panes = [tmux("capture-pane", "-p", "-t", "tui")]

        def settled() -> bool:
            time.sleep(0.2)
            panes.append(tmux("capture-pane", "-p", "-t", "tui"))
            return panes[-1] == panes[-2]

        wait_until(settled, "tmux's screen to settle", timeout=30)
    finally:
        subprocess.run([*tmux.base, "kill-server"], capture_output=True, timeout=10)
        sock.unlink(missing_ok=True)
    term = Terminal(recorded.rows, recorded.cols)
    for _, chunk in recorded.chunks:
        term.feed(chunk)
    assert "Endofthelonganswer." in "".join(term.text().split())  # the answer, not a blank
    assert rows_of(term.text()) == rows_of(panes[-1])
