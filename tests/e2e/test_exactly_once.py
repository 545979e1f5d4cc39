"""A stateful property test of roost's exactly-once promise, against a real node.

Each hypothesis example starts a node of its own (under the test's tmp dir; every process it
starts carries the test mark and is SIGKILLed at the end of the example, pass or fail) with two
pty and two stream echo sessions (one of them with slower turns, so that turns are still running
when the next step comes), and then runs a sequence of steps through the Python client:

- prompt, input, key and turn to any record (right or wrong mode, live, dormant or forgotten),
  each with an operation id, new or repeated (an id of the same or another record and method,
  with the same or another text; an accepted one repeated as a retry or on another record);
- stop, resume, rename, forget and spawn, with new or repeated operation ids;
- faults: the daemon SIGKILLed and `node up` (sometimes with a request on its way), a supervisor
  SIGKILLed, the state store SIGSTOPped for up to 1.5 s with a request on its way, then SIGCONT
  (a client that gives up first leaves its request in doubt until its op id is looked up).

The steps are one hypothesis rule, ``step``, whose action is drawn from a weighted list rather
than a rule per action: hypothesis draws among rules evenly and switches whole rules off for an
example (swarm testing), and an example of real processes costs seconds, so the mix is set here
(input and turns most of the time, a fault now and then) and every example has all of it.

After every step the checks of ``tests/e2e/model.py`` run on the whole event log, every
transcript and every echo agent's own session file (nothing twice, nothing refused or repeated
left a trace, nothing on another record or out of order, the wrong mode refused and never
logged, the log contiguous), and the model's records are compared with the node's (a repeated op
id must not stop, resume, rename or forget anything). At the end of an example the node is let
settle (with deadlines), every operation id is looked up and the final checks run (every
accepted input typed and every accepted turn ended, once, as tests/e2e/model.py says).

Run length: ``ROOST_MODEL_EXAMPLES`` examples (default 6) of ``ROOST_MODEL_STEPS`` steps
(default 30), about a minute alone on two cores and two beside the rest of `make test`; a long
run, for instance
``ROOST_MODEL_EXAMPLES=40 ROOST_MODEL_STEPS=60 .venv/bin/pytest -p no:xdist
tests/e2e/test_exactly_once.py``, raises the test's timeout with them. Examples are derandomized
(the same every run); ``ROOST_MODEL_SEED=N`` draws other ones from seed N, and the seed is
printed. Shrinking is off (each replay costs seconds of real processes);
``ROOST_MODEL_SHRINK=1`` turns it on. A failure prints the steps of the failing example and the
violations found, by kind.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    get_state_machine_test,
    initialize,
    invariant,
    rule,
)

from roost.client.client import Client
from roost.wire.errors import RoostError
from tests.e2e.conftest import Node, alive, sigkill, wait_for
from tests.e2e.model import (
    SAFE_KEYS,
    SENDS,
    TURN,
    Request,
    Violation,
    check,
    collect,
    final_check,
    read_transcript,
    send,
    summary,
    token,
)

EXAMPLES = int(os.environ.get("ROOST_MODEL_EXAMPLES", "6"))
STEPS = int(os.environ.get("ROOST_MODEL_STEPS", "30"))
SEED = os.environ.get("ROOST_MODEL_SEED", "")
SHRINK = os.environ.get("ROOST_MODEL_SHRINK") == "1"
VERBOSE = os.environ.get("ROOST_MODEL_VERBOSE") == "1"
MAX_RECORDS = 6


@dataclass
class Rec:
    """The model's record: what the node must say of it."""

    id: str
    mode: str
    name: str
    state: str = "live"  # live, dormant, failed, forgotten
    generation: int = 1


# Each step's action, weighted by repetition (hypothesis would otherwise switch whole rules off
# in an example, and an example costs seconds of real processes). The first is what the
# simplest example repeats: prompts to one record.
ACTIONS = (
    ["send_right_mode"] * 8
    + ["send_any"] * 3
    + ["repeat_an_accepted_op"] * 4
    + ["stop", "stop", "resume", "resume", "rename", "forget", "spawn"]
    + ["kill_the_daemon", "kill_a_supervisor", "kill_a_supervisor"]
    + ["stall_the_store", "stall_the_store"]
)
HOW = ("new", "new", "new", "repeat")  # a new op id, or one used before
KINDS = ("prompt", "prompt", "input", "key")


