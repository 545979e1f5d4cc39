"""The node, the one committer of input and turns (roost.actors.node.inputs): each request checked
once (``checked``), committed only through its supervisor's open gate of the live generation,
after a bounded wait, with one commit on the path; what the log keeps of a secret (``logged``);
the hand-over in order, repeated until typed, dropped once the record is no longer live
(``follow``); a repeated operation id answered with its first outcome and handed over only to
the first operation's own record; a supervisor of an earlier release still forwarded to
(``legacy``)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from roost.actors.node import commit
from roost.actors.node import inputs as inputs_module
from roost.actors.node.inputs import Inputs, checked, legacy, logged
from roost.actors.node.sessions import Sessions
from roost.actors.state import records as r
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.limits import INPUT_PENDING_MAX
from roost.wire.messages import Active, Mode, RecordState
from tests import kit

WIRE = {"roost": "0.0", "wire": 3}  # a supervisor that commits nothing itself
ACTIVE: Active = {"generation": 3, "instance": "i3", "supervisor": WIRE}
GATE = {"gate": True, "state": "open", "record": "r1", "generation": 3, "instance": "i3"}
BARE = {"gate": False, "record": "r1", "generation": 3, "instance": "i3"}  # says no state


class FakePeer(kit.FakePeer):
    """The state store as the node's commits see it, and the supervisors' hand-overs."""

    def __init__(self) -> None:
        super().__init__()
        self.typing = asyncio.Event()  # hand-overs are answered once set
        self.typing.set()
        self.fail_typing: list[str] = []  # codes the next hand-overs fail with
        self.ops: dict[str, dict[str, Any]] = {}  # op id -> the first operation, as stored
        self.eids: dict[str, int] = {}  # event id -> seq (a repeated append of one: "repeated")
        self.turn_state = "running"  # what a begin answers (a repeat: what became of the turn)
        self.lose = 0  # appends committed whose answers are lost (the caller waits them out)
        self.refuse: list[str] = []  # codes the next appends or begins are refused with at once
        self.store = asyncio.Event()  # commits are answered once set
        self.store.set()

    def first(self, op: str, record: str, method: str, result: dict[str, Any]) -> None:
        """An operation id already used, by ``method`` on ``record``."""
        self.ops[op] = {"id": op, "method": method, "record": record, "state": "terminal"}
        self.ops[op]["result"] = result

    async def answer(
        self, target: str, method: str, body: dict[str, Any], kw: dict[str, Any]
    ) -> Any:
        if method in ("state.events.append", "state.turn.begin"):
            await self.store.wait()
            if self.refuse:
                raise RoostError(self.refuse.pop(0), "refused")
            if method == "state.events.append":
                return await self._append(body, kw)
            return self._begin(body)
        assert target.startswith("session/") and method in ("session.type", "session.run")
        await self.typing.wait()
        if self.fail_typing:
            raise RoostError(self.fail_typing.pop(0), "no")
        return {"typed": True}

    async def _append(self, body: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
        [event] = body["events"]
        op = body.get("op") or {}
        if event["eid"] in self.eids:
            reply: dict[str, Any] = {"seqs": [self.eids[event["eid"]]], "repeated": True}
        elif op.get("id") in self.ops:
            seen = self.ops[op["id"]]
            reply = {"duplicate": True, "op": seen, "seqs": seen["result"].get("seqs", [])}
        else:
            self.eids[event["eid"]] = 100 + len(self.calls)
            reply = {"seqs": [self.eids[event["eid"]]]}
            if op:
                self.first(op["id"], op["record"], op["method"], reply)
        if self.lose:
            self.lose -= 1
            await asyncio.sleep(kw["timeout"])
            raise RoostError("unavailable", "state did not answer in time")
        return reply

    def _begin(self, body: dict[str, Any]) -> dict[str, Any]:
        op = body.get("op") or {}
        if op.get("id") in self.ops:
            seen = self.ops[op["id"]]
            return {"duplicate": True, "op": seen, **seen["result"]}
        result = {"turn": body["turn"]["id"], "seq": 100 + len(self.calls)}
        if op:
            self.first(op["id"], op["record"], op["method"], result)
        return {**result, "state": self.turn_state}

    def commits(self) -> list[dict[str, Any]]:
        return [b for _, m, b, _ in self.calls if m in ("state.events.append", "state.turn.begin")]

    def typed(self) -> list[tuple[int, dict[str, Any] | None]]:
        return [(b["seq"], b.get("data")) for _, m, b, _ in self.calls if m == "session.type"]

    def runs(self) -> list[dict[str, Any]]:
        return [b for _, m, b, _ in self.calls if m == "session.run"]

    def handed_to(self) -> list[str]:
        return [t for t, m, _, _ in self.calls if m in ("session.type", "session.run")]


def record(
    state: RecordState = r.LIVE,
    active: Active | None = None,
    *,
    mode: Mode = "pty",
    rid: str = "r1",
    generation: int = 3,
) -> r.Record:
    return r.Record(rid, "s", "echo", mode, "/w", state=state, generation=generation, active=active)


class FakeSessions:
    def __init__(self) -> None:
        self.record = record(r.LIVE, ACTIVE.copy())

    async def find(self, ref: str) -> r.Record:
        return self.record


def header(method: str = "session.prompt", op: str = "") -> p.Header:
    return p.Header(kind="request", method=method, op=op)


def make(mode: Mode = "pty") -> tuple[Inputs, FakePeer, FakeSessions]:
    peer, sessions = FakePeer(), FakeSessions()
    sessions.record = record(r.LIVE, ACTIVE.copy(), mode=mode)
    return Inputs(peer, cast(Sessions, sessions)), peer, sessions


async def never() -> dict[str, Any]:
    raise AssertionError("not forwarded: the node commits it")


async def accept(
    inputs: Inputs,
    rec: r.Record,
    method: str = "session.prompt",
    body: dict[str, Any] | None = None,
    op: str = "",
    active: Active | None = None,
) -> dict[str, Any]:
    return await inputs.accept(
        rec, active or ACTIVE, header(method, op), {"text": "x"} if body is None else body, never
    )


async def refused(call: Any) -> RoostError:
    with pytest.raises(RoostError) as info:
        await call
    return info.value


async def settle(inputs: Inputs) -> None:
    for _ in range(200):
        if not inputs.status()["handing_over"]:
            return
        await asyncio.sleep(0.01)


async def turns(n: int = 10) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gate that does not open refuses in 0.2 s; retries come at once."""
    monkeypatch.setattr(inputs_module, "HOLD_WAIT_S", 0.2)
    monkeypatch.setattr(inputs_module, "FULL_WAIT_S", 0.2)
    monkeypatch.setattr(inputs_module, "RETRY_S", 0.01)
    monkeypatch.setattr(inputs_module, "BUSY_RETRY_S", 0.01)


