"""The supervisor's side of input the node commits (roost.actors.supervisor.keyboard): the gate it
opens and shuts for the node, ``session.type`` typed once, and the catch-up after a
re-registration, which types what the node committed and never handed over, in order, before any
other input."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from roost.actors.supervisor import keyboard
from roost.actors.supervisor.keyboard import GATE_PENDING, Keyboard
from roost.broker import protocol as p
from roost.broker.errors import RoostError

NODE = p.Header(kind="request", method="session.type", sender="node")


class FakePeer:
    """The state store as the keyboard sees it, and the node's notifications."""

    def __init__(self) -> None:
        self.registered = asyncio.Event()
        self.registered.set()
        self.log: list[dict[str, Any]] = []  # events, seq = index + 1
        self.notes: list[dict[str, Any]] = []
        self.since_calls: list[int] = []

    def add(self, kind: str, generation: int, data: dict[str, Any]) -> int:
        seq = len(self.log) + 1
        self.log.append(
            {"seq": seq, "kind": kind, "record": "r1", "generation": generation, "data": data}
        )
        return seq

    async def call(self, target: str, method: str, body: dict[str, Any], **kw: Any) -> Any:
        if method == "state.events.append":
            event = body["events"][0]
            return {"seqs": [self.add(event["kind"], event["generation"], event["data"])]}
        assert method == "state.events.since"
        self.since_calls.append(body["after"])
        after, limit = body["after"], body["limit"]
        events = [e for e in self.log if e["seq"] > after and e["record"] == body["record"]]
        return {"events": events[:limit], "more": len(events) > limit, "last_seq": len(self.log)}

    def notify(self, target: str, body: dict[str, Any]) -> None:
        assert target == "node"
        self.notes.append(body)


class FakeAgent:
    def __init__(self) -> None:
        self.typed: list[bytes] = []
        self.pending = 0

    def write(self, data: bytes) -> None:
        self.typed.append(data)


class FakeChecks:
    def __init__(self) -> None:
        self.verdict = asyncio.Event()
        self.verdict.set()

    @property
    def pending(self) -> bool:
        return not self.verdict.is_set()

    async def hold_input(self) -> None:
        await self.verdict.wait()

    async def settled_verdict(self) -> None:
        await self.verdict.wait()


class FakeSupervisor:
    def __init__(self) -> None:
        self.spec: dict[str, Any] = {"submit": b"\r"}
        self.record_id, self.generation, self.instance_id = "r1", 1, "i1"
        self.peer, self.agent = FakePeer(), FakeAgent()
        self.classification: dict[str, Any] = {}
        self.checks = FakeChecks()
        self.outbox = self
        self.exit = None
        self.turns = None
        self.term = None

    def pty(self, header: p.Header) -> FakeAgent:
        if (header.session or {}).get("generation", 1) != 1:
            raise RoostError("stale-generation", "another generation")
        return self.agent

    async def drained(self, timeout: float) -> bool:
        return True


def gates(sup: FakeSupervisor) -> list[bool]:
    return [n["gate"] for n in sup.peer.notes]


async def opened() -> tuple[FakeSupervisor, Keyboard]:
    """A supervisor registered for the first time, its gate opened (the floor read first)."""
    sup = FakeSupervisor()
    board = Keyboard(sup)  # type: ignore[arg-type]
    sup.peer.add("session.state", 1, {})  # the log before this supervisor: seq 1
    board.registration_lost()
    await board.catch_up()
    for _ in range(20):
        if board.gate:
            break
        await asyncio.sleep(0)
    assert board.floor == 1 and gates(sup) == [True]
    assert sup.peer.notes[0] == {"gate": True, "record": "r1", "generation": 1, "instance": "i1"}
    return sup, board


def test_the_gate_opens_once_registered_and_shuts_for_a_credential_screen() -> None:
    async def scenario() -> list[bool]:
        sup, board = await opened()
        sup.classification = {"state": "attention", "reason": "login"}
        board.update_gate()
        sup.classification = {"state": "ready", "reason": None}
        board.update_gate()
        board.update_gate()  # unchanged: nothing more said
        return gates(sup)

    assert asyncio.run(scenario()) == [True, False, True]


