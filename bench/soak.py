"""`make soak MINUTES=N`: roost's exactly-once promise under load and faults, for N minutes.

A node of its own in a temporary directory, 10 echo sessions (half pty, half stream; some of
the stream ones with slower turns), and several client processes sending prompts, raw input,
keys and turns with operation ids: a request answered ``busy``, ``timeout`` or ``unavailable``
is repeated with the same op id (sometimes on another session of the same mode), 10 % of the
accepted ones are repeated on purpose (the same or another session and text), and now and then
one goes to a session of the wrong mode. Meanwhile, at random moments, one of seven faults: a
client SIGKILLed mid-request (a new one takes its place), the daemon SIGKILLed and `node up`,
a supervisor SIGKILLed, the state store SIGKILLed (the node restarts it) or SIGSTOPped for up
to 3 s, `node stop` and `node up`, a session stopped; dormant sessions are resumed.

At the end the clients stop, the node is let settle, and the checks the property test runs
(tests/e2e/model.py) judge every request every client made against the event log, the
transcripts and the echo agents' own files. One verdict line is printed, e.g.
``soak: PASS 30 min, 10 sessions, 41,203 accepted, 0 lost, 0 duplicated, 0 unaccepted, faults:
78 of 7 kinds``, the violations (if any) before it on stderr; the exit status is 0 for PASS, 1
otherwise. Every process it starts carries a marker and is killed at the end, pass or fail; the
temporary directory is removed unless the run failed (its path is printed then) or ``--keep``.

    .venv/bin/python bench/soak.py --minutes 3 [--sessions 10] [--clients 4] [--rate 8] [--seed N]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import BenchNode, kill_marked, wait_for

from roost.client.client import Client
from roost.wire.errors import RoostError
from tests.e2e.model import (
    SAFE_KEYS,
    SENDS,
    TURN,
    Checker,
    Request,
    Violation,
    final_check,
    send,
    summary,
    token,
)

FAULTS = {  # kind -> weight
    "client-kill": 3,
    "daemon-kill": 2,
    "supervisor-kill": 3,
    "store-kill": 2,
    "store-stall": 3,
    "node-restart": 1,
    "session-stop": 2,
}
LOST = {
    "accepted-never-typed",
    "accepted-not-logged",
    "agent-line-missing",
    "turn-never-ended",
    "completed-turn-not-run",
    "op-not-stored",
}
DUPLICATED = {
    "logged-twice",
    "typed-twice",
    "turn-ran-twice",
    "turn-event-twice",
    "turn-ended-twice",
    "op-ran-twice",
}
UNACCEPTED = {
    "unaccepted-logged",
    "typed-not-accepted",
    "ran-not-accepted",
    "typed-on-other-record",
    "ran-on-other-record",
    "logged-on-other-record",
    "turn-event-on-other-record",
    "turn-events-unknown-turn",
    "wrong-mode-logged",
    "wrong-mode-accepted",
    "agent-line-unexpected",
}
RETRIED = frozenset({"busy", "timeout", "unavailable", "unreachable", "not-initialized"})


def note(text: str) -> None:
    print(f"soak: {text}", file=sys.stderr, flush=True)


# -- a client process ----------------------------------------------------------------------------


class Connection:
    """A client that connects again after the node went away (a new daemon, a new token)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.client: Client | None = None

    def get(self) -> Client | None:
        if self.client is None:
            with contextlib.suppress(RoostError, OSError, ValueError):
                self.client = Client.for_state_dir(self.state_dir, timeout=5.0)
        return self.client

    def reset(self) -> None:
        if self.client is not None:
            self.client.close()
        self.client = None


