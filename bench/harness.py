"""What every figure of ``bench/run.py`` shares: rows of the table, nodes and tmux under a
temporary directory, CPU and memory of process sets, parallel spawns.

Every process a figure starts carries a marker in its environment (the node's daemon, state
store, adapters, supervisors and agents inherit it; so does a private tmux server): the figure's
``finally`` stops the node (``node stop --stop-sessions``) and then kills whatever still carries
the marker, so nothing outlives a run, even a failed one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from roost.client.client import Client

MARK = "ROOST_BENCH_MARK"
ROOST = [sys.executable, "-m", "roost", "--json"]


@dataclass
class Row:
    """One line of the table: a roost figure, its baseline from the same run, the target."""

    figure: str  # "1 broker", "2 prompt", ...
    name: str  # what was measured, with its unit
    roost: float | str | None
    baseline: float | str | None = None
    target: str = ""  # the figure's target, e.g. ">= 0.9x" or "<= 1.5 ms"
    met: bool | None = None  # None: no target, or not measurable in this mode
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if isinstance(self.roost, int | float) and isinstance(self.baseline, int | float):
            return self.roost / self.baseline if self.baseline else None
        return None


@dataclass
class Mode:
    """How long and how big: ``--quick`` (a smoke run), default, ``--full`` (the growth curve)."""

    name: str
    seconds: float  # a throughput window
    rounds: int  # figure 1: bare hop and node by turns, the best of each
    samples: int  # serial calls for a p50/p99
    turns: int
    clients_seconds: float
    levels: tuple[int, ...]  # live sessions
    idle_s: float  # an idle-CPU window
    idle_rounds: int  # figure 3's live steps: the quietest of this many windows
    dormant: tuple[int, ...]  # dormant records
    output_mb: float
    output_cap_s: float  # the writer under roost is given up after this long, its rate projected
    events: int
    cli_runs: int
    growth: bool = False


QUICK = Mode(
    name="quick",
    seconds=0.3,
    rounds=1,
    samples=150,
    turns=8,
    clients_seconds=1.0,
    levels=(1, 4),
    idle_s=1.5,
    idle_rounds=1,
    dormant=(200,),
    output_mb=0.5,
    output_cap_s=30,
    events=20_000,
    cli_runs=3,
)
DEFAULT = dataclasses.replace(
    QUICK,
    name="default",
    seconds=1.5,
    rounds=3,
    samples=400,
    turns=200,  # figure 2: a p99 of 30 turns is their largest, of 100 their second largest
    clients_seconds=3.0,
    levels=(1, 16, 64),
    idle_s=5.0,
    idle_rounds=2,
    dormant=(1000,),
    output_mb=10,
    output_cap_s=90,
    events=100_000,
    cli_runs=10,
)
FULL = dataclasses.replace(
    DEFAULT,
    name="full",
    levels=(1, 16, 64, 200),
    idle_s=10.0,  # the 64 -> 200 slope of two small figures: a 6-s window gave 0.79-1.58,
    idle_rounds=3,  # one 10-s window 1.06-1.17 (another process's burst in it counts)
    dormant=(1000, 10_000),
    output_mb=50,
    output_cap_s=120,
    growth=True,
)
MODES = {m.name: m for m in (QUICK, DEFAULT, FULL)}


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def wait_for(cond: Callable[[], Any], timeout: float, what: str, every: float = 0.05) -> Any:
    """Poll ``cond`` until it returns something truthy; RuntimeError at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(every)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")


# -- processes ---------------------------------------------------------------------------------


def marked(mark: str) -> list[psutil.Process]:
    """The processes whose environment carries ``MARK=mark``: the ones this run started."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(MARK) == mark:
                found.append(proc)
    return found


def kill_marked(mark: str) -> int:
    procs = marked(mark)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(procs, timeout=10)
    return len(procs)


def cpu_seconds(procs: Sequence[psutil.Process]) -> float:
    """User + system CPU seconds of ``procs`` so far (a process gone counts nothing)."""
    total = 0.0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            total += times.user + times.system
    return total


def runtime(proc: psutil.Process) -> float:
    """CPU seconds of ``proc``'s live threads, to the nanosecond (Linux schedstat; elsewhere
    psutil's, in clock ticks). An idle window needs this: 200 processes each rounded to 10 ms
    ticks would blur a 6-second window by about a percent of a core."""
    base = Path(f"/proc/{proc.pid}/task")
    if not base.is_dir():
        return cpu_seconds([proc])
    total = 0
    for task in base.iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that just ended
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def idle_cpu(groups: Sequence[Sequence[psutil.Process]], seconds: float) -> list[float]:
    """Percent of one core each group of processes used over one window of ``seconds``."""

    def used(group: Sequence[psutil.Process]) -> float:
        return sum(runtime(p) for p in group)

    before, start = [used(g) for g in groups], time.perf_counter()
    time.sleep(seconds)  # the measuring window itself, not a synchronisation
    took = time.perf_counter() - start
    return [100 * (used(g) - b) / took for g, b in zip(groups, before, strict=True)]


def quietest_idle(
    groups: Sequence[Sequence[psutil.Process]], seconds: float, rounds: int
) -> list[float]:
    """``idle_cpu`` over ``rounds`` windows one after another, the least of each group's: a
    burst of the machine's own work (another tenant, a timer of the system) in one window is
    not the sessions' idle cost, which every window has."""
    windows = [idle_cpu(groups, seconds) for _ in range(max(1, rounds))]
    return [min(w[i] for w in windows) for i in range(len(groups))]


