"""``roost ls`` without click or pyzmq (``roost.cli.quick``): the same bytes as the click CLI's
``ls`` on a real node, and every case it does not serve handed to the click CLI, which then
says what it always said. Each run is ``python -X importtime -m roost``, so the test knows
which path answered (the fast path imports neither click nor zmq); ``ROOST_NO_QUICK=1`` forces
the click path for the comparison."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pytest

from tests.e2e.conftest import FAKES, Node, sigkill, stopped, wait_for

pytestmark = pytest.mark.timeout(120)


@dataclass(frozen=True)
class Run:
    rc: int
    stdout: bytes
    stderr: bytes  # without -X importtime's lines
    modules: frozenset[str]

    @property
    def quick(self) -> bool:
        return not {"click", "zmq"} & self.modules


def roost(
    node: Node, *args: str, env: dict[str, str] | None = None, cols: int = 0, forced: bool = False
) -> Run:
    """``roost ARGS`` with stdout a pipe, or a terminal ``cols`` wide; stderr in a file."""
    env = {**node.env, **(env or {})}
    if cols:  # the window's width, not what a test runner left in $COLUMNS (xdist: 80)
        env.pop("COLUMNS", None)
        env.pop("LINES", None)
    if forced:
        env["ROOST_NO_QUICK"] = "1"
    argv = [sys.executable, "-X", "importtime", "-m", "roost", *args]
    err_path = node.state_dir.parent / "stderr"
    with open(err_path, "wb") as err:
        if cols:
            rc, out = _on_terminal(argv, env, err, cols)
        else:
            proc = subprocess.run(
                argv, env=env, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL
            )
            rc, out = proc.returncode, proc.stdout
    lines = err_path.read_bytes().splitlines(keepends=True)
    times = [line for line in lines if line.startswith(b"import time:")]
    modules = frozenset(line.rsplit(b"|", 1)[1].strip().decode() for line in times[1:])
    rest = b"".join(line for line in lines if not line.startswith(b"import time:"))
    return Run(rc, out, rest, modules)


def _on_terminal(
    argv: list[str], env: dict[str, str], err: BinaryIO, cols: int
) -> tuple[int, bytes]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    proc = subprocess.Popen(argv, env=env, stdout=slave, stderr=err, stdin=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    try:
        while chunk := os.read(master, 65536):
            out += chunk
    except OSError:  # EIO: the program, the terminal's last holder, has closed it
        pass
    finally:
        os.close(master)
    return proc.wait(30), out


def same_both_ways(node: Node, *args: str, env: dict[str, str] | None = None, cols: int = 0) -> Run:
    """``roost ARGS`` by the fast path and by the click path: the same exit code and bytes."""
    fast = roost(node, *args, env=env, cols=cols)
    slow = roost(node, *args, env=env, cols=cols, forced=True)
    assert not slow.quick
    assert (fast.rc, fast.stdout, fast.stderr) == (slow.rc, slow.stdout, slow.stderr), args
    return fast


@pytest.fixture
def records(node: Node) -> Node:
    """A node with records of every kind ``ls`` shows: long and wide names, live and dormant."""
    node.up()
    node.run("spawn", "echo", "--name", "alpha")
    node.run("spawn", "echo", "--name", "a long name that people give their sessions, " * 2)
    node.run("spawn", "echo", "--name", "日本語のセッション", "--mode", "stream")
    stopped_id = node.run("spawn", "echo", "--name", "stopped one")["record"]["id"]
    node.run("stop", stopped_id)
    return node


def test_ls_prints_the_click_paths_bytes_without_click_or_zmq(records: Node) -> None:
    for args in (
        ("ls",),
        ("ls", "--json"),
        ("--json", "ls"),
        ("--timeout", "5", "ls"),
        ("--state-dir", str(records.state_dir), "--json", "ls", "--json"),
    ):
        run = same_both_ways(records, *args)
        assert run.quick, (args, sorted(run.modules))
        assert "msgpack" not in run.modules  # small replies: roost.client.fast.tinypack
        assert run.rc == 0 and b"alpha" in run.stdout and not run.stderr
    assert b"stopped one" in run.stdout and b"dormant" in run.stdout
    elsewhere = {"ROOST_STATE_DIR": str(records.state_dir.parent / "nothing here")}
    assert roost(records, "--state-dir", str(records.state_dir), "ls", env=elsewhere).quick


def test_ls_fits_the_terminal_as_the_click_path_does(records: Node) -> None:
    for cols in (200, 72, 50, 30):
        run = same_both_ways(records, "ls", cols=cols)
        assert run.quick and run.rc == 0
    assert "…".encode() in run.stdout and b"GEN" not in run.stdout  # shrunk, then dropped


def test_ls_at_80_columns_keeps_names_and_states_with_their_reason(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """At 80 columns what a person reads first stays whole (the name, the state and why it needs
    attention); the provider session id gives way (left out whole, never cut)."""
    node.up()
    node.run("spawn", "echo", "--name", "shepherd", "--cwd", str(project))
    wait_for(lambda: node.record("shepherd")["provider_session"], 15, "shepherd's session id")
    env = [f"ROOST_CLAUDE_BIN={FAKES / 'claude'}", f"CLAUDE_CONFIG_DIR={tmp_path / 'claude'}"]
    env.append("FAKE_CLAUDE_SCREEN=trust")
    args = [arg for pair in env for arg in ("--env", pair)]
    rid = node.run("spawn", "claude", "--name", "reviewer", "--cwd", str(project), *args)
    node.wait_state(rid["record"]["id"], "attention")
    run = same_both_ways(node, "ls", cols=80)
    assert run.quick and run.rc == 0
    lines = run.stdout.decode().splitlines()
    assert "…" not in run.stdout.decode(), lines
    assert "shepherd" in lines[1] + lines[2] and "reviewer" in lines[1] + lines[2], lines
    assert any("attention (trust)" in line for line in lines), lines
    assert lines[0].split() == ["ID", "NAME", "PROVIDER", "STATE"], lines
    assert max(len(line) for line in lines) <= 80
    wide = roost(node, "ls", cols=120).stdout.decode().splitlines()
    assert "PROVIDER SESSION" in wide[0] and all(len(line) <= 120 for line in wide), wide


def test_no_records(node: Node) -> None:
    node.up()
    run = same_both_ways(node, "ls")
    assert run.quick and run.stdout == b"no records\n"


def test_the_console_script_takes_the_fast_path(records: Node) -> None:
    script = Path(sys.executable).with_name("roost")
    if not script.exists():
        pytest.skip("no console script beside this interpreter")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", str(script), "ls"],
        env=records.env,
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0 and b"alpha" in proc.stdout
    assert b" click\n" not in proc.stderr and b" zmq\n" not in proc.stderr


def test_whatever_it_does_not_serve_is_the_click_paths(node: Node, tmp_path: Path) -> None:
    """No node, a node gone, a refused token, a remote node, an option of another command:
    handed over, so the error text and exit code are the click path's."""
    not_running = same_both_ways(node, "ls")
    assert not_running.rc == 1 and b"error: node-not-running" in not_running.stderr
    node.up()
    for env in ({"ROOST_TOKEN": "not the token"}, {"ROOST_CONNECT": "tcp://127.0.0.1:9"}):
        run = same_both_ways(node, "--timeout", "1", "ls", env=env)
        assert run.rc == 1 and b"error: " in run.stderr, env
    for args in (("ls", "--bogus"), ("--json", "ls", "--op", "x"), ("ls", "-h")):
        run = same_both_ways(node, *args)
        assert not run.quick
    sigkill(node.pid())
    gone = same_both_ways(node, "ls")
    assert gone.rc == 1 and b"is gone" in gone.stderr


def test_a_node_that_does_not_answer_within_a_second_is_the_click_paths(node: Node) -> None:
    """The fast path gives up after a second; the click path then waits its --timeout, with its
    progress note, and says it timed out."""
    node.up()
    with stopped(node.pid()):
        run = same_both_ways(node, "--timeout", "1.5", "ls")
    assert not run.quick
    assert run.rc == 1 and b"error: timeout" in run.stderr