@dataclass(frozen=True)
class Step:
    """What one step was drawn with; each action reads the fields it needs."""

    action: str
    index: int  # a record, modulo their number
    how: str
    which: int  # an op id used before, modulo their number
    same: bool  # a repeated op id with its first text
    kind: str  # send_right_mode's, on a pty record
    method: str  # send_any's
    keys: tuple[str, ...]
    hold: float  # stall_the_store's seconds
    flag: bool  # kill_the_daemon: a request on its way; stall: a patient client; ...

    def __repr__(self) -> str:
        used = {
            "send_right_mode": ("index", "how", "which", "same", "kind", "keys"),
            "send_any": ("index", "how", "which", "same", "method", "keys"),
            "repeat_an_accepted_op": ("index", "which", "same", "flag", "keys"),
            "stop": ("index", "how", "which"),
            "resume": ("index", "how", "which", "flag"),
            "rename": ("index", "how", "which"),
            "forget": ("index", "how", "which"),
            "spawn": ("flag",),
            "kill_the_daemon": ("index", "flag"),
            "kill_a_supervisor": ("index",),
            "stall_the_store": ("index", "hold", "flag"),
        }[self.action]
        args = ", ".join(f"{k}={getattr(self, k)!r}" for k in used)
        return f"Step({self.action!r}, {args})"


class World:
    """The example's node, its tmp dir, and the processes to reap (shared by every example)."""

    root: Path | None = None
    nodes: list[Node] = []  # noqa: RUF012 (the class is the holder)


