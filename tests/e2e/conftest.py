"""End-to-end harness: a real node in the test's tmp dir, driven through the real CLI.

Every process the test starts (daemon, state store, adapters, supervisors, agents) inherits a
unique marker in its environment; the finaliser kills every process carrying it, even when the
test failed, so nothing outlives the test.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psutil
import pytest

from roost.client.client import Client
from roost.wire.errors import RoostError

T = TypeVar("T")
FAKES = Path(__file__).resolve().parents[1] / "fakes"  # the vendor CLI stand-ins
TURN_KINDS = [  # the events of a turn with one tool call, in order
    "session.input",
    "session.tool_call",
    "session.tool_result",
    "session.output",
    "session.turn",
]
MARK = "ROOST_TEST_MARK"
# The runtime base (XDG_RUNTIME_DIR) of every node this test process starts, short for the ipc
# path limit. It holds the machine's node-id locks (one node per node id), so the nodes of tests
# run at the same time by other processes (xdist workers, other runs) never meet under the same
# --node-id, while the nodes of one test do.
RUNTIME_BASE = tempfile.mkdtemp(prefix="roost-t-")
atexit.register(shutil.rmtree, RUNTIME_BASE, True)


def wait_for(cond: Callable[[], T | None], timeout: float = 15.0, what: str = "condition") -> T:
    """Poll ``cond`` until it returns something truthy; fail with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(0.05)  # polling interval of a condition with a deadline
    raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")


class CliError(Exception):
    def __init__(self, code: str, doc: dict[str, Any]) -> None:
        super().__init__(code)
        self.code, self.doc = code, doc


class Node:
    """A node under test, addressed by its state directory."""

    def __init__(self, root: Path) -> None:
        self.state_dir = root / "state"
        self.mark = uuid.uuid4().hex
        self.env = {**os.environ, "ROOST_STATE_DIR": str(self.state_dir), MARK: self.mark}
        # the test's own configuration file (none until a test writes it), never the user's
        self.config = root / "config.toml"
        self.env["ROOST_CONFIG"] = str(self.config)
        self.env["XDG_RUNTIME_DIR"] = RUNTIME_BASE
        self.env.pop("ROOST_RUNTIME_DIR", None)  # one for every node would be shared: refused
        self.env.pop("ROOST_TOKEN", None)
        self.prefix: list[str] = []  # e.g. ["ip", "netns", "exec", NS]: the host it runs on

    def run(
        self, *args: str, check: bool = True, timeout: float = 60.0, cwd: Path | None = None
    ) -> dict[str, Any]:
        """``roost ARGS --json`` (in ``cwd``, if given); returns the document, raises CliError on
        an error document. ``-P``: like the installed ``roost`` script, the working directory is
        not searched for modules."""
        proc = subprocess.run(
            [*self.prefix, sys.executable, "-P", "-m", "roost", "--json", *args],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        try:
            doc: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise AssertionError(
                f"roost {args} printed no JSON: rc={proc.returncode} "
                f"stdout={proc.stdout!r} stderr={proc.stderr!r}"
            ) from None
        if "error" in doc:
            assert proc.returncode != 0
            if check:
                raise CliError(doc["error"]["code"], doc)
        return doc

    def error(self, *args: str) -> dict[str, Any]:
        """Run a command that must fail; returns its error body."""
        doc = self.run(*args, check=False)
        assert "error" in doc, f"roost {args} should have failed: {doc}"
        err: dict[str, Any] = doc["error"]
        return err

    def up(self, *extra: str) -> dict[str, Any]:
        return self.run("node", "up", *extra)

    def record(self, ref: str) -> dict[str, Any]:
        rec: dict[str, Any] = self.run("show", ref)["record"]
        return rec

    def screen(self, ref: str) -> str:
        return str(self.run("show", ref, "--screen").get("screen") or "")

    def wait_screen(self, ref: str, text: str, timeout: float = 15.0) -> str:
        def seen() -> str | None:
            screen = self.screen(ref)
            return screen if text in screen else None

        return wait_for(seen, timeout, f"{text!r} on the screen of {ref}")

    def wait_state(self, ref: str, state: str, timeout: float = 15.0) -> dict[str, Any]:
        return wait_for(
            lambda: r if (r := self.record(ref))["state"] == state else None,
            timeout,
            f"{ref} to be {state}",
        )

    def events(self, after: int = 0) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = self.run("events", "--after", str(after))["events"]
        return events

    def client(self) -> Client:
        return Client.for_state_dir(self.state_dir, timeout=10.0)

    def pid(self) -> int:
        return int(json.loads((self.state_dir / "node.json").read_text())["pid"])

    def processes(self) -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter():
            try:
                if proc.environ().get(MARK) == self.mark:
                    found.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return found

    def kill_all(self) -> None:
        procs = self.processes()
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGKILL)
        # dead once gone or a zombie (its parent reaps it); psutil.wait_procs would give each
        # of them up to a second of its own
        wait_for(lambda: all(map(dead, procs)), 10, "the node's processes to die")