# -- the one check --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "method", "body", "data", "size"),
    [
        ("pty", "session.prompt", {"text": "héllo"}, {"input": "prompt", "text": "héllo"}, 6),
        ("pty", "session.input", {"text": ""}, {"input": "input", "text": ""}, 0),
        (
            "pty",
            "session.key",
            {"keys": ["escape", "enter"]},
            {"input": "key", "keys": ["escape", "enter"]},
            16,
        ),
        ("stream", "session.turn", {"text": "go"}, {"input": "turn", "text": "go"}, 2),
    ],
)
def test_a_request_is_checked_into_what_its_event_logs_and_its_size(
    mode: Mode, method: str, body: dict[str, Any], data: dict[str, Any], size: int
) -> None:
    assert checked(record(mode=mode), method, body) == (data, size)


@pytest.mark.parametrize(
    ("mode", "method", "body", "field"),
    [
        ("pty", "session.turn", {"text": "go"}, "mode"),
        ("stream", "session.prompt", {"text": "hi"}, "mode"),
        ("stream", "session.input", {"text": "hi"}, "mode"),
        ("stream", "session.key", {"keys": ["enter"]}, "mode"),
        ("pty", "session.prompt", {}, "text"),
        ("pty", "session.input", {"text": 3}, "text"),
        ("pty", "session.key", {"keys": ["nope"]}, "keys"),
        ("pty", "session.key", {"keys": []}, "keys"),
        ("stream", "session.turn", {"text": None}, "text"),
    ],
)
def test_a_request_that_does_not_fit_its_record_is_refused(
    mode: Mode, method: str, body: dict[str, Any], field: str
) -> None:
    with pytest.raises(RoostError) as info:
        checked(record(mode=mode), method, body)
    assert info.value.code == "bad-request" and info.value.detail["field"] == field


@pytest.mark.parametrize(
    ("active", "forwarded"),
    [
        (ACTIVE, False),
        ({**ACTIVE, "supervisor": {"roost": None, "wire": 4}}, False),
        ({**ACTIVE, "supervisor": {"roost": "0.9", "wire": 2}}, True),
        ({**ACTIVE, "supervisor": {"roost": None, "wire": 1}}, True),
        ({**ACTIVE, "supervisor": {"roost": None, "wire": "3"}}, True),
        ({**ACTIVE, "supervisor": None}, True),
        ({"generation": 3, "instance": "i3"}, True),
    ],
)
def test_a_supervisor_of_an_earlier_release_commits_itself(active: Active, forwarded: bool) -> None:
    assert legacy(active) is forwarded


@pytest.mark.parametrize(
    ("data", "withhold", "kept"),
    [
        (
            {"input": "prompt", "text": "sk-ant-secret"},
            "login",
            {"input": "prompt", "length": 13, "withheld": "login"},
        ),
        (
            {"input": "input", "text": "sk-ant"},
            "api-key",
            {"input": "input", "length": 6, "withheld": "api-key"},
        ),
        ({"input": "prompt", "text": "hello"}, "", {"input": "prompt", "text": "hello"}),
        ({"input": "key", "keys": ["enter"]}, "login", {"input": "key", "keys": ["enter"]}),
    ],
)
def test_text_typed_on_a_credential_screen_is_logged_as_its_length(
    data: dict[str, Any], withhold: str, kept: dict[str, Any]
) -> None:
    assert logged(data, withhold) == kept