class ExactlyOnce(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        assert World.root is not None
        self.example = len(World.nodes)
        self.node = Node(World.root / f"ex{self.example}")
        World.nodes.append(self.node)
        self.project = World.root / f"ex{self.example}" / "proj"
        self.project.mkdir(parents=True)
        self.failed = True  # until a step completes; teardown checks only after a clean run
        self.node.up()
        self.client: Client = self.node.client()
        self.recs: list[Rec] = []
        self.ledger: list[Request] = []
        self.ops: list[str] = []
        self.n = 0
        self.snapshots: dict[str, str] = {}
        self.violations: list[Violation] = []  # found by a step itself (a change it must not make)
        self.failed = False

    # -- helpers -------------------------------------------------------------------------------

    def _next(self) -> int:
        self.n += 1
        return self.n

    def _op(self, how: str, which: int) -> tuple[str, bool]:
        if how == "repeat" and self.ops:
            return self.ops[which % len(self.ops)], True
        op = f"op{self.example}-{self._next()}"
        self.ops.append(op)
        return op, False

    def _rec(self, index: int) -> Rec:
        return self.recs[index % len(self.recs)]

    def _request(
        self, method: str, rec: Rec | None, how: str, which: int, same: bool = False
    ) -> Request:
        op, repeat = self._op(how, which)
        n = self._next()
        req = Request(
            who=self.example,
            n=n,
            method=method,
            record=rec.id if rec else "",
            op=op,
            live=None if rec is None else rec.state == "live",
            repeat=repeat,
        )
        if method in ("session.prompt", "session.input", TURN):
            earlier = [r.token for r in self.ledger if r.op == op and r.token]
            req.token = earlier[0] if (same and earlier) else token(self.example, n)
        return req

    def _record(self, req: Request) -> Request:
        self.ledger.append(req)
        return req

    def _show(self, rid: str) -> dict[str, Any] | None:
        try:
            rec: dict[str, Any] = self.client.call("session.show", {"id": rid})["record"]
            return rec
        except RoostError as err:
            if err.code == "not-found":
                return None
            raise

    def _spawn(self, mode: str, env: dict[str, str] | None = None) -> None:
        name = f"s{self.example}-{self._next()}"
        body: dict[str, Any] = {"provider": "echo", "name": name, "cwd": str(self.project)}
        if mode == "stream":
            body["mode"] = "stream"
        if env:
            body["env"] = env
        rec = self.client.call("session.spawn", body, op=f"spawn-{name}", timeout=60)["record"]
        self.recs.append(Rec(rec["id"], mode, name, generation=rec["generation"]))

    def _fresh_client(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
        self.client = self.node.client()

    def _node_up(self) -> None:
        self.node.up()
        self._fresh_client()

    # -- the sessions --------------------------------------------------------------------------

    @initialize()
    def sessions(self) -> None:
        self.failed = True
        self._spawn("pty")
        self._spawn("pty")
        self._spawn("stream")
        # a slower one: its turns are still running when the next step comes (busy, stop, kill)
        self._spawn("stream", {"ROOST_ECHO_DELAY_MS": "100"})
        self.failed = False

    # -- the step: one action, drawn with weights -----------------------------------------------

    @rule(
        step=st.builds(
            Step,
            action=st.sampled_from(ACTIONS),
            index=st.integers(0, 63),
            how=st.sampled_from(HOW),
            which=st.integers(0, 1 << 16),
            same=st.booleans(),
            kind=st.sampled_from(KINDS),
            method=st.sampled_from(SENDS),
            keys=st.lists(st.sampled_from(SAFE_KEYS), min_size=1, max_size=3).map(tuple),
            hold=st.floats(0.2, 1.5),
            flag=st.booleans(),
        )
    )
    def step(self, step: Step) -> None:
        self.failed = True
        getattr(self, step.action)(step)
        self.failed = False

    # -- input and turns -----------------------------------------------------------------------

    def _send(self, rec: Rec, method: str, step: Step) -> None:
        req = self._request(method, rec, step.how, step.which, step.same)
        if method == "session.key":
            req.keys = list(step.keys)
        self._record(send(self.client, req))

    def send_right_mode(self, step: Step) -> None:
        """Input to a pty record or a turn to a stream record, as its mode wants."""
        rec = self._rec(step.index)
        self._send(rec, f"session.{step.kind}" if rec.mode == "pty" else TURN, step)

    def send_any(self, step: Step) -> None:
        """Any of the four to any record: the wrong mode half the time."""
        self._send(self._rec(step.index), step.method, step)

    def repeat_an_accepted_op(self, step: Step) -> None:
        """An op id that was carried out (half the time the latest: a turn may still run),
        repeated on its own record (a retry: ``flag``) or on another of the same mode, with the
        same text (``same``) or another."""
        done = [r for r in self.ledger if r.outcome == "accepted" and r.method in SENDS]
        if not done:
            return
        first = done[-1] if step.which % 2 else done[step.which // 2 % len(done)]
        target = next(r for r in self.recs if r.id == first.record)
        if not step.flag:
            alike = [r for r in self.recs if r.mode == target.mode and r is not target]
            target = alike[step.index % len(alike)] if alike else self._rec(step.index)
        method = first.method
        if target.mode != ("stream" if method == TURN else "pty"):
            method = TURN if target.mode == "stream" else "session.prompt"
        req = Request(
            who=self.example,
            n=self._next(),
            method=method,
            record=target.id,
            op=first.op,
            live=target.state == "live",
            repeat=True,
        )
        if method == "session.key":
            req.keys = first.keys or list(step.keys)
        else:
            req.token = first.token if (step.same and first.token) else token(self.example, req.n)
        self._record(send(self.client, req))

    # -- the lifecycle -------------------------------------------------------------------------

    def _lifecycle(self, method: str, rec: Rec, step: Step) -> Request:
        req = self._request(method, rec, step.how, step.which)
        if method == "session.rename":
            req.name = f"n{self.example}-{req.n}"
        before = self._show(rec.id)
        self._record(send(self.client, req, timeout=60))
        after = self._show(rec.id)
        out = req.outcome
        if out == "accepted":
            self._apply(rec, req, after)
        elif before is not None and out in ("duplicate", "refused"):
            self._unchanged(req, rec, before, after)
        else:  # in doubt: whatever the node says now
            self._sync(rec, after)
        return req

    def _apply(self, rec: Rec, req: Request, after: dict[str, Any] | None) -> None:
        want = {
            "session.stop": "dormant",
            "session.resume": "live",
            "session.rename": rec.state,
            "session.forget": "forgotten",
        }[req.method]
        self._sync(rec, after)
        if rec.state != want and not (req.method == "session.resume" and rec.state == "failed"):
            self.violations.append(
                Violation("model-mismatch", f"{req.describe()}: {rec.id} is {rec.state} after it")
            )

    def _sync(self, rec: Rec, now: dict[str, Any] | None) -> None:
        if now is None:
            rec.state = "forgotten"
            return
        rec.state = "live" if now["state"] in ("live", "attention") else now["state"]
        rec.generation, rec.name = now["generation"], now["name"]

    def _unchanged(
        self, req: Request, rec: Rec, before: dict[str, Any], after: dict[str, Any] | None
    ) -> None:
        """A duplicate or a refusal changes nothing: no stop, resume, rename or forget."""
        was_live = before["state"] in ("live", "attention")
        changed = (
            after is None
            or after["name"] != before["name"]
            or after["generation"] != before["generation"]
            or was_live != (after["state"] in ("live", "attention"))
        )
        failed_launch = req.code == "launch-failed" and after is not None
        if changed and not failed_launch:
            now = "forgotten" if after is None else f"{after['state']} {after['name']!r}"
            gen = "" if after is None else f" gen {after['generation']}"
            self.violations.append(
                Violation(
                    "unaccepted-had-effect",
                    f"{req.describe()} changed {rec.id}: {before['state']} {before['name']!r} "
                    f"gen {before['generation']} -> {now}{gen}",
                )
            )
        self._sync(rec, after)

    def stop(self, step: Step) -> None:
        self._lifecycle("session.stop", self._rec(step.index), step)

    def resume(self, step: Step) -> None:
        rec = self._rec(step.index)
        dormant = [r for r in self.recs if r.state in ("dormant", "failed")]
        if dormant and step.flag:  # mostly a record that can be resumed
            rec = dormant[step.index % len(dormant)]
        self._lifecycle("session.resume", rec, step)

    def rename(self, step: Step) -> None:
        self._lifecycle("session.rename", self._rec(step.index), step)

    def forget(self, step: Step) -> None:
        """Forget a record (refused while it is live); its transcript is kept for the checks."""
        rec = self._rec(step.index)
        if rec.state != "forgotten":
            with contextlib.suppress(RoostError):
                self.snapshots[rec.id] = read_transcript(self.client, rec.id)[0]
        self._lifecycle("session.forget", rec, step)
        if rec.state != "forgotten":
            self.snapshots.pop(rec.id, None)

    def spawn(self, step: Step) -> None:
        if sum(r.state != "forgotten" for r in self.recs) < MAX_RECORDS:
            self._spawn("stream" if step.flag else "pty")

    # -- faults --------------------------------------------------------------------------------

    def _in_flight(self, client: Client, rec: Rec, timeout: float) -> threading.Thread:
        """A request of the record's mode, sent from a thread on its own connection."""
        method = TURN if rec.mode == "stream" else "session.prompt"
        req = self._request(method, rec, "new", 0)
        self.ledger.append(req)
        return threading.Thread(target=send, args=(client, req), kwargs={"timeout": timeout})

    def kill_the_daemon(self, step: Step) -> None:
        """SIGKILL the daemon (``flag``: with a request on its way), then `node up`."""
        daemon = self.node.pid()
        sender, client = None, None
        if step.flag:
            client = self.node.client()
            sender = self._in_flight(client, self._rec(step.index), timeout=3.0)
            sender.start()
        try:
            sigkill(daemon)
        finally:
            if sender is not None and client is not None:
                sender.join(30)
                client.close()
        self._node_up()

    def kill_a_supervisor(self, step: Step) -> None:
        """SIGKILL a live record's supervisor: the node makes the record dormant."""
        live = [r for r in self.recs if r.state == "live"]
        if not live:
            return
        rec = live[step.index % len(live)]
        pid = ((self._show(rec.id) or {}).get("active") or {}).get("pid")
        if isinstance(pid, int) and alive(pid):
            sigkill(pid)
            wait_for(
                lambda: (s := self._show(rec.id)) is not None and s["state"] == "dormant",
                15,
                f"{rec.id} dormant after its supervisor's death",
            )
        self._sync(rec, self._show(rec.id))

    def stall_the_store(self, step: Step) -> None:
        """SIGSTOP the state store with a request on its way; SIGCONT after ``hold`` s (far
        inside its heartbeats' 30 s). An impatient client (not ``flag``) times out first: the
        request is then in doubt until its op id is looked up."""
        store = self.client.call("node.status")["actors"]["state"]["pid"]
        client = self.node.client()
        sender = self._in_flight(client, self._rec(step.index), 8.0 if step.flag else 0.5)
        os.kill(store, signal.SIGSTOP)
        try:
            sender.start()
            sender.join(step.hold)  # the fault's length; the request is on its way meanwhile
        finally:
            os.kill(store, signal.SIGCONT)
            sender.join(30)
            client.close()

    # -- the checks ----------------------------------------------------------------------------

    def _model(self) -> list[Violation]:
        """The node's records against the model's."""
        found = []
        listed = {r["id"]: r for r in self.client.call("session.list")["records"]}
        for rec in self.recs:
            now = listed.get(rec.id)
            if rec.state == "forgotten":
                if now is not None:
                    found.append(Violation("model-mismatch", f"{rec.id} forgotten, still listed"))
                continue
            if now is None:
                found.append(Violation("model-mismatch", f"{rec.id} ({rec.state}) is gone"))
                continue
            state = "live" if now["state"] in ("live", "attention") else now["state"]
            if (state, now["name"]) != (rec.state, rec.name):
                found.append(
                    Violation(
                        "model-mismatch",
                        f"{rec.id}: the model has {rec.state} {rec.name!r}, the node "
                        f"{now['state']} {now['name']!r}",
                    )
                )
        return found

    @invariant()
    def nothing_twice_nothing_unaccepted(self) -> None:
        if self.failed or not self.recs:
            return
        self.failed = True
        ev = collect(self.client, self.node.state_dir, snapshots=self.snapshots)
        found = self.violations + check(self.ledger, ev, final=False) + self._model()
        if found:
            raise AssertionError(summary(found))
        self.failed = False

    def teardown(self) -> None:
        try:
            if not self.failed and self.recs:
                found, _ = final_check(
                    self.client, self.node.state_dir, self.ledger, snapshots=self.snapshots
                )
                found = self.violations + found
                if VERBOSE:
                    outcomes = collections.Counter(f"{r.method} {r.outcome}" for r in self.ledger)
                    print(f"example {self.example}: {dict(sorted(outcomes.items()))}")
                    for r in self.ledger:
                        print("  ", r.describe())
                if found:
                    raise AssertionError("at the end: " + summary(found))
        finally:
            with contextlib.suppress(Exception):
                self.client.close()
            self.node.kill_all()


def _settings() -> settings:
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if SHRINK else [])
    return settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        derandomize=not SEED,
        database=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        verbosity=Verbosity.debug if VERBOSE else Verbosity.normal,
    )


@pytest.mark.timeout(90 + EXAMPLES * STEPS * 4)
def test_exactly_once(tmp_path: Path) -> None:
    World.root, World.nodes = tmp_path, []
    run = get_state_machine_test(ExactlyOnce, settings=_settings(), _min_steps=STEPS)
    if SEED:
        print(f"ROOST_MODEL_SEED={SEED}")
        run = hypothesis_seed(int(SEED))(run)
    started = time.monotonic()
    try:
        run()
    finally:
        for node in World.nodes:
            node.kill_all()
        print(f"exactly-once: {len(World.nodes)} examples in {time.monotonic() - started:.0f} s")