def dead(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path)
    try:
        yield n
    finally:
        n.kill_all()


class JsonLines:
    """``roost --json ARGS`` left running (attach, events --follow): its stdout lines parsed as
    they come, by a reader thread, so a test waits on them with deadlines."""

    def __init__(self, env: dict[str, str], *args: str, prefix: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "roost", "--json", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(json.loads(line))

    def get(self, timeout: float = 15.0) -> dict[str, Any]:
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line from roost in {timeout} s") from None

    def drain(self, wait: float = 0.5) -> list[dict[str, Any]]:
        """The lines printed so far, waiting up to ``wait`` for the first."""
        out: list[dict[str, Any]] = []
        with contextlib.suppress(queue.Empty):
            out.append(self._lines.get(timeout=wait))
            while True:
                out.append(self._lines.get_nowait())
        return out

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def free_port() -> int:
    """A loopback TCP port free now (no fixed ports in tests)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client_keys(node: Node, path: Path, role: str, name: str) -> dict[str, str]:
    """A client key pair in ``path``, allowed on ``node`` (a node or a hub) with ``role``."""
    node.run("keys", "new", "--client", str(path))
    pair: dict[str, str] = json.loads(path.read_text())
    node.run("keys", "allow", "--role", role, "--name", name, "--", pair["public"])
    return pair


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A working directory for a session."""
    work = tmp_path / "proj"
    work.mkdir()
    return work


def activity(node: Node, ref: str, wanted: str, timeout: float = 15.0) -> dict[str, Any]:
    """Wait until the record's latest screen classification is ``wanted``."""
    return wait_for(
        lambda: r if (r := node.record(ref))["activity"] == wanted else None,
        timeout,
        f"{ref} to be {wanted}",
    )


def alive(pid: int) -> bool:
    """The process exists and is neither a zombie nor dead."""
    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return False


def sigkill(pid: int) -> None:
    """SIGKILL ``pid`` and wait until it is gone."""
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not alive(pid), 10, f"pid {pid} to die")


def commit_as_the_daemon_dies(
    store: int,
    daemon: int,
    call: Callable[[], dict[str, Any]],
    committing: Callable[[], bool],
    committed: Callable[[], Any],
) -> dict[str, Any]:
    """The window between a commit and its answer: ``call`` (a request, in a thread) is sent
    while the state store is stopped; once ``committing()`` says its commit is on its way, the
    daemon is stopped, the store let go until ``committed()``, and the daemon SIGKILLed holding
    the store's answer. What the caller got: ``{"reply": ...}`` or ``{"error": code}``."""
    outcome: dict[str, Any] = {}

    def send() -> None:
        try:
            outcome["reply"] = call()
        except RoostError as err:
            outcome["error"] = err.code

    sender = threading.Thread(target=send)
    os.kill(store, signal.SIGSTOP)  # briefly: it must not miss its heartbeats
    try:
        sender.start()
        wait_for(committing, 10, "the commit to be on its way")
        os.kill(daemon, signal.SIGSTOP)
    finally:
        os.kill(store, signal.SIGCONT)
    try:
        wait_for(committed, 10, "the store to commit")
    finally:
        sigkill(daemon)
    sender.join(30)
    return outcome


def log_has(path: Path, event: str) -> bool:
    """Whether the JSON-lines log ``path`` has a line with this ``event`` (yet)."""
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                if json.loads(line).get("event") == event:
                    return True
    return False


@contextlib.contextmanager
def stopped(pid: int) -> Iterator[None]:
    """The process stopped (SIGSTOP) for the block, continued however the block ends."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def assert_resume_failed_before_exit(node: Node, rid: str) -> None:
    """A resume of generation 2 that the CLI gave up by exiting: one ``resume_failed`` verdict,
    reported before the exit."""
    later = [e for e in node.run("events", "--id", rid)["events"] if e["generation"] == 2]
    verdicts = [e["data"] for e in later if e["kind"] == "session.resume"]
    assert [(v["outcome"], v["reason"]) for v in verdicts] == [("resume_failed", "exited")], [
        (e["kind"], e["data"]) for e in later
    ]
    kinds = [e["kind"] for e in later]
    assert kinds.index("session.resume") < kinds.index("session.exited")
