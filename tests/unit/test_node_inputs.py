"""The node's side of input it commits itself (roost.actors.node.inputs): only through an open
gate of the live generation, one commit on the path, handed over in order and repeated until
typed, and a forwarded input never overtaking one committed here."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from roost.actors.node import inputs as inputs_module
from roost.actors.node.inputs import DIRECT_MAX, Inputs
from roost.actors.state import records as r
from roost.broker import protocol as p
from roost.broker.errors import RoostError

ACTIVE = {"generation": 3, "instance": "i3"}
GATE = {"gate": True, "record": "r1", "generation": 3, "instance": "i3"}


class FakePeer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = []
        self.typing = asyncio.Event()  # session.type answers once set
        self.typing.set()
        self.fail_typing: list[str] = []  # codes the next hand-overs fail with
        self.ops: set[str] = set()
        self.turn_state = "running"  # what a begin answers (a repeat: what became of it)

    async def call(self, target: str, method: str, body: dict[str, Any], **kw: Any) -> Any:
        self.calls.append((target, method, body, kw))
        if method == "state.events.append":
            op = (body.get("op") or {}).get("id")
            if op in self.ops:
                return {
                    "duplicate": True,
                    "op": {"id": op, "method": "session.prompt"},
                    "seqs": [7],
                }
            if op:
                self.ops.add(op)
            return {"seqs": [100 + len(self.calls)]}
        if method == "state.turn.begin":
            op = (body.get("op") or {}).get("id")
            if op in self.ops:
                return {"duplicate": True, "op": {"id": op, "method": "session.turn"}, "turn": "t0"}
            if op:
                self.ops.add(op)
            return {"turn": body["turn"], "seq": 100 + len(self.calls), "state": self.turn_state}
        assert target == "session/r1" and method in ("session.type", "session.run")
        await self.typing.wait()
        if self.fail_typing:
            raise RoostError(self.fail_typing.pop(0), "no")
        return {"typed": True}

    def typed(self) -> list[tuple[int, dict[str, Any] | None]]:
        return [(b["seq"], b.get("data")) for _, m, b, _ in self.calls if m == "session.type"]

    def runs(self) -> list[dict[str, Any]]:
        return [b for _, m, b, _ in self.calls if m == "session.run"]


def record(state: str, active: dict[str, Any] | None) -> r.Record:
    return r.Record("r1", "s", "echo", "pty", "/w", state=state, generation=3, active=active)


class FakeSessions:
    def __init__(self) -> None:
        self.record = record(r.LIVE, dict(ACTIVE))

    async def find(self, ref: str) -> r.Record:
        return self.record


def header(method: str = "session.prompt", op: str = "") -> p.Header:
    return p.Header(kind="request", method=method, op=op)


def make() -> tuple[Inputs, FakePeer, FakeSessions]:
    peer, sessions = FakePeer(), FakeSessions()
    return Inputs(peer, sessions), peer, sessions  # type: ignore[arg-type]


async def settle(inputs: Inputs) -> None:
    for _ in range(200):
        if not inputs.status()["handing_over"]:
            return
        await asyncio.sleep(0.01)


def test_an_open_gate_has_the_node_commit_and_hand_over() -> None:
    async def scenario() -> tuple[Any, FakePeer, Inputs]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        forwarded: list[str] = []

        async def forward() -> dict[str, Any]:
            forwarded.append("x")
            return {}

        reply = await inputs.accept(
            sessions.record, ACTIVE, header(op="K"), {"text": "hi"}, forward
        )
        await settle(inputs)
        assert forwarded == []
        return reply, peer, inputs

    reply, peer, inputs = asyncio.run(scenario())
    (_, _, body, _) = peer.calls[0]
    [event] = body["events"]
    assert event["kind"] == "session.input" and event["generation"] == 3
    assert event["data"] == {"input": "prompt", "text": "hi"}
    assert event["eid"].startswith("node:") and body["op"]["id"] == "K"
    assert reply == {"accepted": True, "seq": 101}
    assert peer.typed() == [(101, {"input": "prompt", "text": "hi"})]
    assert peer.calls[1][3]["session"] == {"generation": 3}
    assert inputs.status() == {
        "gates_open": 1,
        "committed": 1,
        "committing": 0,
        "handing_over": 0,
        "commit_requests": 1,
    }


def test_a_shut_gate_or_another_generation_forwards() -> None:
    async def scenario() -> list[str]:
        inputs, _peer, sessions = make()
        got: list[str] = []

        async def forward() -> dict[str, Any]:
            got.append("forwarded")
            return {"accepted": True}

        rec = sessions.record
        await inputs.accept(rec, ACTIVE, header(), {"text": "a"}, forward)  # never opened
        inputs.on_gate("session/r2", GATE)  # another record's supervisor cannot open it
        await inputs.accept(rec, ACTIVE, header(), {"text": "b"}, forward)
        inputs.on_gate("session/r1", {**GATE, "generation": 2})  # an older supervisor
        await inputs.accept(rec, ACTIVE, header(), {"text": "c"}, forward)
        inputs.on_gate("session/r1", GATE)
        await inputs.accept(rec, ACTIVE, header(), {"text": "x" * (DIRECT_MAX + 1)}, forward)
        inputs.on_gate("session/r1", {**GATE, "gate": False})
        await inputs.accept(rec, ACTIVE, header(), {"text": "d"}, forward)
        inputs.on_gate("session/r1", GATE)
        inputs.closed("r1")  # the supervisor re-attached
        await inputs.accept(rec, ACTIVE, header(), {"text": "e"}, forward)
        return got

    assert asyncio.run(scenario()) == ["forwarded"] * 6


def test_a_repeated_operation_is_answered_with_its_first_outcome_and_handed_over_by_seq() -> None:
    """The supervisor types it only if it never was (a commit answered too late for anyone to
    hand it over); the repeat's own text is never what is typed."""

    async def scenario() -> tuple[Any, FakePeer]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.ops.add("K")

        async def forward() -> dict[str, Any]:
            raise AssertionError("not forwarded")

        reply = await inputs.accept(sessions.record, ACTIVE, header(op="K"), {"text": "x"}, forward)
        await settle(inputs)
        return reply, peer

    reply, peer = asyncio.run(scenario())
    assert reply["duplicate"] is True and reply["seq"] == 7 and peer.typed() == [(7, None)]


