"""``roost tui`` against a real node: driven by Textual's pilot, and once in a real terminal (tmux).

The pilot tests run the dashboard in this process (headless) on a real node with echo sessions
and the claude stand-in; the CLI changes things meanwhile in subprocesses, and each test waits,
with a deadline, for the dashboard to show it without a key being pressed.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from roost.cli.context import Ctx, Remote
from roost.cli.dashboard import Dashboard
from tests.e2e.conftest import FAKES, Node, wait_for
from tests.e2e.test_hub import Lab, lab  # noqa: F401 (the fixture of a hub and two nodes)

SIZE = (160, 45)


def rows(app: App[Any]) -> list[str]:
    """The table as shown: one line per row, its cells' text joined by spaces."""
    table = app.query_one(DataTable)
    return [" ".join(str(cell) for cell in table.get_row_at(i)) for i in range(table.row_count)]


def row_of(app: Dashboard, name: str) -> str:
    return next((line for line in rows(app) if f" {name} " in f" {line} "), "")


async def until(
    pilot: Pilot[None], cond: Callable[[], Any], what: str, timeout: float = 10.0
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := cond():
            return value
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}; rows: {rows(pilot.app)}")


def cli(node: Node, *args: str) -> Awaitable[dict[str, Any]]:
    """``roost ARGS --json`` in a thread, so the dashboard's loop runs on meanwhile."""
    return asyncio.to_thread(node.run, *args)


def dashboard(node: Node, asked: list[str] | None = None, **kw: Any) -> Dashboard:
    """The dashboard on ``node``; ``asked`` collects the methods its feed calls."""
    ctx = Ctx(node.state_dir, json=False, timeout=10.0)
    client = node.client()
    if asked is not None:
        call = client.call

        def counted(method: str, body: dict[str, Any] | None = None, **kw: Any) -> Any:
            asked.append(method)
            return call(method, body, **kw)

        pytest.MonkeyPatch().setattr(client, "call", counted)  # this client's, for its life
    return Dashboard(ctx, client, **kw)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


def test_the_list_follows_the_node_without_a_key_press_and_filters(node: Node) -> None:
    node.up()
    node.run("spawn", "echo", "--name", "alpha")

    asked: list[str] = []

    async def scenario() -> None:
        app = dashboard(node, asked)
        async with app.run_test(size=SIZE) as pilot:
            alpha = await until(pilot, lambda: row_of(app, "alpha"), "alpha listed")
            assert "echo" in alpha and "pty" in alpha and "live" in alpha
            await until(pilot, lambda: "ready" in row_of(app, "alpha"), "alpha ready")
            # the selected session's screen, beside the list
            preview = app.query_one("#preview", Static)
            await until(pilot, lambda: "echo-ready>" in app.preview_text, "alpha's screen")
            assert preview is not None
            await pilot.press("n")  # a dialog on top while the change comes
            await cli(node, "spawn", "echo", "--name", "beta", "--mode", "stream")
            await until(pilot, lambda: _state(app, "beta") == "live", "beta live, unasked")
            await pilot.press("escape")  # the spawn dialog goes, unused
            await until(pilot, lambda: "live" in row_of(app, "beta"), "beta shown")
            await cli(node, "stop", "alpha")
            await until(pilot, lambda: "dormant" in row_of(app, "alpha"), "alpha dormant")
            await pilot.press("slash", *"bet")
            await until(pilot, lambda: len(rows(app)) == 1 and row_of(app, "beta"), "filtered")
            await pilot.press("enter")  # the filter is kept; the list has the keys again
            assert len(rows(app)) == 1
            await pilot.press("escape")
            await until(pilot, lambda: len(rows(app)) == 2, "the filter cleared")

    run(scenario)
    assert asked.count("session.list") == 1  # moved by events: the list was read once
    assert "session.show" in asked  # each change fetched the record it named