def settled(group: Sequence[psutil.Process], *, below: float = 1.0, limit: float = 30.0) -> float:
    """Wait until ``group`` used under ``below`` % of a core over half a second (its start-up
    work is done: a node loading its records, supervisors drawing their first screens), or
    ``limit`` seconds passed; return the seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        (used,) = idle_cpu([group], 0.5)
        if used < below:
            break
    return time.perf_counter() - start


def memory(pids: Sequence[int]) -> dict[str, float]:
    """Median RSS, USS and PSS in MiB over ``pids`` (psutil memory_full_info)."""
    infos = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            infos.append(psutil.Process(pid).memory_full_info())
    if not infos:
        raise RuntimeError("no process to measure the memory of")
    mib = 2**20
    return {
        key: quantile([getattr(i, key) / mib for i in infos], 0.5) for key in ("rss", "uss", "pss")
    }


class Helper:
    """A helper script of bench/ run as its own process, ready once it prints a line."""

    def __init__(self, script: str, *args: str, env: dict[str, str]) -> None:
        path = Path(__file__).with_name(script)
        self.proc = subprocess.Popen(
            [sys.executable, str(path), *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        if not line.strip():
            self.stop()
            raise RuntimeError(f"{script} did not start")
        self.ready = line.strip()
        self.process = psutil.Process(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


# -- a node ------------------------------------------------------------------------------------


class BenchNode:
    """A node of this run, in its own state directory, driven through the CLI and the client."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root / name
        self.state_dir = self.root / "state"
        self.workdir = self.root / "work"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.mark = uuid.uuid4().hex
        self.env = {**os.environ, "ROOST_STATE_DIR": str(self.state_dir), MARK: self.mark}
        self.env.pop("ROOST_TOKEN", None)
        self.runtime: Path | None = None

    def cli(self, *args: str, timeout: float = 120.0) -> dict[str, Any]:
        proc = subprocess.run(
            [*ROOST, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        lines = proc.stdout.strip().splitlines()
        doc: dict[str, Any] = json.loads(lines[-1]) if lines else {}
        if proc.returncode != 0:
            raise RuntimeError(f"roost {' '.join(args)}: {doc or proc.stderr.strip()}")
        return doc

    def up(self, *args: str) -> None:
        router = self.cli("node", "up", *args)["endpoints"]["router"]
        if router.startswith("ipc://"):  # its runtime directory, removed again by stop()
            self.runtime = Path(router.removeprefix("ipc://")).parent

    def client(self, timeout: float = 30.0) -> Client:
        return Client.for_state_dir(self.state_dir, timeout=timeout)

    def status(self) -> dict[str, Any]:
        with self.client() as c:
            return c.call("node.status")

    def node_processes(self) -> list[psutil.Process]:
        """The daemon (broker + node actor), the state store and the adapter host."""
        actors = self.status()["actors"]
        pids = {actors[name]["pid"] for name in ("node", "state", "adapters")}
        return [psutil.Process(pid) for pid in sorted(pids)]

    def daemon(self) -> psutil.Process:
        return psutil.Process(self.status()["actors"]["node"]["pid"])

    def supervisors(self) -> list[int]:
        actors = self.status()["actors"]
        return [a["pid"] for name, a in actors.items() if name.startswith("session/")]

    def spawn_body(self, name: str, mode: str = "pty", **extra: Any) -> dict[str, Any]:
        return {"provider": "echo", "cwd": str(self.workdir), "name": name, "mode": mode, **extra}

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.cli("node", "stop", "--stop-sessions", timeout=180)
        kill_marked(self.mark)
        if self.runtime is not None:  # the sockets a stopped node leaves behind
            shutil.rmtree(self.runtime, ignore_errors=True)


@contextlib.contextmanager
def running_node(root: Path, name: str, *up_args: str) -> Iterator[BenchNode]:
    node = BenchNode(root, name)
    try:
        node.up(*up_args)
        yield node
    finally:
        node.stop()


def spawn_many(
    node: BenchNode, bodies: Sequence[dict[str, Any]], threads: int = 6
) -> list[dict[str, Any]]:
    """Spawn every body (``session.spawn``), ``threads`` clients at a time; the records live."""
    chunks = [list(bodies[i::threads]) for i in range(threads)]
    out: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def work(chunk: list[dict[str, Any]]) -> None:
        try:
            with node.client(timeout=90) as c:
                for body in chunk:
                    out.append(c.call("session.spawn", body)["record"])
        except BaseException as err:  # reported by the caller's thread below
            errors.append(err)

    workers = [threading.Thread(target=work, args=(c,)) for c in chunks if c]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return out


# -- tmux --------------------------------------------------------------------------------------


class Tmux:
    """A private tmux server (``-L``, no config file), killed with its sessions by ``close``."""

    def __init__(self, root: Path) -> None:
        self.socket = f"roost-bench-{uuid.uuid4().hex[:8]}"
        self.mark = uuid.uuid4().hex
        self.env = {**os.environ, MARK: self.mark, "TMUX_TMPDIR": str(root)}
        self.env.pop("TMUX", None)
        self.count = 0

    def run(self, *args: str) -> str:
        proc = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return proc.stdout

    def new(self, name: str, command: str, cols: int = 200, rows: int = 50) -> None:
        self.run("new-session", "-d", "-x", str(cols), "-y", str(rows), "-s", name, command)
        self.count += 1

    def alive(self, name: str) -> bool:
        try:
            self.run("has-session", "-t", name)
            return True
        except subprocess.CalledProcessError:
            return False

    def server(self) -> psutil.Process:
        return psutil.Process(int(self.run("display-message", "-p", "#{pid}").strip()))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.run("kill-server")
        kill_marked(self.mark)


@contextlib.contextmanager
def tmux_server(root: Path) -> Iterator[Tmux]:
    tmux = Tmux(root)
    try:
        yield tmux
    finally:
        tmux.close()