def test_keys_are_committed_by_name() -> None:
    async def scenario() -> FakePeer:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)

        async def forward() -> dict[str, Any]:
            raise AssertionError("not forwarded")

        body = {"keys": ["escape", "enter"]}
        await inputs.accept(sessions.record, ACTIVE, header("session.key"), body, forward)
        await settle(inputs)
        return peer

    assert asyncio.run(scenario()).typed() == [(101, {"input": "key", "keys": ["escape", "enter"]})]


def test_a_hand_over_without_an_answer_is_repeated_while_the_generation_lives() -> None:
    async def scenario() -> FakePeer:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.fail_typing = ["timeout", "unreachable"]

        async def forward() -> dict[str, Any]:
            raise AssertionError("not forwarded")

        await inputs.accept(sessions.record, ACTIVE, header(), {"text": "x"}, forward)
        await settle(inputs)
        return peer

    assert [seq for seq, _ in asyncio.run(scenario()).typed()] == [101, 101, 101]


def test_a_hand_over_ends_with_the_generation() -> None:
    async def scenario() -> tuple[FakePeer, Inputs]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.fail_typing = ["unreachable"] * 50

        async def forward() -> dict[str, Any]:
            raise AssertionError("not forwarded")

        await inputs.accept(sessions.record, ACTIVE, header(), {"text": "x"}, forward)
        sessions.record = record(r.DORMANT, None)  # the session was lost
        await settle(inputs)
        return peer, inputs

    peer, inputs = asyncio.run(scenario())
    assert len(peer.typed()) == 1 and inputs.status()["handing_over"] == 0


