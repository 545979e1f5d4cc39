"""``roost tui`` against a real node: driven by Textual's pilot, and once in a real terminal (tmux).

The pilot tests run the dashboard in this process (headless) on a real node with echo sessions
and the claude stand-in; the CLI changes things meanwhile in subprocesses, and each test waits,
with a deadline, for the dashboard to show it without a key being pressed.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
import time
import unicodedata
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static

from roost.cli.context import Ctx, Remote
from roost.cli.dashboard import Dashboard
from tests.e2e.conftest import FAKES, Node, activity, stopped, wait_for
from tests.e2e.test_hub import Lab, lab  # noqa: F401 (the fixture of a hub and two nodes)
from tests.e2e.test_worktrees import repo  # noqa: F401 (the fixture of a git repository)

SIZE = (160, 45)
SIZES = [(80, 24), (120, 40), (200, 50)]  # the sizes a person runs it at, each test at all three


def rows(app: App[Any]) -> list[str]:
    """The table as shown: one line per row, its cells' text joined by spaces."""
    table = app.query_one(DataTable)
    return [" ".join(str(cell) for cell in table.get_row_at(i)) for i in range(table.row_count)]


def row_of(app: Dashboard, name: str) -> str:
    return next((line for line in rows(app) if f" {name} " in f" {line} "), "")


def shown(app: App[Any]) -> str:
    """What a person sees: the screen as drawn, one line per terminal row."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def line_of(screen: str, name: str) -> str:
    """The drawn line of the record called ``name`` ("" if none shows it; the preview's title,
    which names the selected record, is not a row)."""
    lines = [line.split("╭")[0] for line in screen.splitlines()]
    return next((line for line in lines if f" {name}" in line), "")


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


def claude_env(tmp_path: Path) -> list[str]:
    env = [f"ROOST_CLAUDE_BIN={FAKES / 'claude'}", f"CLAUDE_CONFIG_DIR={tmp_path / 'claude'}"]
    return [a for pair in env for a in ("--env", pair)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_attention_is_drawn_in_full_with_its_mark_at_every_size(
    node: Node, tmp_path: Path, project: Path, size: tuple[int, int]
) -> None:
    node.up()
    node.run("spawn", "echo", "--name", "first")
    spawn_cc = ("spawn", "claude", "--name", "cc", "--cwd", str(project), *claude_env(tmp_path))

    async def scenario() -> None:
        app = dashboard(node)
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: line_of(shown(app), "first"), "first drawn")
            await cli(node, *spawn_cc, "--env", "FAKE_CLAUDE_SCREEN=permission")
            await until(pilot, lambda: "ready" in row_of(app, "cc"), "cc ready")
            await pilot.press("down", "p", *"make a file", "enter")
            line = await until(
                pilot,
                lambda: "attention (permission)" in (got := line_of(shown(app), "cc")) and got,
                "the whole state drawn on cc's line",
            )
            assert re.search(r"!\s+cc\s", line), f"no ! mark drawn before cc: {line!r}"
            assert "STATE" in shown(app)

    run(scenario)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_status_line_is_drawn_and_says_when_the_node_does_not_answer(
    node: Node, size: tuple[int, int]
) -> None:
    node.up()
    node.run("spawn", "echo", "--name", "alpha")
    pid = node.pid()

    async def scenario() -> None:
        app = dashboard(node)
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: "ready" in line_of(shown(app), "alpha"), "alpha ready")
            await until(pilot, lambda: "1 records" in shown(app), "the count on screen")
            await pilot.press("slash", *"alp", "enter")
            await until(pilot, lambda: "filter 'alp': 1 shown" in shown(app), "the filter said")
            with stopped(pid):
                screen = await until(
                    pilot,
                    lambda: "node not answering since" in (got := shown(app)) and got,
                    "the node's silence said",
                    timeout=20.0,
                )
                assert re.search(r"not answering since \d\d:\d\d:\d\d", screen)
                assert "live?" in line_of(screen, "alpha"), "a state no longer known, unmarked"
            await until(
                pilot,
                lambda: "not answering" not in (got := shown(app)) and "live?" not in got,
                "the node answering again",
                timeout=20.0,
            )
            assert "live" in line_of(shown(app), "alpha")

    run(scenario)


def box_edges(screen: str) -> set[int]:
    """The cells where the preview box's right border is drawn, row by row."""
    return {
        cell_len(line[: line.rfind(ch)])
        for line in screen.splitlines()
        for ch in "╮│╯"
        if ch in line
    }


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_columns_fit_and_the_preview_shows_the_bottom_of_a_tall_screen(
    node: Node, size: tuple[int, int]
) -> None:
    node.up()
    node.run("spawn", "echo", "--name", "🚀 web", "--size", "60x100")
    node.run("spawn", "echo", "--name", "a-rather-long-session-name-for-the-list")
    node.wait_screen("🚀 web", "echo-ready>")
    node.run("prompt", "🚀 web", "x" * 2990 + " END-MARK")
    node.wait_screen("🚀 web", "END-MARK")

    async def scenario() -> None:
        app = dashboard(node)
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: "ready" in line_of(shown(app), "web"), "web drawn")
            await pilot.pause(0.5)  # settled: what a person reads
            screen = shown(app)
            header = next(line for line in screen.splitlines() if "NAME" in line)
            assert "STATE" in header and "NAME" in header
            for name in ("web", "a-rather-long"):
                assert re.search(r"\slive\s", line_of(screen, name)), screen
            if size[0] >= 120:  # wide enough for every column but CWD's full path
                assert "AGE" in header and "LAST" in header, header
                ages = r"\d+[smhd]\s+\d+[smhd]\s+(?:\S+\s+)?│"  # AGE, LAST (and USAGE)
                assert re.search(ages, line_of(screen, "web")), screen
            # the bottom of the tall screen: the prompt the agent printed last, under the answer
            await until(pilot, lambda: "echo-ready>" in app.preview_text, "the screen's bottom")
            # and drawn: the preview's text is set before the next repaint shows it
            drawn = lambda: "MARK" in shown(app) and "echo-ready>" in shown(app)  # noqa: E731
            await until(pilot, drawn, "the screen's bottom drawn")
            screen = shown(app)
            assert len(box_edges(screen)) == 1, f"the preview's border is not straight:\n{screen}"

    run(scenario)