def test_a_record_that_enters_attention_rings_and_is_marked(
    node: Node, tmp_path: Path, project: Path
) -> None:
    node.up()
    env = [f"ROOST_CLAUDE_BIN={FAKES / 'claude'}", f"CLAUDE_CONFIG_DIR={tmp_path / 'claude'}"]
    env_args = [a for pair in env for a in ("--env", pair)]
    node.run("spawn", "echo", "--name", "first")

    async def scenario() -> None:
        app = dashboard(node)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: row_of(app, "first"), "first listed")
            await cli(
                node,
                "spawn",
                "claude",
                "--name",
                "cc",
                "--cwd",
                str(project),
                *env_args,
                "--env",
                "FAKE_CLAUDE_SCREEN=permission",
            )
            await until(pilot, lambda: "ready" in row_of(app, "cc"), "cc ready")
            assert app.bells == 0
            # the prompt key: the stand-in asks for permission, a screen classified attention
            await pilot.press("down", "p", *"make a file", "enter")
            cc = await until(
                pilot, lambda: "attention (permission)" in (r := row_of(app, "cc")) and r, "cc"
            )
            assert cc.startswith("!") and app.bells == 1
            await pilot.press("up", "down")  # looked at: the mark goes, the state stays
            await until(pilot, lambda: not row_of(app, "cc").startswith("!"), "mark cleared")
            assert "attention (permission)" in row_of(app, "cc") and app.bells == 1
            await cli(node, "key", "cc", "enter")  # a human answers
            await until(pilot, lambda: "live" in row_of(app, "cc").split(), "cc live again")

    run(scenario)


def test_stop_resume_forget_and_attach_keys(node: Node) -> None:
    node.up()
    node.run("spawn", "echo", "--name", "solo")
    attached: list[tuple[str, str]] = []

    def attach(ctx: Ctx, rid: str) -> None:
        attached.append((rid, str(ctx.state_dir)))

    async def scenario() -> None:
        app = dashboard(node, attach=attach)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "ready" in row_of(app, "solo"), "solo ready")
            rid = node.record("solo")["id"]
            await pilot.press("enter")
            assert attached == [(rid, str(node.state_dir))]
            await pilot.press("p", *"hi there", "enter")
            await until(pilot, lambda: "echo: hi there" in app.preview_text, "the answer")
            await pilot.press("s")
            await until(pilot, lambda: "dormant" in row_of(app, "solo"), "stopped")
            await pilot.press("enter")  # nothing to attach to: said, not attached
            assert len(attached) == 1
            await pilot.press("r")
            await until(pilot, lambda: "live" in row_of(app, "solo").split(), "resumed")
            await pilot.press("f", "y")  # refused while live: the notice says so
            await until(pilot, lambda: _notified(app, "session-record-busy"), "refusal shown")
            await pilot.press("s")
            await until(pilot, lambda: "dormant" in row_of(app, "solo"), "stopped again")
            await pilot.press("f", "n")
            await pilot.pause(0.3)
            assert row_of(app, "solo")
            await pilot.press("f", "y")
            await until(pilot, lambda: not rows(app), "forgotten")
            await pilot.press("n")
            await pilot.press("tab", *"made", "enter")
            await until(pilot, lambda: "live" in row_of(app, "made"), "spawned from the form")

    run(scenario)
    assert node.record("made")["provider"] == "echo"