def test_the_gate_shuts_while_the_agent_is_not_reading_and_opens_when_it_has() -> None:
    async def scenario() -> list[bool]:
        sup, board = await opened()
        sup.agent.pending = GATE_PENDING
        board.update_gate()
        sup.agent.pending = 0
        board.update_gate()  # what PtyAgent.on_drained calls
        return gates(sup)

    assert asyncio.run(scenario()) == [True, False, True]


def test_the_gate_stays_shut_until_a_resumes_verdict() -> None:
    async def scenario() -> list[bool]:
        sup = FakeSupervisor()
        sup.checks.verdict.clear()
        board = Keyboard(sup)  # type: ignore[arg-type]
        await board.catch_up()
        for _ in range(5):
            await asyncio.sleep(0)
        assert gates(sup) == [] and not board.gate
        sup.checks.verdict.set()
        for _ in range(20):
            await asyncio.sleep(0)
        return gates(sup)

    assert asyncio.run(scenario()) == [True]


def test_the_gate_shuts_when_the_agent_exits() -> None:
    async def scenario() -> list[bool]:
        sup, board = await opened()
        sup.exit = object()  # type: ignore[assignment]
        board.update_gate()
        return gates(sup)

    assert asyncio.run(scenario()) == [True, False]


def test_an_input_the_node_committed_is_typed_once() -> None:
    async def scenario() -> tuple[list[Any], list[bytes]]:
        sup, board = await opened()
        body = {"seq": 5, "data": {"input": "prompt", "text": "hi"}}
        first = await board.on_type(NODE, body)
        again = await board.on_type(NODE, body)  # the node did not hear the first answer
        keys = await board.on_type(NODE, {"seq": 6, "data": {"input": "key", "keys": ["enter"]}})
        raw = await board.on_type(NODE, {"seq": 7, "data": {"input": "input", "text": "x"}})
        return [first, again, keys, raw], sup.agent.typed

    replies, typed = asyncio.run(scenario())
    assert replies[0] == {"typed": True} and replies[1] == {"typed": True, "repeated": True}
    assert typed == [b"hi\r", b"\r", b"x"]


@pytest.mark.parametrize(
    ("header", "body", "code"),
    [
        (
            p.Header(kind="request", method="session.type", sender="client/x"),
            {"seq": 1},
            "forbidden",
        ),
        (NODE, {"seq": 1, "data": "nope"}, "bad-request"),
        (NODE, {"seq": 9, "data": {"input": "prompt", "length": 3}}, "bad-request"),
        (
            p.Header(
                kind="request", method="session.type", sender="node", session={"generation": 2}
            ),
            {"seq": 9, "data": {"input": "prompt", "text": "x"}},
            "stale-generation",
        ),
    ],
)
def test_what_cannot_be_typed_is_refused(header: p.Header, body: dict[str, Any], code: str) -> None:
    async def scenario() -> tuple[str, list[bytes]]:
        sup, board = await opened()
        try:
            await board.on_type(header, body)
        except RoostError as err:
            return err.code, sup.agent.typed
        return "", sup.agent.typed

    assert asyncio.run(scenario()) == (code, [])


def test_the_catch_up_types_what_was_committed_and_not_handed_over_in_order() -> None:
    async def scenario() -> tuple[list[bytes], FakeSupervisor, Keyboard]:
        sup, board = await opened()
        log = sup.peer
        handed = log.add("session.input", 1, {"input": "prompt", "text": "handed"})
        await board.on_type(NODE, {"seq": handed, "data": log.log[handed - 1]["data"]})
        log.add("session.input", 1, {"input": "prompt", "text": "missed-1"})
        log.add("session.classified", 1, {"state": "ready"})
        log.add("session.input", 0, {"input": "prompt", "text": "older generation"})
        log.add("session.input", 1, {"input": "key", "keys": ["escape"]})
        log.add("session.input", 1, {"input": "input", "length": 9, "withheld": "login"})
        log.add("session.input", 1, {"input": "input", "text": "missed-3"})
        # the node died; a new one: the supervisor registers again
        board.registration_lost()
        assert not board.gate and not board.caught_up.is_set()
        await board.catch_up()
        return sup.agent.typed, sup, board

    typed, sup, board = asyncio.run(scenario())
    assert typed == [b"handed\r", b"missed-1\r", b"\x1b", b"missed-3"]
    assert board.floor == len(sup.peer.log) and board.typed == set()
    assert board.caught_up.is_set() and gates(sup) == [True, True]