async def select(pilot: Pilot[None], app: Dashboard, name: str) -> None:
    """Move the list's cursor onto the record called ``name``."""
    await pilot.press(*["up"] * len(app.board.entries))
    for _ in app.board.entries:
        if app.selected and _name(app, app.selected) == name:
            return
        await pilot.press("down")
    raise AssertionError(f"{name} not in the list: {rows(app)}")


def _name(app: Dashboard, key: tuple[str, str]) -> str:
    return str(app.board.entries[key].record.get("name"))


def field(app: App[Any], name: str) -> Input:
    return app.screen.query_one(f"#field-{name}", Input)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_turns_spawn_with_every_field_diff_and_help_from_the_keys(
    node: Node,
    repo: Path,  # noqa: F811
    size: tuple[int, int],
) -> None:
    node.up()
    node.run("spawn", "echo", "--name", "st", "--mode", "stream")
    node.run("spawn", "echo", "--name", "gone")
    node.run("stop", "gone")

    async def scenario() -> None:
        app = dashboard(node)
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: row_of(app, "st") and row_of(app, "gone"), "listed")
            await pilot.press("question_mark")  # the keys, on a page of their own
            await until(pilot, lambda: "forget a stopped record" in shown(app), "the help page")
            await pilot.press("escape")
            # a stream session: p runs a turn with the text
            await select(pilot, app, "st")
            await pilot.press("p")
            await until(pilot, lambda: "turn of st" in shown(app), "the turn's form")
            await pilot.press(*"hello", "enter")
            await until(pilot, lambda: _notified(app, "turn: accepted"), "the turn accepted")
            await until(pilot, lambda: _turned(node, "st"), "the turn ran")
            # a dormant record: refused before anything is typed
            await select(pilot, app, "gone")
            await pilot.press("p")
            await until(pilot, lambda: _notified(app, "gone is dormant"), "refused at once")
            assert len(app.screen_stack) == 1
            await pilot.press("d")  # no worktree: said so
            await until(pilot, lambda: _notified(app, "no worktree"), "no diff to show")
            # the spawn form: every field, and how to submit or cancel it
            await pilot.press("n")
            await until(pilot, lambda: "enter submits" in shown(app), "the form's hint")
            screen = shown(app)
            assert "escape cancels" in screen and "worktree" in screen and "env" in screen
            field(app, "name").value = "made"
            field(app, "cwd").value = str(repo)
            field(app, "worktree").value = "+"
            field(app, "env").value = "A=1 B"
            await pilot.press("enter")  # the env is wrong: said in the form, nothing lost
            await until(pilot, lambda: "KEY=VALUE pairs, not 'B'" in shown(app), "bad env said")
            assert field(app, "name").value == "made"
            field(app, "env").value = "A=1 B=2"
            field(app, "size").value = "30x90"
            field(app, "provider").value = "no-such-agent"
            await pilot.press("enter")  # refused by the node: what was typed is kept
            await until(pilot, lambda: _notified(app, "what you typed is kept"), "spawn failed")
            await pilot.press("n")
            await until(pilot, lambda: field(app, "name").value == "made", "the form again")
            assert field(app, "env").value == "A=1 B=2" and field(app, "worktree").value == "+"
            field(app, "provider").value = "echo"
            await pilot.press("enter")
            await until(pilot, lambda: "live" in row_of(app, "made"), "spawned from the form")
            rec = node.record("made")
            assert rec["worktree"] and rec["env"] == ["A", "B"]
            assert rec["size"] == {"rows": 30, "cols": 90}
            (Path(rec["cwd"]) / "NEW-FILE").write_text("new\n")
            await select(pilot, app, "made")
            await pilot.press("d")
            await until(pilot, lambda: "NEW-FILE" in shown(app), "the diff on screen")
            assert "diff of made" in shown(app)
            await pilot.press("escape")
            assert len(app.screen_stack) == 1

    run(scenario)


