"""Typing into a pty session (roost.actors.supervisor.keyboard): what a ``session.input`` event
keeps of typed text, and the commit before the typing: repeated with the same event id when its
answer was lost, typed once; refused at once, typed never; a repeated operation, typed never."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from roost.actors.supervisor import keyboard
from roost.actors.supervisor.keyboard import Keyboard, logged_text
from roost.broker import protocol as p
from roost.broker.errors import RoostError


@pytest.mark.parametrize("reason", ["login", "api-key"])
def test_text_typed_into_a_credential_screen_is_kept_as_its_length(reason: str) -> None:
    seen = {"state": "attention", "reason": reason, "detail": ""}
    assert logged_text("sk-ant-secret", seen) == {"length": 13, "withheld": reason}


@pytest.mark.parametrize(
    "seen",
    [
        {},
        {"state": "ready", "reason": None},
        {"state": "attention", "reason": "trust"},
        {"state": "attention", "reason": "permission"},
        {"state": "starting", "reason": "login"},  # a reason counts only with attention
    ],
)
def test_other_text_is_kept(seen: dict[str, object]) -> None:
    assert logged_text("hello", seen) == {"text": "hello"}


# -- committing before typing -------------------------------------------------------------------


class FakeStore:
    """``state.events.append`` as the store answers it: ``lose`` answers are never sent (the
    attempt commits, then the caller waits out its deadline), ``refuse`` attempts are answered
    ``unavailable`` at once without committing."""

    def __init__(self, lose: int = 0, refuse: int = 0) -> None:
        self.lose, self.refuse = lose, refuse
        self.log: dict[str, int] = {}  # eid -> seq
        self.ops: dict[str, int] = {}
        self.attempts = 0
        self.registered = asyncio.Event()  # never set: the gate stays shut (test_input_gate)

    async def call(self, target: str, method: str, body: dict[str, Any], **kw: Any) -> Any:
        assert (target, method) == ("state", "state.events.append")
        self.attempts += 1
        if self.refuse:
            self.refuse -= 1
            raise RoostError("unavailable", "state is restarting; retry shortly")
        eid = body["events"][0]["eid"]
        op = (body.get("op") or {}).get("id")
        if eid in self.log:
            reply: dict[str, Any] = {"seqs": [self.log[eid]], "repeated": True}
        elif op in self.ops:
            seen = {"id": op, "method": "session.prompt", "state": "terminal"}
            reply = {"duplicate": True, "op": seen, "seqs": [self.ops[op]]}
        else:
            self.log[eid] = len(self.log) + 1
            if op:
                self.ops[op] = self.log[eid]
            reply = {"seqs": [self.log[eid]]}
        if self.lose:
            self.lose -= 1
            await asyncio.sleep(kw["timeout"])
            raise RoostError("unavailable", "state did not answer in time")
        return reply


class FakeAgent:
    pending = 0  # bytes typed that the terminal has not taken

    def __init__(self) -> None:
        self.typed: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.typed.append(data)


class FakeSupervisor:
    def __init__(self, store: FakeStore, instance: str) -> None:
        self.spec: dict[str, Any] = {"submit": b"\r"}
        self.record_id, self.generation, self.instance_id = "r1", 1, instance
        self.peer, self.agent = store, FakeAgent()
        self.classification: dict[str, Any] = {}
        self.checks = self.outbox = self
        self.exit = None
        self.turns = None
        self.pending = False  # no resume's verdict awaited

    def pty(self, header: p.Header) -> FakeAgent:
        return self.agent

    async def hold_input(self) -> None:
        return None

    async def drained(self, timeout: float) -> bool:
        return True


def prompt(store: FakeStore, *ops: str, instance: str = "i1") -> tuple[list[Any], list[bytes]]:
    sup = FakeSupervisor(store, instance)
    board = Keyboard(sup)  # type: ignore[arg-type]

    async def scenario() -> list[Any]:
        out: list[Any] = []
        for op in ops:
            header = p.Header(kind="request", method="session.prompt", op=op)
            try:
                out.append(await board.on_prompt(header, {"text": "hi"}))
            except RoostError as err:
                out.append(err.code)
        return out

    return asyncio.run(scenario()), sup.agent.typed


@pytest.fixture
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keyboard, "COMMIT_WAIT_S", 0.05)
    monkeypatch.setattr(keyboard, "COMMIT_RETRY_S", 0.01)


def test_a_commit_whose_answer_was_lost_is_repeated_and_typed_once(short_deadline: None) -> None:
    store = FakeStore(lose=2)
    (reply,), typed = prompt(store, "P1")
    assert reply == {"accepted": True, "seq": 1}
    assert typed == [b"hi\r"] and store.attempts == 3 and len(store.log) == 1


def test_a_commit_refused_at_once_is_not_committed_nor_typed(short_deadline: None) -> None:
    store = FakeStore(refuse=1)
    replies, typed = prompt(store, "P1", "P1")
    assert replies[0] == "unavailable" and replies[1] == {"accepted": True, "seq": 1}
    assert typed == [b"hi\r"]


def test_a_repeated_operation_is_answered_with_its_first_op_and_not_typed() -> None:
    store = FakeStore()
    first, again = prompt(store, "P1", "P1")[0]
    assert first == {"accepted": True, "seq": 1}
    assert again["duplicate"] is True and again["seq"] == 1 and again["op"]["id"] == "P1"
    assert prompt(store, "P1", instance="i2")[1] == []  # nor does a later supervisor's