def test_a_forwarded_input_waits_for_the_hand_overs_before_it() -> None:
    async def scenario() -> list[str]:
        inputs, peer, sessions = make()
        order: list[str] = []
        inputs.on_gate("session/r1", GATE)
        peer.typing.clear()  # the supervisor is slow to answer its hand-over

        async def never() -> dict[str, Any]:
            raise AssertionError("not forwarded")

        await inputs.accept(sessions.record, ACTIVE, header(), {"text": "first"}, never)
        inputs.on_gate("session/r1", {**GATE, "gate": False})

        async def forward() -> dict[str, Any]:
            order.append("second forwarded")
            return {}

        second = asyncio.ensure_future(
            inputs.accept(sessions.record, ACTIVE, header(), {"text": "second"}, forward)
        )
        for _ in range(20):
            await asyncio.sleep(0)
        assert order == []
        order.append("first typed")
        peer.typing.set()
        await second
        return order

    assert asyncio.run(scenario()) == ["first typed", "second forwarded"]


def test_input_past_what_may_wait_goes_to_the_supervisor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs_module, "IDLE_WAIT_S", 0.01)

    async def scenario() -> tuple[int, dict[str, int]]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.typing.clear()  # nothing handed over is answered: it all waits
        forwarded = 0

        async def forward() -> dict[str, Any]:
            nonlocal forwarded
            forwarded += 1
            return {}

        for _ in range(5):  # 5 x 60 KiB: past 256 KiB waiting, the node stops committing
            text = "y" * (60 << 10)
            await inputs.accept(sessions.record, ACTIVE, header(), {"text": text}, forward)
        status = inputs.status()
        peer.typing.set()
        await settle(inputs)
        return forwarded, status

    forwarded, status = asyncio.run(scenario())
    assert forwarded == 1 and status["committed"] == 4 and status["handing_over"] == 4


def test_a_turn_through_an_open_gate_is_begun_here_and_shuts_the_gate() -> None:
    async def scenario() -> tuple[Any, Any, FakePeer, Inputs]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        forwarded: list[str] = []

        async def forward() -> dict[str, Any]:
            forwarded.append("second")
            return {"accepted": False}

        turn = header("session.turn", op="T")
        first = await inputs.accept(sessions.record, ACTIVE, turn, {"text": "go"}, forward)
        second = await inputs.accept(
            sessions.record, ACTIVE, header("session.turn"), {"text": "again"}, forward
        )
        await settle(inputs)
        assert forwarded == ["second"]  # one turn at a time: the supervisor says busy
        return first, second, peer, inputs

    first, second, peer, inputs = asyncio.run(scenario())
    assert second == {"accepted": False}  # what the supervisor answered
    (_, method, body, _) = peer.calls[0]
    assert method == "state.turn.begin" and body["turn"]["text"] == "go"
    assert body["turn"]["generation"] == 3 and body["op"] == {
        "id": "T",
        "method": "session.turn",
        "record": "r1",
    }
    [event] = body["events"]
    assert event["eid"] == f"i3:turn:{body['turn']['id']}"
    assert first == {"accepted": True, "turn": body["turn"]["id"], "seq": 101}
    assert peer.runs() == [{"turn": body["turn"]["id"], "text": "go"}]
    assert inputs.status()["gates_open"] == 0


def test_a_repeated_turn_operation_or_a_turn_already_ended_is_not_handed_over() -> None:
    async def scenario() -> tuple[Any, Any, FakePeer]:
        inputs, peer, sessions = make()

        async def forward() -> dict[str, Any]:
            raise AssertionError("not forwarded")

        peer.ops.add("T")
        inputs.on_gate("session/r1", GATE)
        dup = await inputs.accept(
            sessions.record, ACTIVE, header("session.turn", op="T"), {"text": "x"}, forward
        )
        peer.turn_state = "completed"
        inputs.on_gate("session/r1", GATE)
        ended = await inputs.accept(
            sessions.record, ACTIVE, header("session.turn"), {"text": "x"}, forward
        )
        await settle(inputs)
        return dup, ended, peer

    dup, ended, peer = asyncio.run(scenario())
    assert dup["duplicate"] is True and dup["accepted"] is True
    assert ended["accepted"] is True and peer.runs() == []