def test_input_of_the_wrong_mode_is_refused_before_anything() -> None:
    """Also to a supervisor of an earlier release: nothing forwarded, nothing committed."""

    async def scenario() -> tuple[list[str], FakePeer]:
        inputs, peer, sessions = make("stream")
        inputs.on_gate("session/r1", GATE)
        forwarded: list[str] = []

        async def forward() -> dict[str, Any]:
            forwarded.append("x")
            return {}

        codes = []
        actives: list[Active] = [ACTIVE, {**ACTIVE, "supervisor": {"wire": 2}}]
        for active in actives:
            h = header("session.prompt", op="W")
            err = await refused(inputs.accept(sessions.record, active, h, {"text": "x"}, forward))
            codes.append(err.code)
        assert forwarded == []
        return codes, peer

    codes, peer = asyncio.run(scenario())
    assert codes == ["bad-request", "bad-request"] and peer.calls == []


def test_a_supervisor_of_an_earlier_release_is_forwarded_the_request() -> None:
    async def scenario() -> tuple[dict[str, Any], FakePeer]:
        inputs, peer, sessions = make()

        async def forward() -> dict[str, Any]:
            return {"accepted": True, "seq": 9}

        old: Active = {**ACTIVE, "supervisor": {"roost": "0.9", "wire": 2}}
        reply = await inputs.accept(sessions.record, old, header(), {"text": "hi"}, forward)
        return reply, peer

    reply, peer = asyncio.run(scenario())
    assert reply == {"accepted": True, "seq": 9} and peer.calls == []


# -- committing through an open gate --------------------------------------------------------------


def test_an_open_gate_has_the_node_commit_and_hand_over() -> None:
    async def scenario() -> tuple[Any, FakePeer, Inputs]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        reply = await accept(inputs, sessions.record, body={"text": "hi"}, op="K")
        await settle(inputs)
        return reply, peer, inputs

    reply, peer, inputs = asyncio.run(scenario())
    (_, _, body, _) = peer.calls[0]
    [event] = body["events"]
    assert event["kind"] == "session.input" and event["generation"] == 3
    assert event["data"] == {"input": "prompt", "text": "hi"}
    assert event["eid"].startswith("node:") and ":input:" in event["eid"]
    assert body["op"] == {"id": "K", "method": "session.prompt", "record": "r1"}
    assert reply == {"accepted": True, "seq": 101}
    assert peer.typed() == [(101, {"input": "prompt", "text": "hi"})]
    assert peer.calls[1][0] == "session/r1" and peer.calls[1][3]["session"] == {"generation": 3}
    assert inputs.status() == {
        "gates_open": 1,
        "committed": 1,
        "committing": 0,
        "handing_over": 0,
        "commit_requests": 1,
    }


def test_a_secret_is_logged_as_its_length_and_typed_whole() -> None:
    async def scenario() -> FakePeer:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", {**GATE, "gate": False, "withhold": "api-key"})
        await accept(inputs, sessions.record, body={"text": "sk-ant-secret"})
        await settle(inputs)
        return peer

    peer = asyncio.run(scenario())
    [event] = peer.commits()[0]["events"]
    assert event["data"] == {"input": "prompt", "length": 13, "withheld": "api-key"}
    assert peer.typed() == [(101, {"input": "prompt", "text": "sk-ant-secret"})]


def test_keys_are_committed_by_name() -> None:
    async def scenario() -> FakePeer:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        await accept(inputs, sessions.record, "session.key", {"keys": ["escape", "enter"]})
        await settle(inputs)
        return peer

    assert asyncio.run(scenario()).typed() == [(101, {"input": "key", "keys": ["escape", "enter"]})]


def test_inputs_are_handed_over_in_commit_order() -> None:
    async def scenario() -> FakePeer:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.typing.clear()  # the supervisor answers only later: they queue
        for text in ("one", "two", "three"):
            await accept(inputs, sessions.record, body={"text": text})
        peer.typing.set()
        await settle(inputs)
        return peer

    typed = asyncio.run(scenario()).typed()
    assert [d["text"] for _, d in typed if d] == ["one", "two", "three"]
    assert [s for s, _ in typed] == sorted(s for s, _ in typed)


def test_a_commit_whose_answer_was_lost_is_repeated_and_handed_over_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(commit, "COMMIT_WAIT_S", 0.05)
    monkeypatch.setattr(commit, "COMMIT_RETRY_S", 0.01)

    async def scenario() -> tuple[dict[str, Any], FakePeer]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.lose = 2
        reply = await accept(inputs, sessions.record, body={"text": "hi"}, op="P1")
        await settle(inputs)
        return reply, peer

    reply, peer = asyncio.run(scenario())
    eids = {b["events"][0]["eid"] for b in peer.commits()}
    assert len(peer.commits()) == 3 and len(eids) == 1 and len(peer.eids) == 1
    assert reply == {"accepted": True, "seq": 101}
    assert peer.typed() == [(101, {"input": "prompt", "text": "hi"})]