def test_through_a_hub_every_node_is_shown_and_acted_on(lab: Lab, project: Path) -> None:  # noqa: F811
    lab.run("spawn", "echo", "--name", "alpha", "--cwd", str(project), node="lab-a")

    async def scenario() -> None:
        ctx = Ctx(lab.hub.state_dir, json=False, timeout=10.0)
        ctx.remote = Remote(lab.endpoint, lab.hub_key, str(lab.me))
        app = Dashboard(ctx, ctx.client())
        async with app.run_test(size=SIZE) as pilot:
            alpha = await until(pilot, lambda: row_of(app, "alpha"), "alpha listed")
            assert alpha.startswith("lab-a ") and "live" in alpha
            args = ("spawn", "echo", "--name", "beta", "--cwd", str(project))
            await asyncio.to_thread(lab.run, *args, node="lab-b")
            beta = await until(pilot, lambda: row_of(app, "beta"), "beta, on the other node")
            assert beta.startswith("lab-b ")
            await until(pilot, lambda: "ready" in row_of(app, "beta"), "beta ready")
            await pilot.press("down", "s")  # the stop goes to beta's node
            await until(pilot, lambda: "dormant" in row_of(app, "beta"), "beta stopped")
            assert "live" in row_of(app, "alpha").split()

    run(scenario)
    assert lab.nodes["lab-b"].record("beta")["state"] == "dormant"


def _state(app: Dashboard, name: str) -> str:
    """The state the dashboard holds for the record called ``name`` ("" if none)."""
    found = [e.state for e in app.board.entries.values() if e.record.get("name") == name]
    return found[0] if found else ""


def _notified(app: Dashboard, text: str) -> bool:
    return any(text in str(n.message) for n in app._notifications)


def test_json_and_no_terminal_are_refused_with_a_code(node: Node) -> None:
    node.up()
    err = node.error("tui")
    assert err["code"] == "bad-request" and "roost ls --json" in err["message"]
    assert err["detail"] == {"field": "json"}
    proc = subprocess.run(
        [sys.executable, "-m", "roost", "tui"],
        env=node.env,
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1 and "bad-request: roost tui needs a terminal" in proc.stderr


# once in a real terminal

TMUX = shutil.which("tmux")


class Tmux:
    """A tmux server of the test's own (its socket under the test's tmp dir)."""

    def __init__(self, sock: Path, env: dict[str, str]) -> None:
        self.base = [str(TMUX), "-S", str(sock)]
        self.env = env

    def __call__(self, *args: str) -> str:
        out = subprocess.run(
            [*self.base, *args], env=self.env, capture_output=True, text=True, timeout=10
        )
        return out.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "tui")

    def wait(self, text: str, timeout: float = 15.0, gone: str = "") -> str:
        """The pane once it shows ``text`` (and no longer shows ``gone``)."""

        def shown() -> str | None:
            pane = self.screen()
            return pane if text in pane and not (gone and gone in pane) else None

        return wait_for(
            shown, timeout, f"{text!r} in the pane" + (f" without {gone!r}" * bool(gone))
        )


@pytest.fixture
def tmux(node: Node) -> Iterator[Tmux]:
    if TMUX is None:
        pytest.skip("tmux is not installed: the real-terminal test needs it")
    sock = Path(f"/tmp/roost-tui-{uuid.uuid4().hex[:12]}.sock")  # short: a socket path is limited
    term = Tmux(sock, {**node.env, "TERM": "xterm-256color"})
    try:
        yield term
    finally:
        term("kill-server")
        sock.unlink(missing_ok=True)


def test_in_a_real_terminal_the_list_moves_and_attach_comes_back(node: Node, tmux: Tmux) -> None:
    node.up()
    node.run("spawn", "echo", "--name", "alpha")
    cmd = f"{sys.executable} -m roost tui"
    tmux("new-session", "-d", "-s", "tui", "-x", "160", "-y", "45", cmd)
    tmux.wait("alpha")
    tmux.wait("ready")
    node.run("spawn", "echo", "--name", "beta")
    tmux.wait("beta")  # no key was pressed
    tmux("send-keys", "-t", "tui", "Enter")  # attach to alpha, the selected row
    tmux.wait("echo-ready>", gone="PROVIDER")  # its terminal, the dashboard gone
    tmux("send-keys", "-t", "tui", "-l", "from tmux")
    tmux("send-keys", "-t", "tui", "Enter")
    tmux.wait("echo: from tmux")
    tmux("send-keys", "-t", "tui", "C-]")  # detach: the dashboard again
    back = tmux.wait("PROVIDER")
    assert "beta" in back and "alpha" in back