def _turned(node: Node, name: str) -> bool:
    events = node.run("events", "--id", node.record(name)["id"])["events"]
    return any(e["kind"] == "session.turn" for e in events)


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
            await pilot.press("f")  # refused while live, before asking: the notice says so
            await until(pilot, lambda: _notified(app, "stop it first"), "refusal shown")
            assert len(app.screen_stack) == 1  # no question was asked
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

    def start(self, command: str, cols: int = 160, rows: int = 45) -> None:
        """Session ``tui`` running ``command`` in a window of ``cols`` x ``rows`` from its first
        moment: the server's default size is set first, so the program never starts at 80x24
        and then meets a resize it may miss while it starts."""
        size = f"{cols}x{rows}"
        self(
            "start-server",
            ";",
            "set-option",
            "-g",
            "default-size",
            size,
            ";",
            "new-session",
            "-d",
            "-s",
            "tui",
            "-x",
            str(cols),
            "-y",
            str(rows),
            command,
        )

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
    tmux.start(cmd)
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


def cells(text: str) -> int:
    """How many columns a terminal (tmux, wcwidth) gives ``text``: wide and full-width
    characters two, combining marks, joiners and variation selectors none."""
    width = 0
    for ch in text:
        if unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def test_in_a_real_terminal_attention_status_and_columns_are_readable(
    node: Node, tmux: Tmux, tmp_path: Path, project: Path
) -> None:
    node.up()
    node.run("spawn", "echo", "--name", "first")
    node.run("spawn", "echo", "--name", "\u2764\ufe0f web")  # an emoji with a variation selector
    node.run("spawn", "echo", "--name", "a-rather-long-session-name-for-the-list")
    spawn_cc = ("spawn", "claude", "--name", "cc", "--cwd", str(project), *claude_env(tmp_path))
    node.run(*spawn_cc, "--env", "FAKE_CLAUDE_SCREEN=permission")
    activity(node, "cc", "ready")
    tmux.start(f"{sys.executable} -m roost tui")
    pane = tmux.wait("4 records")  # the status line, above the keys
    header = next(line for line in pane.splitlines() if "PROVIDER" in line)
    assert "AGE" in header and "LAST" in header, header
    tmux("send-keys", "-t", "tui", "Down")  # onto the emoji's record: its name titles the preview
    pane = tmux.wait("web ─")
    time.sleep(0.5)  # settled
    pane = tmux.screen()
    edges = {  # where the right border is drawn: the last column, on every row of the box
        cells(line[:i])
        for line in pane.splitlines()
        for i, ch in enumerate(line)
        if ch in "╮╯" or (ch == "│" and i == line.rfind("│"))
    }
    assert edges == {159}, f"the preview's right border is not straight:\n{pane}"

    def cc_row() -> str | None:
        row = next((line for line in tmux.screen().splitlines() if " claude " in line), "")
        return row if "attention (permission)" in row else None

    node.run("prompt", "cc", "make a file")
    row = wait_for(cc_row, 15.0, "cc's row with its whole state")
    assert re.search(r"!\s+cc\s", row), row
    with stopped(node.pid()):
        pane = tmux.wait("not answering since", timeout=25.0)
        assert "live?" in pane
    tmux.wait("4 records", gone="not answering", timeout=25.0)