def test_a_commit_refused_at_once_is_not_committed_nor_handed_over() -> None:
    async def scenario() -> tuple[str, dict[str, Any], FakePeer]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.refuse = ["storage-full"]
        err = await refused(accept(inputs, sessions.record, body={"text": "hi"}, op="P1"))
        again = await accept(inputs, sessions.record, body={"text": "hi"}, op="P1")
        await settle(inputs)
        return err.code, again, peer

    code, again, peer = asyncio.run(scenario())
    assert code == "storage-full" and again == {"accepted": True, "seq": 102}
    assert peer.typed() == [(102, {"input": "prompt", "text": "hi"})]


# -- a repeated operation id ----------------------------------------------------------------------


def test_a_repeated_operation_is_answered_with_its_first_outcome_and_handed_over_by_seq() -> None:
    """The supervisor types it only if it never was (a commit answered too late for anyone to
    hand it over); the repeat's own text is never what is typed."""

    async def scenario() -> tuple[Any, FakePeer]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.first("K", "r1", "session.prompt", {"seqs": [7]})
        reply = await accept(inputs, sessions.record, body={"text": "other"}, op="K")
        await settle(inputs)
        return reply, peer

    reply, peer = asyncio.run(scenario())
    assert reply["duplicate"] is True and reply["accepted"] is True and reply["seq"] == 7
    assert reply["op"]["id"] == "K" and reply["op"]["record"] == "r1"
    assert peer.typed() == [(7, None)] and peer.handed_to() == ["session/r1"]


def test_a_repeated_operation_on_another_record_hands_nothing_over() -> None:
    """Op K was an input of r1; repeated on r2 it answers r1's outcome, and nothing goes to r2's
    supervisor (which would look the seq up in its own log) nor to r1's."""

    async def scenario() -> tuple[Any, FakePeer, Inputs]:
        inputs, peer, _ = make()
        other = record(r.LIVE, ACTIVE.copy(), rid="r2")
        inputs.on_gate("session/r2", {**GATE, "record": "r2"})
        peer.first("K", "r1", "session.prompt", {"seqs": [7]})
        reply = await accept(inputs, other, body={"text": "x"}, op="K")
        await settle(inputs)
        return reply, peer, inputs

    reply, peer, inputs = asyncio.run(scenario())
    assert reply["duplicate"] is True and reply["op"]["record"] == "r1"
    assert peer.handed_to() == [] and inputs.status()["committed"] == 0


def test_a_repeated_turn_operation_on_another_record_runs_nothing() -> None:
    async def scenario() -> tuple[Any, FakePeer, Inputs]:
        inputs, peer, _ = make("stream")
        other = record(r.LIVE, ACTIVE.copy(), rid="r2", mode="stream")
        inputs.on_gate("session/r2", {**GATE, "record": "r2"})
        peer.first("T", "r1", "session.turn", {"turn": "t0", "seq": 7})
        reply = await accept(inputs, other, "session.turn", {"text": "x"}, op="T")
        await settle(inputs)
        return reply, peer, inputs

    reply, peer, inputs = asyncio.run(scenario())
    assert reply["duplicate"] is True and reply["turn"] == "t0" and reply["op"]["record"] == "r1"
    assert peer.handed_to() == []
    assert inputs.status()["gates_open"] == 1  # nothing was begun: r2's gate is open again


def test_a_repeated_turn_operation_hands_its_turn_over_without_its_text() -> None:
    """The supervisor runs it only if it never ran (``TurnRunner.adopt``)."""

    async def scenario() -> tuple[Any, FakePeer, Inputs]:
        inputs, peer, sessions = make("stream")
        inputs.on_gate("session/r1", GATE)
        peer.first("T", "r1", "session.turn", {"turn": "t0", "seq": 7})
        reply = await accept(inputs, sessions.record, "session.turn", {"text": "x"}, op="T")
        await settle(inputs)
        return reply, peer, inputs

    reply, peer, inputs = asyncio.run(scenario())
    assert reply["duplicate"] is True and reply["accepted"] is True and reply["turn"] == "t0"
    assert peer.runs() == [{"turn": "t0"}] and inputs.status()["gates_open"] == 1


def test_an_input_operation_repeated_as_a_turn_runs_nothing() -> None:
    async def scenario() -> FakePeer:
        inputs, peer, _ = make("stream")
        inputs.on_gate("session/r1", GATE)
        peer.first("K", "r1", "session.prompt", {"seqs": [7]})
        rec = record(r.LIVE, ACTIVE.copy(), mode="stream")
        reply = await accept(inputs, rec, "session.turn", {"text": "x"}, op="K")
        assert reply["duplicate"] is True
        await settle(inputs)
        return peer

    assert asyncio.run(scenario()).handed_to() == []


# -- a gate that is not open ----------------------------------------------------------------------


def test_input_waits_for_a_held_gate_and_is_committed_once_it_opens() -> None:
    """The wait ends with the supervisor's gate message, not at a poll."""

    async def scenario() -> tuple[dict[str, Any], float]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", {**GATE, "gate": False, "state": "hold", "why": "catch-up"})
        pending = asyncio.ensure_future(accept(inputs, sessions.record))
        await asyncio.sleep(0.05)
        assert not pending.done() and peer.calls == []
        loop = asyncio.get_running_loop()
        opened = loop.time()
        inputs.on_gate("session/r1", GATE)
        reply = await asyncio.wait_for(pending, 5)
        return reply, loop.time() - opened

    reply, took = asyncio.run(scenario())
    assert reply == {"accepted": True, "seq": 101} and took < 0.5  # not the 1-s poll


