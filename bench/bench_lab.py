"""Benchmark: a lab at scale, one hub and N nodes (default 10) with S echo sessions (default 500).

Prints figures, never fails on them. As root it makes one network namespace for the hub, one
for each node and one for the client (this script's measuring side), each node and the client
joined to the hub by a veth pair with private addresses that exist only in those namespaces (as
``tests/e2e/netns.py`` does; this file carries its own small copy). The nodes link to the hub over
CURVE TCP; the client talks to the hub over CURVE TCP with the Python client. Measured:

- ``session.spawn`` of S echo sessions through the hub, spread over the nodes (one client per
  node, the nodes in parallel): p50, p99 and the total;
- ``session.list`` through the hub (its fan-out to every node): p50 and p99 and the records;
- a prompt to every session while subscribed to the hub's events: every accepted prompt's
  ``session.input`` event must arrive relayed live (expected against received);
- the hub's CPU seconds and RSS over the run, and the nodes' total (every process of theirs);
- the hub SIGKILLed and started again on the same address and keys: the time until every node
  is linked again (``hub.nodes``), in seconds and in link heartbeats.

Spawning stops early (and says why) when the machine's available memory falls below
``--min-free-gib`` or spawning has taken ``--spawn-budget`` seconds. Every process the run starts
carries a marker in its environment and is SIGKILLed at the end, and the namespaces and the
temporary directory are deleted, on success, failure, SIGTERM or Ctrl-C.

    sudo .venv/bin/python bench/bench_lab.py [--nodes 10] [--sessions 500] [--json]
    sudo .venv/bin/python bench/bench_lab.py --nodes 3 --sessions 30     # a quick check
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import psutil
from harness import MARK, marked, quantile
from table import load, machine

from roost.broker.registry import HEARTBEAT_S
from roost.client.client import Client, Curve, EventStream
from roost.wire.errors import RoostError

PORT = 7800  # the hub's listen port inside its own namespace (events: PORT + 1)
CLONE_NEWNET = 0x40000000
MIB = 2**20
GIB = 2**30
PHASES = ("up", "spawn", "list", "prompt")
EVENTS_GRACE_S = 30.0  # after the last prompt, how long the relayed events may take to arrive


def log(msg: str) -> None:
    print(f"# {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def ms(values: list[float], q: float) -> float | None:
    return round(quantile(values, q) * 1000, 2) if values else None


# -- hosts: network namespaces joined to the hub -------------------------------------------------


def why_not() -> str:
    """Why this machine cannot make the lab, or "" when it can."""
    if sys.platform != "linux":
        return "network namespaces are Linux's"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    probe = f"rl-probe-{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` is not permitted here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return ""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


class Hosts:
    """A namespace per host; every host but the hub joined to the hub by a veth pair with a
    private /24 (10.<net>.<link>.0/24). The root namespace gets no address and no route."""

    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex[:6]
        self.net = random.randrange(16, 250)
        self.names: dict[str, str] = {}
        self.hub_addr: dict[str, str] = {}  # the hub's address as each host reaches it
        self.links = 0

    def add(self, host: str) -> None:
        name = f"rl-{self.tag}-{host}"
        _ip("netns", "add", name)
        self.names[host] = name
        _ip("-n", name, "link", "set", "lo", "up")
        if host != "hub":
            self._join(host)

    def _join(self, host: str) -> None:
        self.links += 1
        left, right = f"rl{self.tag}{self.links}a", f"rl{self.tag}{self.links}b"
        _ip("link", "add", left, "type", "veth", "peer", "name", right)
        ends = ((left, "hub", 1), (right, host, 2))
        for dev, where, last in ends:
            address = f"10.{self.net}.{self.links}.{last}"
            _ip("link", "set", dev, "netns", self.names[where])
            _ip("-n", self.names[where], "addr", "add", f"{address}/24", "dev", dev)
            _ip("-n", self.names[where], "link", "set", dev, "up")
        self.hub_addr[host] = f"10.{self.net}.{self.links}.1"

    def prefix(self, host: str) -> list[str]:
        return ["ip", "netns", "exec", self.names[host]]

    def close(self) -> None:
        for name in self.names.values():  # deleting a namespace deletes its veth ends
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        self.names.clear()


def setns(path: str) -> None:
    """This thread (and the threads it starts, libzmq's I/O threads among them) into the network
    namespace at ``path`` (Python 3.11 has no os.setns)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


# -- the lab -------------------------------------------------------------------------------------


class Lab:
    """The hub, the nodes and the client's keys in one temporary directory; every process with
    this run's marker."""

    def __init__(self, root: Path, hosts: Hosts, nodes: int) -> None:
        self.root, self.hosts = root, hosts
        self.mark = uuid.uuid4().hex
        self.node_ids = [f"n{i}" for i in range(1, nodes + 1)]
        self.hub_key = ""
        self.curve: Curve | None = None
        self.hub_pid = 0

    def state(self, host: str) -> Path:
        return self.root / host / "state"

    def env(self, host: str) -> dict[str, str]:
        runtime = self.root / "rt" / host  # a machine of its own: runtime base, node-id locks
        runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
        env = {**os.environ, "ROOST_STATE_DIR": str(self.state(host)), MARK: self.mark}
        env["XDG_RUNTIME_DIR"] = str(runtime)
        env["ROOST_CONFIG"] = str(self.root / "config.toml")  # none: never the user's
        for name in ("ROOST_RUNTIME_DIR", "ROOST_TOKEN", "ROOST_HUB", "ROOST_NODE"):
            env.pop(name, None)
        return env

    def cli(self, host: str, *args: str, timeout: float = 120.0) -> dict[str, Any]:
        """``roost --json ARGS`` on ``host``, with that host's directory."""
        proc = subprocess.run(
            [*self.hosts.prefix(host), sys.executable, "-P", "-m", "roost", "--json", *args],
            env=self.env(host),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        lines = proc.stdout.strip().splitlines()
        doc: dict[str, Any] = json.loads(lines[-1]) if lines else {}
        if proc.returncode != 0 or "error" in doc:
            raise RuntimeError(f"roost {' '.join(args)} on {host}: {doc or proc.stderr.strip()}")
        return doc

    def hub_up(self) -> None:
        started = self.cli("hub", "hub", "up", "--listen", f"tcp://0.0.0.0:{PORT}")
        self.hub_pid = int(started["pid"])

    def make(self) -> None:
        self.hub_key = self.cli("hub", "keys", "new")["public"]
        me = self.root / "me.json"
        self.cli("hub", "keys", "new", "--client", str(me))
        pair = json.loads(me.read_text())
        self.cli("hub", "keys", "allow", "--role", "operator", "--name", "me", "--", pair["public"])
        self.curve = Curve(self.hub_key, pair["public"], pair["secret"])
        for nid in self.node_ids:
            public = self.cli(nid, "keys", "new")["public"]
            self.cli("hub", "keys", "allow", "--role", "node", "--name", nid, "--", public)
            (self.root / nid / "work").mkdir(parents=True)
        self.hub_up()

        def up(nid: str) -> Callable[[], object]:
            hub = f"tcp://{self.hosts.hub_addr[nid]}:{PORT}"
            args = ("node", "up", "--node-id", nid, "--hub", hub, "--hub-key", self.hub_key)
            return lambda: self.cli(nid, *args)

        errors = parallel({nid: up(nid) for nid in self.node_ids}, 180)
        if errors:
            raise errors[0]

    def client(self, via: str = "", timeout: float = 30.0) -> Client:
        """A CURVE TCP client of the hub, from the client's namespace (this thread's)."""
        client = Client(f"tcp://{self.hosts.hub_addr['cli']}:{PORT}", "", curve=self.curve)
        client.timeout = timeout
        try:
            client.initialize()
        except BaseException:
            client.close()
            raise
        if via:
            client.via(via)
        return client

    def hub_procs(self) -> list[psutil.Process]:
        with contextlib.suppress(psutil.Error):
            hub = psutil.Process(self.hub_pid)
            return [hub, *hub.children(recursive=True)]
        return []

    def node_procs(self) -> list[psutil.Process]:
        hub = {p.pid for p in self.hub_procs()}
        return [p for p in marked(self.mark) if p.pid not in hub]

    def kill_all(self) -> int:
        """SIGKILL every process of the run until none is left (a zygote may fork meanwhile)."""
        killed = 0
        for _ in range(5):
            procs = [p for p in marked(self.mark) if p.pid != os.getpid()]
            if not procs:
                break
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(signal.SIGKILL)
            killed += len(procs)
            psutil.wait_procs(procs, timeout=10)
        return killed


# -- measuring -----------------------------------------------------------------------------------


def cpu_s(procs: list[psutil.Process]) -> float:
    total = 0.0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            total += t.user + t.system
    return total


def rss_mib(procs: list[psutil.Process]) -> float:
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total / MIB


def phases(cumulative: dict[str, float]) -> dict[str, float]:
    """CPU seconds of each phase (the first: everything until its end), and their total."""
    out, before = {}, 0.0
    for phase, so_far in cumulative.items():
        out[phase], before = round(so_far - before, 2), so_far
    out["total"] = round(before, 2)
    return out


class Sampler:
    """Every ``every`` seconds: the hub's RSS (its peak kept), the machine's available memory
    (its low kept)."""

    def __init__(self, lab: Lab, every: float = 1.0) -> None:
        self.lab, self.every = lab, every
        self.hub_rss_peak = 0.0
        self.available_low = psutil.virtual_memory().available
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def sample(self) -> None:
        self.hub_rss_peak = max(self.hub_rss_peak, rss_mib(self.lab.hub_procs()))
        self.available_low = min(self.available_low, psutil.virtual_memory().available)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


class Events:
    """A subscriber to the hub's events (every node's ``e/``), read by a thread of its own."""

    def __init__(self, stream: EventStream) -> None:
        self.stream = stream
        self.inputs: Counter[tuple[str, str, int]] = Counter()  # (node, record, seq)
        self.kinds: Counter[str] = Counter()
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            got = self.stream.recv(0.2)
            if got is None:
                continue
            topic, body = got
            node = topic.partition("/")[0]
            kind = str(body.get("kind", ""))
            with self.lock:
                self.kinds[kind] += 1
                if kind == "session.input":
                    self.inputs[(node, str(body.get("record")), int(body.get("seq", 0)))] += 1

    def has(self, key: tuple[str, str, int]) -> bool:
        with self.lock:
            return key in self.inputs

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.stream.close()


def parallel(work: Mapping[str, Callable[[], object]], timeout: float) -> list[BaseException]:
    """Run each callable in a thread of its own (started from this one: this namespace), wait
    at most ``timeout`` for all; the errors they raised."""
    errors: list[BaseException] = []

    def wrap(fn: Callable[[], object]) -> None:
        try:
            fn()
        except BaseException as err:  # reported by the caller
            errors.append(err)

    threads = [threading.Thread(target=wrap, args=(fn,), daemon=True) for fn in work.values()]
    deadline = time.monotonic() + timeout
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in threads):
        errors.append(TimeoutError(f"workers still running after {timeout:.0f} s"))
    return errors


class Run:
    """The measures, in the order they are taken; ``doc`` is the report."""

    def __init__(self, lab: Lab, args: argparse.Namespace) -> None:
        self.lab, self.args = lab, args
        self.doc: dict[str, Any] = {"nodes": len(lab.node_ids), "sessions_asked": args.sessions}
        self.records: dict[str, list[str]] = {n: [] for n in lab.node_ids}
        self.sampler = Sampler(lab)
        self.hub_cpu: dict[str, float] = {}  # phase -> CPU seconds so far (cumulative)
        self.node_cpu: dict[str, float] = {}
        self.hub_rss: dict[str, float] = {}  # phase -> MiB at its end

    def mark(self, phase: str) -> None:
        """CPU seconds so far of the hub and of every node process, at the end of ``phase``."""
        self.hub_cpu[phase] = cpu_s(self.lab.hub_procs())
        self.node_cpu[phase] = cpu_s(self.lab.node_procs())
        self.hub_rss[phase] = round(rss_mib(self.lab.hub_procs()), 1)

    def linked(self, client: Client) -> int:
        return sum(1 for n in client.call("hub.nodes")["nodes"] if n["linked"])

    def wait_linked(self, timeout: float, since: float = 0.0) -> tuple[float, float, int]:
        """Poll ``hub.nodes`` (a fresh connection after each failure) until every node is linked:
        the seconds until the hub first answered, until every node was linked, and how many were
        linked at that first answer; counted from ``since`` (perf_counter), else from now."""
        start = since or time.perf_counter()
        deadline = start + timeout
        want = len(self.lab.node_ids)
        client: Client | None = None
        answered: tuple[float, int] | None = None
        try:
            while time.perf_counter() < deadline:
                try:
                    if client is None:
                        client = self.lab.client(timeout=0.5)
                    linked = self.linked(client)
                    now = time.perf_counter() - start
                    answered = answered or (now, linked)
                    if linked >= want:
                        return answered[0], now, answered[1]
                except RoostError:
                    if client is not None:
                        client.close()
                    client = None
                time.sleep(0.02)  # polling interval of hub.nodes
        finally:
            if client is not None:
                client.close()
        raise TimeoutError(f"not every node linked within {timeout:.0f} s")

    def spawn(self) -> None:
        args, nodes = self.args, self.lab.node_ids
        plan: dict[str, list[str]] = {n: [] for n in nodes}
        for j in range(args.sessions):
            plan[nodes[j % len(nodes)]].append(f"s{j}")
        latencies: list[float] = []
        failed: Counter[str] = Counter()
        stop = threading.Event()
        why: list[str] = []
        floor = args.min_free_gib * GIB
        deadline = time.monotonic() + args.spawn_budget

        def spawner(nid: str, names: list[str]) -> Callable[[], None]:
            def run() -> None:
                with self.lab.client(via=f"{nid}/node", timeout=90) as c:
                    for name in names:
                        if stop.is_set():
                            return
                        available = psutil.virtual_memory().available
                        if available < floor:
                            why.append(
                                f"available memory {available / GIB:.1f} GiB fell below "
                                f"--min-free-gib {args.min_free_gib}"
                            )
                            stop.set()
                            return
                        if time.monotonic() > deadline:
                            why.append(f"--spawn-budget {args.spawn_budget:.0f} s ran out")
                            stop.set()
                            return
                        body = {
                            "provider": "echo",
                            "name": name,
                            "cwd": str(self.lab.root / nid / "work"),
                            "mode": "pty",
                        }
                        started = time.perf_counter()
                        try:
                            rec = c.call("session.spawn", body)["record"]
                        except RoostError as err:
                            failed[err.code] += 1
                            if sum(failed.values()) >= 20:
                                why.append(f"20 spawns failed: {dict(failed)}")
                                stop.set()
                            continue
                        latencies.append(time.perf_counter() - started)
                        self.records[nid].append(str(rec["id"]))

            return run

        work = {}
        for nid in nodes:
            per = [plan[nid][k :: args.per_node] for k in range(args.per_node)]
            for k, names in enumerate(per):
                if names:
                    work[f"{nid}.{k}"] = spawner(nid, names)
        started = time.perf_counter()
        errors = parallel(work, args.spawn_budget + 120)
        took = time.perf_counter() - started
        spawned = sum(len(r) for r in self.records.values())
        reasons = why + [f"{type(e).__name__}: {e}" for e in errors]
        self.doc["sessions"] = spawned
        self.doc["spawn"] = {
            "p50_ms": ms(latencies, 0.5),
            "p99_ms": ms(latencies, 0.99),
            "max_ms": round(max(latencies) * 1000, 1) if latencies else None,
            "total_s": round(took, 2),
            "per_s": round(spawned / took, 1) if took else None,
            "in_flight": len(work),
            "failed": dict(failed),
            "stopped_early": "; ".join(dict.fromkeys(reasons)),
        }
        log(f"spawned {spawned} of {args.sessions} in {took:.1f} s {reasons or ''}")

    def listing(self, client: Client) -> None:
        latencies: list[float] = []
        records, unanswered = 0, dict[str, str]()
        for _ in range(self.args.list_reps):
            started = time.perf_counter()
            reply = client.call("session.list", timeout=60)
            latencies.append(time.perf_counter() - started)
            records, unanswered = len(reply["records"]), reply.get("unanswered") or {}
        self.doc["list"] = {
            "reps": len(latencies),
            "records": records,
            "p50_ms": ms(latencies, 0.5),
            "p99_ms": ms(latencies, 0.99),
            "unanswered": unanswered,
        }
        log(f"session.list: {records} records, p50 {ms(latencies, 0.5)} ms")

    def probe(self, client: Client, events: Events) -> tuple[float, int]:
        """Prompt one session until its event comes back through the hub: the subscription has
        reached the hub (a SUB's subscription takes a moment). Seconds and prompts it took."""
        nid = next(n for n in self.lab.node_ids if self.records[n])
        rid = self.records[nid][0]
        client.via(f"{nid}/node")
        started, tries = time.perf_counter(), 0
        while time.perf_counter() - started < 20:
            tries += 1
            reply = client.call("session.prompt", {"id": rid, "text": f"probe-{tries}"})
            key = (nid, rid, int(reply["seq"]))
            until = time.monotonic() + 0.5
            while time.monotonic() < until:
                if events.has(key):
                    return time.perf_counter() - started, tries
                time.sleep(0.02)  # polling the reader thread's counts
        raise TimeoutError("no event came through the hub in 20 s")

    def prompts(self, events: Events) -> None:
        latencies: list[float] = []
        accepted: list[tuple[str, str, int]] = []
        refused: Counter[str] = Counter()

        def prompter(nid: str) -> Callable[[], None]:
            def run() -> None:
                with self.lab.client(via=f"{nid}/node", timeout=60) as c:
                    for rid in self.records[nid]:
                        started = time.perf_counter()
                        try:
                            reply = c.call("session.prompt", {"id": rid, "text": f"hello {rid}"})
                        except RoostError as err:
                            refused[err.code] += 1
                            continue
                        latencies.append(time.perf_counter() - started)
                        if reply.get("accepted"):
                            accepted.append((nid, rid, int(reply["seq"])))
                        else:
                            refused["not-accepted"] += 1

            return run

        started = time.perf_counter()
        errors = parallel({n: prompter(n) for n in self.lab.node_ids}, 300)
        took = time.perf_counter() - started
        sent_at = time.monotonic()
        expected = set(accepted)
        while time.monotonic() - sent_at < EVENTS_GRACE_S:
            with events.lock:
                if expected <= set(events.inputs):
                    break
            time.sleep(0.1)  # waiting on the reader thread
        waited = time.monotonic() - sent_at
        with events.lock:
            got = {k: c for k, c in events.inputs.items() if k in expected}
            kinds = dict(events.kinds)
        self.doc["prompt"] = {
            "sent": sum(len(r) for r in self.records.values()),
            "accepted": len(accepted),
            "refused": dict(refused),
            "p50_ms": ms(latencies, 0.5),
            "p99_ms": ms(latencies, 0.99),
            "total_s": round(took, 2),
            "errors": [f"{type(e).__name__}: {e}" for e in errors],
        }
        self.doc["events"] = {
            "expected": len(expected),
            "received": len(got),
            "missing": len(expected) - len(got),
            "duplicated": sum(c - 1 for c in got.values()),
            "waited_s": round(waited, 2),
            "kinds_seen": kinds,
        }
        log(f"events: {len(got)} of {len(expected)} session.input relayed live")

    def restart(self, events: Events) -> None:
        """SIGKILL the hub, start it again, time until every node is linked; then one prompt per
        node whose event must come through the same subscription."""
        lab = self.lab
        pid = lab.hub_pid
        self.doc["hub"]["rss_mib_end"] = round(rss_mib(lab.hub_procs()), 1)
        os.kill(pid, signal.SIGKILL)
        killed = time.perf_counter()
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).wait(10)
        # `hub up` (a CLI, in a thread) and hub.nodes polled from here at once: the first
        # answer is the hub serving again, a moment before `hub up` has printed that it is
        failed: list[BaseException] = []

        def hub_up() -> None:
            try:
                lab.hub_up()
            except BaseException as err:  # raised below
                failed.append(err)

        starting = threading.Thread(target=hub_up, daemon=True)
        starting.start()
        answered_s, all_s, linked_at_answer = self.wait_linked(60, since=killed)
        starting.join(60)
        if failed:
            raise failed[0]
        after_up = all_s - answered_s
        self.doc["restart"] = {
            "hub_answered_s": round(answered_s, 2),
            "linked_at_first_answer": linked_at_answer,
            "all_linked_after_answer_s": round(after_up, 2),
            "all_linked_after_kill_s": round(all_s, 2),
            "heartbeat_s": HEARTBEAT_S,
            "all_linked_after_answer_heartbeats": round(after_up / HEARTBEAT_S, 2),
        }
        log(f"hub restarted: every node linked {after_up:.2f} s after it first answered")
        expected: set[tuple[str, str, int]] = set()
        for nid in lab.node_ids:
            if not self.records[nid]:
                continue
            with lab.client(via=f"{nid}/node") as c:
                rid = self.records[nid][-1]
                reply = c.call("session.prompt", {"id": rid, "text": "after the restart"})
                expected.add((nid, rid, int(reply["seq"])))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with events.lock:
                if expected <= set(events.inputs):
                    break
            time.sleep(0.1)  # waiting on the reader thread
        with events.lock:
            got = len(expected & set(events.inputs))
        self.doc["restart"]["events_after"] = {"expected": len(expected), "received": got}

    def resources(self) -> None:
        procs = self.lab.node_procs()
        pss = 0
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                pss += proc.memory_full_info().pss
        self.sampler.sample()
        self.doc["hub"] = {
            "cpu_s": phases(self.hub_cpu),
            "rss_mib": self.hub_rss,
            "rss_mib_peak": round(self.sampler.hub_rss_peak, 1),
        }
        self.doc["nodes_total"] = {
            "cpu_s": phases(self.node_cpu),
            "processes": len(procs),
            "rss_mib": round(rss_mib(procs), 1),
            "pss_mib": round(pss / MIB, 1),
        }

    def measure(self) -> None:
        lab = self.lab
        self.mark("up")
        self.spawn()
        self.mark("spawn")
        with lab.client() as hub:
            self.listing(hub)
            self.mark("list")
            events = Events(hub.subscribe(*(f"{n}/e/" for n in lab.node_ids)))
            try:
                if any(self.records.values()):
                    took, tries = self.probe(hub, events)
                    self.doc["subscribe_probes"] = tries
                    self.doc["subscribe_s"] = round(took, 2)
                    self.prompts(events)
                self.mark("prompt")
                self.resources()
                self.restart(events)
            finally:
                events.stop()