def test_a_stopping_node_waits_for_its_hand_overs_and_shuts_every_gate() -> None:
    async def scenario() -> tuple[list[str], int, Inputs, FakePeer]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.typing.clear()  # the supervisor answers its hand-overs only later
        order: list[str] = []

        async def never() -> dict[str, Any]:
            raise AssertionError("not forwarded")

        for text in ("one", "two"):
            await inputs.accept(sessions.record, ACTIVE, header(), {"text": text}, never)
        drained = asyncio.ensure_future(inputs.drain(5.0))
        for _ in range(20):
            await asyncio.sleep(0)
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
        store = asyncio.Event()
        answer = peer.call

        async def slow_store(target: str, method: str, body: dict[str, Any], **kw: Any) -> Any:
            if method == "state.events.append":
                await store.wait()
            return await answer(target, method, body, **kw)

        peer.call = slow_store  # type: ignore[method-assign]

        async def never() -> dict[str, Any]:
            raise AssertionError("not forwarded")

        accepted = asyncio.ensure_future(
            inputs.accept(sessions.record, ACTIVE, header(), {"text": "late"}, never)
        )
        for _ in range(5):
            await asyncio.sleep(0)
        assert inputs.status()["committing"] == 1
        drained = asyncio.ensure_future(inputs.drain(5.0))
        await asyncio.sleep(0.1)
        assert not drained.done()
        store.set()
        await accepted
        return await drained, peer

    left, peer = asyncio.run(scenario())
    assert left == 0 and [seq for seq, _ in peer.typed()] == [101]


def test_a_stopping_node_stops_waiting_for_a_supervisor_that_does_not_answer() -> None:
    async def scenario() -> tuple[int, float]:
        inputs, peer, sessions = make()
        inputs.on_gate("session/r1", GATE)
        peer.typing.clear()  # never answers

        async def never() -> dict[str, Any]:
            raise AssertionError("not forwarded")

        await inputs.accept(sessions.record, ACTIVE, header(), {"text": "x"}, never)
        loop = asyncio.get_running_loop()
        started = loop.time()
        left = await inputs.drain(0.3)
        took = loop.time() - started
        for task in list(inputs._tasks):
            task.cancel()
        return left, took

    left, took = asyncio.run(scenario())
    assert left == 1 and 0.3 <= took < 2.0


def test_a_turn_sent_as_the_one_before_ended_waits_a_moment_for_the_gate() -> None:
    """The store published the last turn's end (turn.wait answered) and the next turn comes
    before the supervisor's gate message: it waits for that message and is begun here."""

    async def scenario() -> tuple[list[str], FakePeer]:
        inputs, peer, sessions = make()
        forwarded: list[str] = []

        async def forward() -> dict[str, Any]:
            forwarded.append("through the supervisor")
            return {"accepted": True}

        inputs.turn_ended("r1")
        turn = asyncio.ensure_future(
            inputs.accept(sessions.record, ACTIVE, header("session.turn"), {"text": "n"}, forward)
        )
        for _ in range(5):
            await asyncio.sleep(0)
        assert not turn.done()
        inputs.on_gate("session/r1", GATE)  # the supervisor heard its delivery went through
        await asyncio.wait_for(turn, 5)
        await settle(inputs)
        return forwarded, peer

    forwarded, peer = asyncio.run(scenario())
    assert forwarded == [] and peer.calls[0][1] == "state.turn.begin"


def test_a_turn_with_no_end_just_seen_or_a_gate_that_stays_shut_is_forwarded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> list[str]:
        inputs, peer, sessions = make()
        forwarded: list[str] = []

        async def forward() -> dict[str, Any]:
            forwarded.append("x")
            return {"accepted": False}

        # no turn end seen: forwarded without waiting (a wait would outlast wait_for's 5 s)
        monkeypatch.setattr(inputs_module, "REOPEN_WAIT_S", 60.0)
        first = inputs.accept(
            sessions.record, ACTIVE, header("session.turn"), {"text": "a"}, forward
        )
        await asyncio.wait_for(first, 5)
        # a turn ended, but the gate stays shut (the agent is busy): forwarded after the wait
        monkeypatch.setattr(inputs_module, "REOPEN_WAIT_S", 0.05)
        inputs.turn_ended("r1")
        await inputs.accept(sessions.record, ACTIVE, header("session.turn"), {"text": "b"}, forward)
        assert peer.calls == []
        return forwarded

    assert asyncio.run(scenario()) == ["x", "x"]