@pytest.mark.parametrize(
    ("said", "code", "why"),
    [
        ([], "unavailable", "not-attached"),  # the supervisor said nothing yet
        ([("session/r2", {**GATE, "record": "r1"})], "unavailable", "not-attached"),  # not its own
        ([("session/r1", {**GATE, "generation": 2})], "unavailable", "not-attached"),  # older
        ([("session/r1", {**GATE, "instance": "i2"})], "unavailable", "not-attached"),
        ([("session/r1", {**GATE, "state": "hold", "why": "catch-up"})], "unavailable", "catch-up"),
        ([("session/r1", {**GATE, "state": "hold", "why": "resume"})], "resume-pending", None),
        ([("session/r1", {**GATE, "state": "full"})], "agent-not-reading", None),
        ([("session/r1", BARE)], "unavailable", ""),  # an earlier supervisor's, shut
        ([("session/r1", GATE), ("closed", {})], "unavailable", "not-attached"),  # re-registered
    ],
)
def test_a_gate_that_does_not_open_in_time_refuses_and_nothing_is_committed(
    quick: None, said: list[tuple[str, dict[str, Any]]], code: str, why: str | None
) -> None:
    async def scenario() -> tuple[RoostError, float, FakePeer]:
        inputs, peer, sessions = make()
        for sender, body in said:
            if sender == "closed":
                inputs.closed("r1")
            else:
                inputs.on_gate(sender, body)
        loop = asyncio.get_running_loop()
        started = loop.time()
        err = await refused(accept(inputs, sessions.record))
        return err, loop.time() - started, peer

    err, took, peer = asyncio.run(scenario())
    assert err.code == code and err.detail.get("why") == why and err.detail["record"] == "r1"
    assert 0.2 <= took < 2.0 and peer.calls == []


@pytest.mark.parametrize(
    ("said", "code"),
    [
        ({"state": "busy", "turn": "t1"}, "busy"),
        ({"state": "closed"}, "session-not-live"),
    ],
)
def test_a_busy_or_closed_gate_refuses_at_once(said: dict[str, Any], code: str) -> None:
    async def scenario() -> tuple[RoostError, float, FakePeer]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", {**GATE, "gate": False, **said})
        loop = asyncio.get_running_loop()
        started = loop.time()
        err = await refused(accept(inputs, sessions.record))
        return err, loop.time() - started, peer

    err, took, peer = asyncio.run(scenario())
    assert err.code == code and took < 0.5 and peer.calls == []


def test_a_line_longer_than_a_canonical_terminal_takes_is_refused_before_its_commit() -> None:
    """The gate says the agent's terminal keeps 10 bytes of a line: a longer line (a prompt's or
    an input's, whichever line of the text) is refused and nothing is committed; lines that fit
    are accepted, and keys are not lines."""

    async def scenario() -> tuple[list[RoostError], list[dict[str, Any]]]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", {**GATE, "line_max": 10})
        errors = [
            await refused(accept(inputs, sessions.record, body={"text": "x" * 11})),
            await refused(accept(inputs, sessions.record, body={"text": "short\r\n" + "é" * 6})),
            await refused(accept(inputs, sessions.record, "session.input", {"text": "y" * 11})),
        ]
        assert peer.calls == []
        fits = [
            await accept(inputs, sessions.record, body={"text": "x" * 10}),
            await accept(inputs, sessions.record, body={"text": "0123456789\r0123456789\n"}),
            await accept(inputs, sessions.record, "session.key", {"keys": ["enter"] * 20}),
        ]
        return errors, fits

    errors, fits = asyncio.run(scenario())
    assert [e.code for e in errors] == ["line-too-long"] * 3
    assert [e.detail for e in errors] == [
        {"record": "r1", "limit": 10, "longest": n} for n in (11, 12, 11)
    ]
    assert all(reply["accepted"] for reply in fits)