def table(doc: dict[str, Any]) -> str:
    """The figures as lines of ``measure  value``; a part not measured is left out."""
    cpu = doc.get("machine", {})
    rows: list[tuple[str, Any]] = [
        ("date; machine", f"{doc.get('date')}; {cpu.get('cores')} cores, {cpu.get('cpu')}"),
        (
            "load average before / after (1, 5, 15 min)",
            f"{doc.get('load_before')} / {doc.get('load_after')}",
        ),
        ("nodes", doc.get("nodes")),
        ("sessions spawned (asked)", f"{doc.get('sessions')} ({doc.get('sessions_asked')})"),
    ]
    if spawn := doc.get("spawn"):
        if spawn.get("stopped_early"):
            rows.append(("spawning stopped early", spawn["stopped_early"]))
        rows += [
            (
                "spawn through the hub p50 / p99 / max, ms",
                f"{spawn['p50_ms']} / {spawn['p99_ms']} / {spawn['max_ms']}",
            ),
            (
                f"spawn total, s ({spawn['in_flight']} in flight); spawns/s",
                f"{spawn['total_s']}; {spawn['per_s']}",
            ),
        ]
    if lst := doc.get("list"):
        rows.append(
            (
                f"session.list through the hub, {lst['records']} records, p50 / p99 ms "
                f"({lst['reps']} reps)",
                f"{lst['p50_ms']} / {lst['p99_ms']}",
            )
        )
    if (pr := doc.get("prompt")) and (ev := doc.get("events")):
        rows += [
            (
                "prompt through the hub p50 / p99, ms; total s",
                f"{pr['p50_ms']} / {pr['p99_ms']}; {pr['total_s']}",
            ),
            (
                "session.input events relayed live: received of expected",
                f"{ev['received']} of {ev['expected']} (missing {ev['missing']}, "
                f"duplicated {ev['duplicated']})",
            ),
        ]
    if (hub := doc.get("hub")) and (nodes := doc.get("nodes_total")):
        hub_cpu, node_cpu = hub["cpu_s"], nodes["cpu_s"]
        rows += [
            (
                "hub CPU s: start-up / spawn / list / prompt phase; total",
                " / ".join(str(hub_cpu.get(k)) for k in PHASES) + f"; {hub_cpu['total']}",
            ),
            (
                "hub RSS MiB: after start-up / spawn / list / prompt phase; peak",
                " / ".join(str(hub["rss_mib"].get(k)) for k in PHASES) + f"; {hub['rss_mib_peak']}",
            ),
            (
                "nodes' CPU s, all processes: start-up / spawn / list / prompt phase; total",
                " / ".join(str(node_cpu.get(k)) for k in PHASES) + f"; {node_cpu['total']}",
            ),
            (
                f"nodes' memory MiB, {nodes['processes']} processes: RSS sum / PSS sum",
                f"{nodes['rss_mib']} / {nodes['pss_mib']}",
            ),
        ]
    if rs := doc.get("restart"):
        rows += [
            (
                "hub SIGKILLed -> started again, first answer, s (nodes linked then)",
                f"{rs['hub_answered_s']} ({rs['linked_at_first_answer']})",
            ),
            (
                f"first answer -> every node linked, s (heartbeats of {rs['heartbeat_s']} s)",
                f"{rs['all_linked_after_answer_s']} ({rs['all_linked_after_answer_heartbeats']})",
            ),
            ("SIGKILL -> every node linked, s", rs["all_linked_after_kill_s"]),
        ]
        if after := rs.get("events_after"):
            rows.append(
                (
                    "events relayed after the restart, received of expected",
                    f"{after['received']} of {after['expected']}",
                )
            )
    if mem := doc.get("memory"):
        rows.append(
            (
                "available memory GiB: before / lowest (the lab's peak)",
                f"{mem['before_gib']} / {mem['low_gib']} ({mem['lab_peak_gib']})",
            )
        )
    rows += [
        ("took, s", doc.get("took_s")),
        ("processes left running after the teardown", doc.get("left_running")),
    ]
    if doc.get("error"):
        rows.append(("could not finish", doc["error"]))
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