def test_the_catch_up_reads_every_page(monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> tuple[list[bytes], list[int]]:
        sup, board = await opened()
        for i in range(2500):
            sup.peer.add("session.input", 1, {"input": "input", "text": str(i)})
        board.registration_lost()
        await board.catch_up()
        return sup.agent.typed, sup.peer.since_calls

    typed, calls = asyncio.run(scenario())
    assert typed == [str(i).encode() for i in range(2500)]
    assert calls[1:] == [1, 1001, 2001]  # after the first opening's read, one call per page


def test_input_waits_for_the_catch_up_and_comes_after_what_it_types() -> None:
    async def scenario() -> list[bytes]:
        sup, board = await opened()
        sup.peer.add("session.input", 1, {"input": "prompt", "text": "committed before"})
        board.registration_lost()
        header = p.Header(kind="request", method="session.prompt")
        prompt = asyncio.ensure_future(board.on_prompt(header, {"text": "after"}))
        for _ in range(10):
            await asyncio.sleep(0)
        assert not prompt.done() and sup.agent.typed == []
        await board.catch_up()
        await prompt
        return sup.agent.typed

    assert asyncio.run(scenario()) == [b"committed before\r", b"after\r"]


def test_input_refuses_clearly_when_the_catch_up_never_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(keyboard, "COMMIT_WAIT_S", 0.05)

    async def scenario() -> str:
        _sup, board = await opened()
        board.registration_lost()
        try:
            await board.on_prompt(p.Header(kind="request", method="session.prompt"), {"text": "x"})
        except RoostError as err:
            return err.code
        return ""

    assert asyncio.run(scenario()) == "unavailable"


def test_a_first_registration_has_nothing_to_catch_up() -> None:
    async def scenario() -> list[int]:
        sup = FakeSupervisor()
        board = Keyboard(sup)  # type: ignore[arg-type]
        board.registration_lost()
        assert board.caught_up.is_set()  # the gate never opened: the node committed nothing
        return sup.peer.since_calls

    assert asyncio.run(scenario()) == []


def test_a_repeated_operation_types_a_node_input_nobody_handed_over() -> None:
    """A node's commit answered too late for anyone to hand it over (its store stalled, the node
    died, the catch-up had run): the operation's repeat names its seq, and it is typed then,
    once, from the log."""

    async def scenario() -> tuple[list[Any], list[bytes]]:
        sup, board = await opened()
        late = sup.peer.add("session.input", 1, {"input": "prompt", "text": "late"})
        typed = await board.on_type(NODE, {"seq": late})  # the node's hand-over of a duplicate
        again = await board.on_type(NODE, {"seq": late})
        other = sup.peer.add("session.input", 0, {"input": "prompt", "text": "older generation"})
        skipped = await board.on_type(NODE, {"seq": other})
        return [typed, again, skipped], sup.agent.typed

    replies, typed = asyncio.run(scenario())
    assert replies == [{"typed": True}, {"typed": True, "repeated": True}, {"typed": False}]
    assert typed == [b"late\r"]


def test_a_forwarded_repeat_of_a_node_input_types_it_if_it_never_was() -> None:
    async def scenario() -> tuple[Any, list[bytes]]:
        sup, board = await opened()
        late = sup.peer.add("session.input", 1, {"input": "prompt", "text": "late"})

        async def duplicate(target: str, method: str, body: dict[str, Any], **kw: Any) -> Any:
            if method == "state.events.append":
                return {
                    "duplicate": True,
                    "op": {"id": "K", "method": "session.prompt"},
                    "seqs": [late],
                }
            return await FakePeer.call(sup.peer, target, method, body, **kw)

        sup.peer.call = duplicate  # type: ignore[method-assign]
        header = p.Header(kind="request", method="session.prompt", op="K")
        reply = await board.on_prompt(header, {"text": "late"})
        await board.on_prompt(header, {"text": "late"})  # and again: typed once
        return reply, sup.agent.typed

    reply, typed = asyncio.run(scenario())
    assert reply["duplicate"] is True and typed == [b"late\r"]