class Sender:
    """One client process: its requests, each written to its ledger before it is sent (so a
    client killed mid-request leaves it there, unanswered: in doubt) and again once answered."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.who = int(args.client)
        self.rng = random.Random(args.seed)
        self.records: list[dict[str, str]] = json.loads(Path(args.records).read_text())
        self.conn = Connection(Path(args.state_dir))
        self.ledger = open(args.ledger, "a", buffering=1)  # noqa: SIM115 (the process's life)
        self.until, self.rate = float(args.until), float(args.rate)
        self.n = 0

    def run(self) -> None:
        while time.time() < self.until:
            self.one()
            time.sleep(self.rng.expovariate(self.rate))  # pacing, not synchronisation

    def _record(self, mode: str, other: str = "") -> dict[str, str]:
        alike = [r for r in self.records if r["mode"] == mode and r["id"] != other]
        return self.rng.choice(alike or self.records)

    def _method(self, mode: str) -> str:
        if self.rng.random() < 0.02:  # the wrong mode, now and then
            mode = "stream" if mode == "pty" else "pty"
        if mode == "stream":
            return TURN
        return self.rng.choice(["session.prompt"] * 3 + ["session.input", "session.key"])

    def _request(
        self, method: str, record: str, op: str, tok: str = "", *, repeat: bool = False
    ) -> Request:
        self.n += 1
        req = Request(who=self.who, n=self.n, method=method, record=record, op=op, repeat=repeat)
        if method == "session.key":
            req.keys = [self.rng.choice(SAFE_KEYS) for _ in range(self.rng.randint(1, 3))]
        else:
            req.token = tok or token(self.who, self.n)
        return req

    def _send(self, req: Request) -> Request | None:
        client = self.conn.get()
        if client is None:
            return None  # no node to send to: nothing was sent
        req.error = {"code": "unanswered", "detail": {}}
        self.ledger.write(req.to_json() + "\n")
        req.error = None
        send(client, req, timeout=5.0)
        self.ledger.write(req.to_json() + "\n")
        if req.code in ("not-initialized", "timeout", "unreachable"):
            self.conn.reset()
        return req

    def one(self) -> None:
        rec = self.rng.choice(self.records)
        method = self._method(rec["mode"])
        first = self._request(method, rec["id"], f"c{self.who}-{self.n + 1}")
        req = self._send(first)
        tries = 0
        while req is not None and req.code in RETRIED and tries < 3:  # the same op id again
            tries += 1
            target = rec["id"]
            if self.rng.random() < 0.3:  # sometimes on another session of the same mode
                target = self._record(rec["mode"], rec["id"])["id"]
            same = first.token if self.rng.random() < 0.5 else ""
            req = self._send(self._request(method, target, first.op, same, repeat=True))
        if req is not None and req.outcome == "accepted" and self.rng.random() < 0.1:
            target = rec["id"] if self.rng.random() < 0.5 else self._record(rec["mode"])["id"]
            same = req.token if self.rng.random() < 0.5 else ""
            self._send(self._request(method, target, req.op, same, repeat=True))


def client_main(args: argparse.Namespace) -> int:
    Sender(args).run()
    return 0


# -- the run -------------------------------------------------------------------------------------


class Soak:
    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args, self.root = args, root
        self.rng = random.Random(args.seed)
        self.node = BenchNode(root, "node")
        self.deadline = time.time() + args.minutes * 60
        self.records: list[dict[str, str]] = []
        self.clients: dict[int, subprocess.Popen[bytes]] = {}
        self.next_who = 1
        self.faults: collections.Counter[str] = collections.Counter()
        self.ledger: list[Request] = []  # the soak's own stops and resumes (who 0)
        self.n = 0
        self._client: Client | None = None

    # -- the node and its sessions

    def client(self) -> Client:
        if self._client is None:
            self._client = wait_for(self._connect, 30, "a client connection to the node")
        return self._client

    def _connect(self) -> Client | None:
        with contextlib.suppress(RoostError, OSError, ValueError):
            return Client.for_state_dir(self.node.state_dir, timeout=15.0)
        return None

    def reconnect(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None

    def call(self, method: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        try:
            return self.client().call(method, body, **kw)
        except RoostError as err:
            if err.code in RETRIED:
                self.reconnect()
            raise

    def start(self) -> None:
        self.node.up()
        for i in range(self.args.sessions):
            mode = "pty" if i % 2 == 0 else "stream"
            extra: dict[str, Any] = {}
            if mode == "stream" and i % 4 == 3:  # slower turns: running when the next comes
                extra["env"] = {"ROOST_ECHO_DELAY_MS": "50"}
            body = self.node.spawn_body(f"s{i}", mode, **extra)
            rec = self.call("session.spawn", body, timeout=60)["record"]
            self.records.append({"id": rec["id"], "mode": mode})
        (self.root / "records.json").write_text(json.dumps(self.records))

    def start_client(self) -> None:
        who, self.next_who = self.next_who, self.next_who + 1
        self.clients[who] = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--client",
                str(who),
                "--state-dir",
                str(self.node.state_dir),
                "--records",
                str(self.root / "records.json"),
                "--until",
                str(self.deadline),
                "--ledger",
                str(self.root / f"ledger-{who}.jsonl"),
                "--seed",
                str(self.rng.randrange(1 << 30)),
                "--rate",
                str(self.args.rate),
            ],
            env=self.node.env,
            stdin=subprocess.DEVNULL,
        )

    def lifecycle(self, method: str, record: str) -> Request:
        self.n += 1
        req = Request(who=0, n=self.n, method=method, record=record, op=f"soak-{self.n}")
        self.ledger.append(send(self.client(), req, timeout=60))
        if req.code in RETRIED:
            self.reconnect()
        return req

    def resume_dormant(self) -> None:
        """Keep the sessions coming back: every dormant one is resumed."""
        with contextlib.suppress(RoostError):
            for rec in self.call("session.list", {})["records"]:
                if rec["state"] in ("dormant", "failed"):
                    self.lifecycle("session.resume", rec["id"])

    # -- faults

    def fault(self, kind: str) -> None:
        status = self.call("node.status", {})
        actors = status["actors"]
        if kind == "client-kill":
            who = self.rng.choice(sorted(self.clients))
            proc = self.clients.pop(who)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            self.start_client()
        elif kind == "daemon-kill":
            pid = int(status["pid"])
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: not _alive(pid), 10, "the daemon to die")
            self.reconnect()
            self.node.up()
        elif kind == "supervisor-kill":
            sessions = [a["pid"] for name, a in actors.items() if name.startswith("session/")]
            if not sessions:
                return
            pid = self.rng.choice(sessions)
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: not _alive(pid), 10, "the supervisor to die")
        elif kind == "store-kill":
            pid = int(actors["state"]["pid"])
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: self._store_back(pid), 30, "the state store restarted")
        elif kind == "store-stall":
            pid = int(actors["state"]["pid"])
            os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(self.rng.uniform(0.5, 3.0))  # the fault's length
            finally:
                os.kill(pid, signal.SIGCONT)
        elif kind == "node-restart":
            pid = int(status["pid"])
            self.reconnect()
            wait_for(self._stopped, 30, "node stop (busy while input is being accepted)")
            wait_for(lambda: not _alive(pid), 30, "the node to stop")
            self.node.up()
        elif kind == "session-stop":
            live = [r for r in self.records if f"session/{r['id']}" in actors]
            if live:
                self.lifecycle("session.stop", self.rng.choice(live)["id"])
        self.faults[kind] += 1

    def _stopped(self) -> bool:
        try:
            self.node.cli("node", "stop", timeout=60)
        except RuntimeError as err:
            if "'busy'" in str(err):
                return False
            raise
        return True

    def _store_back(self, old: int) -> bool:
        with contextlib.suppress(RoostError):
            state = self.call("node.status", {}, timeout=5)["actors"]["state"]
            return state.get("pid") not in (None, old) and state.get("registered") is True
        return False

    def run(self) -> None:
        self.start()
        for _ in range(self.args.clients):
            self.start_client()
        kinds, weights = list(FAULTS), list(FAULTS.values())
        next_fault = time.time() + self.rng.uniform(2, 6)
        while time.time() < self.deadline - 2:
            for who, proc in list(self.clients.items()):
                if proc.poll() is not None:  # a client that died by itself: its ledger stands
                    note(f"client {who} exited with {proc.returncode}")
                    del self.clients[who]
                    self.start_client()
            if time.time() >= next_fault:
                kind = self.rng.choices(kinds, weights)[0]
                try:
                    self.fault(kind)
                except (RoostError, RuntimeError) as err:
                    note(f"fault {kind} went wrong: {err}")
                next_fault = time.time() + self.rng.uniform(2, 6)
            self.resume_dormant()
            time.sleep(0.5)  # the fault loop's pace
        for proc in self.clients.values():  # they stop at the deadline by themselves
            try:
                proc.wait(max(10.0, self.deadline - time.time() + 10))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def ledgers(self) -> list[Request]:
        last: dict[tuple[int, int], Request] = {}
        for path in sorted(self.root.glob("ledger-*.jsonl")):
            for line in path.read_text().splitlines():
                with contextlib.suppress(ValueError, TypeError):
                    req = Request.from_json(line)
                    last[(req.who, req.n)] = req  # answered, or left unanswered
        return [*last.values(), *self.ledger]

    def judge(self) -> tuple[list[Violation], int]:
        ledger = self.ledgers()
        by_op: dict[str, list[Request]] = collections.defaultdict(list)
        for req in ledger:
            by_op[req.op].append(req)
        looked = {op for op, reqs in by_op.items() if len(reqs) > 1 or reqs[0].outcome == "doubt"}
        rest = sorted(set(by_op) - looked)
        looked |= set(self.rng.sample(rest, min(300, len(rest))))
        found, ev = final_check(
            self.client(), self.node.state_dir, ledger, timeout=90, lookup_ops=looked, log=note
        )
        checker = Checker(ledger, ev, final=True)
        checker.resolve()
        accepted = sum(
            1 for r in ledger if r.method in SENDS and checker.resolved[id(r)] == "accepted"
        )
        return found, accepted


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rate", type=float, default=8.0, help="requests a second per client")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    # a client process (started by the soak itself)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--state-dir", help=argparse.SUPPRESS)
    parser.add_argument("--records", help=argparse.SUPPRESS)
    parser.add_argument("--until", help=argparse.SUPPRESS)
    parser.add_argument("--ledger", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        return client_main(args)
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    note(
        f"seed {args.seed}, {args.minutes:g} min, {args.sessions} sessions, {args.clients} clients"
    )
    root = Path(tempfile.mkdtemp(prefix="roost-soak-"))
    soak = Soak(args, root)
    started = time.monotonic()
    passed = False
    try:
        soak.run()
        found, accepted = soak.judge()
        kinds = collections.Counter(v.kind for v in found)
        lost = sum(n for k, n in kinds.items() if k in LOST)
        duplicated = sum(n for k, n in kinds.items() if k in DUPLICATED)
        unaccepted = sum(n for k, n in kinds.items() if k in UNACCEPTED)
        other = len(found) - lost - duplicated - unaccepted
        passed = not found
        if found:
            print(summary(found, 60), file=sys.stderr)
        minutes = (time.monotonic() - started) / 60
        print(
            f"soak: {'PASS' if passed else 'FAIL'} {minutes:.1f} min, {len(soak.records)} "
            f"sessions, {accepted:,} accepted, {lost} lost, {duplicated} duplicated, "
            f"{unaccepted} unaccepted"
            + (f", {other} other violations" if other else "")
            + f", faults: {sum(soak.faults.values())} of {len(soak.faults)} kinds "
            f"({', '.join(f'{k} {n}' for k, n in sorted(soak.faults.items()))}), seed {args.seed}",
            flush=True,
        )
    except Exception as err:
        print(f"soak: FAIL: {type(err).__name__}: {err}", flush=True)
        raise
    finally:
        for proc in soak.clients.values():
            with contextlib.suppress(OSError):
                proc.kill()
        with contextlib.suppress(Exception):
            soak.reconnect()
        soak.node.stop()
        kill_marked(soak.node.mark)
        if passed and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            note(f"kept {root}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