@contextlib.contextmanager
def interrupted_as_exit() -> Iterator[None]:
    """SIGTERM and SIGHUP end the run like Ctrl-C: through every ``finally``."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--per-node", type=int, default=1, help="spawning clients per node")
    parser.add_argument("--list-reps", type=int, default=20)
    parser.add_argument("--spawn-budget", type=float, default=300.0, help="seconds")
    parser.add_argument("--min-free-gib", type=float, default=3.0, help="stop spawning below")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if not 1 <= args.nodes <= 200 or args.sessions < 0 or args.per_node < 1:
        parser.error("--nodes 1..200, --sessions >= 0, --per-node >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    why = why_not()
    if why:
        print(f"bench_lab: cannot make a lab here: {why}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    root = Path(tempfile.mkdtemp(prefix="rl-"))  # short: ipc paths are bounded
    hosts = Hosts()
    lab = Lab(root, hosts, args.nodes)
    doc: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "load_before": load(),
        "netns_prefix": f"rl-{hosts.tag}-",
    }
    available = psutil.virtual_memory().available
    run: Run | None = None
    try:
        with interrupted_as_exit():
            try:
                log(f"making the lab: a hub, {args.nodes} nodes, a client host in {root}")
                for host in ["hub", *lab.node_ids, "cli"]:
                    hosts.add(host)
                lab.make()
                setns(f"/run/netns/{hosts.names['cli']}")  # the client's host, from here on
                run = Run(lab, args)
                run.wait_linked(60)
                log("every node linked")
                run.measure()
            except KeyboardInterrupt as err:  # Ctrl-C, SIGTERM, SIGHUP: tear down, say so
                doc["error"] = f"interrupted ({err or 'SIGINT'})"
                log(doc["error"])
            except Exception as err:  # a benchmark: say what could not be measured, go on
                doc["error"] = f"{type(err).__name__}: {err}"
                log(f"could not finish: {doc['error']}")
            finally:
                if run is not None:
                    run.sampler.stop()
                    doc.update(run.doc)
                    low = run.sampler.available_low
                    doc["memory"] = {
                        "before_gib": round(available / GIB, 2),
                        "low_gib": round(low / GIB, 2),
                        "lab_peak_gib": round((available - low) / GIB, 2),
                    }
    finally:
        with contextlib.suppress(OSError):
            setns(f"/proc/self/fd/{home}")
        os.close(home)
        killed = lab.kill_all()
        doc["left_running"] = len([p for p in marked(lab.mark) if p.pid != os.getpid()])
        hosts.close()
        shutil.rmtree(root, ignore_errors=True)
        log(f"torn down: {killed} processes killed, namespaces deleted")
    doc["took_s"] = round(time.perf_counter() - started, 1)
    doc["load_after"] = load()
    print(json.dumps(doc, indent=2) if args.json else table(doc))
    return 130 if str(doc.get("error", "")).startswith("interrupted") else 0


if __name__ == "__main__":
    sys.exit(main())