def test_input_past_what_may_wait_is_refused_until_the_agent_reads(quick: None) -> None:
    async def scenario() -> tuple[str, dict[str, int], dict[str, Any]]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.typing.clear()  # nothing handed over is answered: it all waits
        chunk = "y" * (INPUT_PENDING_MAX // 4)
        for _ in range(4):  # 4 x 64 KiB: what may wait
            await accept(inputs, sessions.record, body={"text": chunk})
        err = await refused(accept(inputs, sessions.record, "session.key", {"keys": ["enter"]}))
        status = inputs.status()
        peer.typing.set()
        await settle(inputs)
        after = await accept(inputs, sessions.record, body={"text": "z"})
        return err.code, status, after

    code, status, after = asyncio.run(scenario())
    assert code == "agent-not-reading"
    assert status["committed"] == 4 and status["handing_over"] == 4
    assert after["accepted"] is True


def test_an_input_waiting_for_room_is_committed_once_what_waits_is_typed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(inputs_module, "RETRY_S", 0.01)

    async def scenario() -> dict[str, Any]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.typing.clear()
        await accept(inputs, sessions.record, body={"text": "y" * INPUT_PENDING_MAX})
        waiting = asyncio.ensure_future(accept(inputs, sessions.record, body={"text": "next"}))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        peer.typing.set()
        return await asyncio.wait_for(waiting, 4)

    assert asyncio.run(scenario())["accepted"] is True


def test_a_stopping_node_accepts_nothing_and_hears_no_gate() -> None:
    async def scenario() -> tuple[str, FakePeer, Inputs]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        await inputs.drain(1.0)
        inputs.on_gate("session/r1", GATE)  # a supervisor's gate opening as the node stops
        err = await refused(accept(inputs, sessions.record))
        return err.code, peer, inputs

    code, peer, inputs = asyncio.run(scenario())
    assert code == "unavailable" and peer.calls == [] and inputs.status()["gates_open"] == 0


# -- handing over ---------------------------------------------------------------------------------


def test_a_hand_over_without_an_answer_is_repeated_while_the_generation_lives(quick: None) -> None:
    async def scenario() -> FakePeer:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.fail_typing = ["timeout", "unreachable"]
        await accept(inputs, sessions.record)
        await settle(inputs)
        return peer

    assert [seq for seq, _ in asyncio.run(scenario()).typed()] == [101, 101, 101]


def test_a_hand_over_ends_with_the_generation(quick: None) -> None:
    async def scenario() -> tuple[FakePeer, Inputs]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.fail_typing = ["unreachable"] * 50
        await accept(inputs, sessions.record)
        sessions.record = record(r.DORMANT, None)  # the session was lost
        await settle(inputs)
        return peer, inputs

    peer, inputs = asyncio.run(scenario())
    assert len(peer.typed()) == 1 and inputs.status()["handing_over"] == 0


def test_a_hand_over_refused_is_dropped_and_the_next_goes_on(quick: None) -> None:
    async def scenario() -> FakePeer:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.typing.clear()
        peer.fail_typing = ["bad-request"]  # this input cannot be typed: never again
        for text in ("one", "two"):
            await accept(inputs, sessions.record, body={"text": text})
        peer.typing.set()
        await settle(inputs)
        return peer

    assert [d["text"] for _, d in asyncio.run(scenario()).typed() if d] == ["one", "two"]


def test_a_turn_handed_over_while_the_one_before_runs_is_retried(quick: None) -> None:
    """``busy`` to ``session.run``: the gate the node saw was older than the supervisor's; the
    turn is begun, so it runs after the one before it, never dropped."""

    async def scenario() -> tuple[FakePeer, Inputs]:
        inputs, peer, sessions = make("stream")
        inputs.on_gate("session/r1", GATE)
        peer.fail_typing = ["busy", "busy"]
        await accept(inputs, sessions.record, "session.turn", {"text": "go"})
        await settle(inputs)
        return peer, inputs

    peer, inputs = asyncio.run(scenario())
    [turn] = {b["turn"] for b in peer.runs()}
    assert peer.runs() == [{"turn": turn, "text": "go"}] * 3
    assert inputs.status()["handing_over"] == 0


@pytest.mark.parametrize(
    "now",
    [
        record(r.DORMANT, None),
        record(r.STOPPING, ACTIVE.copy()),
        record(r.STARTING, None, generation=4),
        record(r.LIVE, {**ACTIVE, "generation": 4, "instance": "i4"}, generation=4),
    ],
    ids=["dormant", "stopping", "starting-again", "another-generation"],
)
def test_hand_overs_are_dropped_at_once_when_the_record_is_no_longer_live(now: r.Record) -> None:
    """Not after the hand-over's own timeout: the supervisor is known to be gone."""

    async def scenario() -> tuple[int, FakePeer, Inputs]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.typing.clear()  # the supervisor will never answer
        for text in ("one", "two"):
            await accept(inputs, sessions.record, body={"text": text})
        await turns()
        before = inputs.status()["handing_over"]
        inputs.follow(now)
        await turns()
        return before, peer, inputs

    before, peer, inputs = asyncio.run(scenario())
    assert before == 2 and inputs.status()["handing_over"] == 0 and len(peer.typed()) == 1


def test_a_record_still_live_in_its_generation_keeps_its_hand_overs_and_gate() -> None:
    async def scenario() -> tuple[int, Inputs]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.typing.clear()
        await accept(inputs, sessions.record)
        inputs.follow(record(r.ATTENTION, ACTIVE.copy()))  # a classification, say
        await turns()
        kept = inputs.status()["handing_over"]
        peer.typing.set()
        await settle(inputs)
        return kept, inputs

    kept, inputs = asyncio.run(scenario())
    assert kept == 1 and inputs.status()["gates_open"] == 1 and inputs.status()["committed"] == 1


@pytest.mark.parametrize(
    "now",
    [record(r.DORMANT, None), record(r.STARTING, None, generation=4)],
    ids=["dormant", "starting-again"],
)
def test_input_waiting_for_the_gate_is_refused_when_the_record_is_no_longer_live(
    now: r.Record,
) -> None:
    async def scenario() -> tuple[RoostError, float, FakePeer]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", {**GATE, "gate": False, "state": "hold", "why": "resume"})
        waiting = asyncio.ensure_future(accept(inputs, sessions.record))
        await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        started = loop.time()
        inputs.follow(now)
        err = await refused(waiting)
        return err, loop.time() - started, peer

    err, took, peer = asyncio.run(scenario())
    assert err.code == "session-not-live" and took < 0.5 and peer.calls == []


def test_a_starting_supervisors_gate_holds_once_its_record_is_live() -> None:
    """The launch's supervisor attaches and says its gate (open) while its record still starts;
    a write of the starting record then (its screen classified, its identity learnt) must not shut
    the gate of the very supervisor the record is starting: it would say nothing again, and every
    input would be refused ``session-not-live`` while the session is live."""

    async def scenario() -> dict[str, Any]:
        inputs, _peer, _ = make()
        active: Active = {**ACTIVE, "generation": 4, "instance": "i4"}
        inputs.follow(record(r.STARTING, None, generation=4))  # the launch begins
        inputs.on_gate("session/r1", {**GATE, "generation": 4, "instance": "i4"})
        inputs.follow(record(r.STARTING, None, generation=4))  # e.g. node.session.classified
        live = record(r.LIVE, active, generation=4)
        inputs.follow(live)
        return await accept(inputs, live, active=active)

    assert asyncio.run(scenario())["accepted"] is True


# -- turns ----------------------------------------------------------------------------------------


def test_a_turn_through_an_open_gate_is_begun_here_and_the_gate_is_busy() -> None:
    async def scenario() -> tuple[Any, RoostError, FakePeer, Inputs]:
        inputs, peer, sessions = make("stream")
        inputs.on_gate("session/r1", GATE)
        first = await accept(inputs, sessions.record, "session.turn", {"text": "go"}, op="T")
        second = await refused(accept(inputs, sessions.record, "session.turn", {"text": "again"}))
        await settle(inputs)
        return first, second, peer, inputs

    first, second, peer, inputs = asyncio.run(scenario())
    (_, method, body, _) = peer.calls[0]
    turn = body["turn"]["id"]
    assert method == "state.turn.begin" and body["turn"]["text"] == "go"
    assert body["turn"]["generation"] == 3 and body["turn"]["record"] == "r1"
    assert body["op"] == {"id": "T", "method": "session.turn", "record": "r1"}
    [event] = body["events"]
    assert event["data"] == {"input": "turn", "text": "go", "turn": turn}
    assert event["eid"].startswith("node:") and f":turn:{turn}:" in event["eid"]
    assert first == {"accepted": True, "turn": turn, "seq": 101}
    # one turn at a time: the second is refused at once, naming the first
    assert second.code == "busy" and second.detail["turn"] == turn
    assert peer.runs() == [{"turn": turn, "text": "go"}]
    assert [m for _, m, _, _ in peer.calls].count("state.turn.begin") == 1
    assert inputs.status()["gates_open"] == 0


def test_a_turn_already_ended_is_not_handed_over_and_the_gate_reopens() -> None:
    async def scenario() -> tuple[Any, FakePeer, Inputs]:
        inputs, peer, sessions = make("stream")
        inputs.on_gate("session/r1", GATE)
        peer.turn_state = "completed"  # committed by an attempt whose reply was lost; ended
        ended = await accept(inputs, sessions.record, "session.turn", {"text": "x"})
        await settle(inputs)
        return ended, peer, inputs

    ended, peer, inputs = asyncio.run(scenario())
    assert ended["accepted"] is True and peer.runs() == [] and inputs.status()["gates_open"] == 1


def test_a_begin_refused_at_once_reopens_the_gate() -> None:
    async def scenario() -> tuple[str, dict[str, Any], FakePeer]:
        inputs, peer, sessions = make("stream")
        inputs.on_gate("session/r1", GATE)
        peer.refuse = ["storage-full"]  # nothing was begun
        err = await refused(accept(inputs, sessions.record, "session.turn", {"text": "a"}))
        again = await accept(inputs, sessions.record, "session.turn", {"text": "b"})
        await settle(inputs)
        return err.code, again, peer

    code, again, peer = asyncio.run(scenario())
    assert code == "storage-full" and again["accepted"] is True
    assert peer.runs() == [{"turn": again["turn"], "text": "b"}]


@pytest.mark.parametrize("outcome", ["refused", "duplicate", "ended"])
def test_what_the_supervisor_says_during_a_begin_is_kept(outcome: str) -> None:
    """The gate put back after a begin that began nothing is the node's own busy gate undone,
    not what the supervisor said meanwhile (here: its session is stopping)."""

    async def scenario() -> tuple[RoostError, FakePeer]:
        inputs, peer, sessions = make("stream")
        inputs.on_gate("session/r1", GATE)
        peer.store.clear()
        if outcome == "refused":
            peer.refuse = ["storage-full"]
        elif outcome == "duplicate":
            peer.first("T", "r1", "session.turn", {"turn": "t0", "seq": 7})
        else:
            peer.turn_state = "completed"
        op = "T" if outcome == "duplicate" else ""
        begin = asyncio.ensure_future(
            accept(inputs, sessions.record, "session.turn", {"text": "a"}, op=op)
        )
        await turns()
        inputs.on_gate("session/r1", {**GATE, "gate": False, "state": "closed"})
        peer.store.set()
        try:
            await begin
        except RoostError as first:
            assert (outcome, first.code) == ("refused", "storage-full")
        err = await refused(accept(inputs, sessions.record, "session.turn", {"text": "b"}))
        return err, peer

    err, peer = asyncio.run(scenario())
    assert err.code == "session-not-live"
    assert [m for _, m, _, _ in peer.calls].count("state.turn.begin") == 1


def test_a_turn_sent_as_the_one_before_ended_waits_for_the_gate_not_busy() -> None:
    """The store published the last turn's end (turn.wait answered) and the next turn comes
    before the supervisor's gate message (it delivers the end first): it waits for that message
    and is begun then, not refused ``busy``."""

    async def scenario() -> FakePeer:
        inputs, peer, sessions = make("stream")
        inputs.on_gate("session/r1", {**GATE, "gate": False, "state": "busy", "turn": "t1"})
        inputs.turn_ended("r1")
        turn = asyncio.ensure_future(accept(inputs, sessions.record, "session.turn"))
        await asyncio.sleep(0.05)
        assert not turn.done()
        inputs.on_gate("session/r1", GATE)  # the supervisor heard its delivery went through
        await asyncio.wait_for(turn, 5)
        await settle(inputs)
        return peer

    assert asyncio.run(scenario()).calls[0][1] == "state.turn.begin"


def test_a_turn_whose_gate_stays_held_after_the_end_is_refused_unavailable(quick: None) -> None:
    async def scenario() -> tuple[RoostError, FakePeer]:
        inputs, peer, sessions = make("stream")
        inputs.on_gate("session/r1", {**GATE, "gate": False, "state": "busy", "turn": "t1"})
        inputs.turn_ended("r1")
        err = await refused(accept(inputs, sessions.record, "session.turn"))
        return err, peer

    err, peer = asyncio.run(scenario())
    assert (err.code, err.detail["why"]) == ("unavailable", "delivery") and peer.calls == []


def test_an_end_seen_changes_only_a_busy_gate() -> None:
    async def scenario() -> dict[str, Any]:
        inputs, _peer, sessions = make("stream")
        inputs.on_gate("session/r1", GATE)  # the supervisor's open came before the end
        inputs.turn_ended("r1")
        inputs.turn_ended("r2")  # no gate known: nothing
        return await accept(inputs, sessions.record, "session.turn")

    assert asyncio.run(scenario())["accepted"] is True


# -- a stopping node ------------------------------------------------------------------------------


def test_a_stopping_node_waits_for_its_hand_overs_and_shuts_every_gate() -> None:
    async def scenario() -> tuple[list[str], int, Inputs, FakePeer]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.typing.clear()  # the supervisor answers its hand-overs only later
        order: list[str] = []
        for text in ("one", "two"):
            await accept(inputs, sessions.record, body={"text": text})
        drained = asyncio.ensure_future(inputs.drain(5.0))
        await turns(20)
        assert not drained.done() and inputs.status()["gates_open"] == 0
        inputs.on_gate("session/r1", GATE)  # a supervisor's gate opening as the node stops
        assert inputs.status()["gates_open"] == 0
        order.append("supervisor answers")
        peer.typing.set()
        left = await drained
        order.append("drained")
        return order, left, inputs, peer

    order, left, inputs, peer = asyncio.run(scenario())
    assert order == ["supervisor answers", "drained"] and left == 0
    assert [seq for seq, _ in peer.typed()] == [101, 102]
    assert inputs.status()["handing_over"] == 0


def test_a_stopping_node_waits_for_a_commit_under_way_and_then_its_hand_over() -> None:
    async def scenario() -> tuple[int, FakePeer]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.store.clear()
        accepted = asyncio.ensure_future(accept(inputs, sessions.record, body={"text": "late"}))
        await turns(5)
        assert inputs.status()["committing"] == 1
        drained = asyncio.ensure_future(inputs.drain(5.0))
        await asyncio.sleep(0.1)
        assert not drained.done()
        peer.store.set()
        await accepted
        return await drained, peer

    left, peer = asyncio.run(scenario())
    assert left == 0 and [seq for seq, _ in peer.typed()] == [101]


def test_a_stopping_node_stops_waiting_for_a_supervisor_that_does_not_answer() -> None:
    async def scenario() -> tuple[int, float]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.typing.clear()  # never answers
        await accept(inputs, sessions.record)
        loop = asyncio.get_running_loop()
        started = loop.time()
        left = await inputs.drain(0.3)
        took = loop.time() - started
        for task in list(inputs._delivering.values()):
            task.cancel()
        return left, took

    left, took = asyncio.run(scenario())
    assert left == 1 and 0.3 <= took < 2.0
