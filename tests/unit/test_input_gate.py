"""The supervisor's side of the input the node commits (roost.actors.supervisor.keyboard): the gate
it tells the node (``open``, with ``withhold`` on a credential screen; ``hold`` for a catch-up, a
resume's verdict or a turn's delivery; ``full``; ``busy``; ``closed``), ``session.type`` typed
once, and the catch-up after a re-registration, which types what the node committed and never
handed over, in order, before the gate opens again."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from roost.actors.supervisor import keyboard
from roost.actors.supervisor.host import Session
from roost.actors.supervisor.keyboard import Keyboard
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.limits import INPUT_PENDING_MAX
from tests import kit

NODE = p.Header(kind="request", method="session.type", sender="node")


class FakePeer(kit.FakePeer):
    """The state store as the keyboard sees it, and the node's notifications (``said``)."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[dict[str, Any]] = []  # events, seq = index + 1
        self.since_calls: list[int] = []
        self.away = 0  # the next reads of the log fail (the state store is away)

    def add(self, kind: str, generation: int, data: dict[str, Any], record: str = "r1") -> int:
        seq = len(self.log) + 1
        self.log.append(
            {"seq": seq, "kind": kind, "record": record, "generation": generation, "data": data}
        )
        return seq

    async def answer(
        self, target: str, method: str, body: dict[str, Any], kw: dict[str, Any]
    ) -> Any:
        assert method == "state.events.since"
        self.since_calls.append(body["after"])
        if self.away:
            self.away -= 1
            raise RoostError("unavailable", "state is away")
        after, limit = body["after"], body["limit"]
        events = [e for e in self.log if e["seq"] > after and e["record"] == body["record"]]
        return {"events": events[:limit], "more": len(events) > limit, "last_seq": len(self.log)}

    def notify(self, target: str, body: dict[str, Any]) -> None:
        assert target == "node"
        super().notify(target, body)

    @property
    def said(self) -> list[dict[str, Any]]:
        return [body for _, body in self.notes]


class FakeAgent:
    def __init__(self, peer: FakePeer) -> None:
        self.peer = peer
        self.typed: list[bytes] = []
        self.said_when_typed: list[str] = []  # the gate as last told the node, at each write
        self.pending = 0
        self.canonical: int | None = None  # the line limit of a terminal in canonical mode

    def write(self, data: bytes) -> None:
        self.typed.append(data)
        self.said_when_typed.append(self.peer.said[-1]["state"] if self.peer.said else "")

    def line_max(self) -> int | None:
        return self.canonical  # None: it reads every byte


class FakeChecks:
    def __init__(self) -> None:
        self.verdict = asyncio.Event()
        self.verdict.set()

    @property
    def pending(self) -> bool:
        return not self.verdict.is_set()

    async def settled_verdict(self) -> None:
        await self.verdict.wait()


class FakeTurns:
    """A stream session's TurnRunner, as the gate reads it."""

    def __init__(self) -> None:
        self.running: str | None = None
        self.closing = False
        self.idle = True
        self.refusal: RoostError | None = None  # what the next turn's plan was refused with


class FakeSupervisor:
    def __init__(self) -> None:
        self.spec: dict[str, Any] = {"submit": b"\r"}
        self.record_id, self.generation, self.instance_id = "r1", 1, "i1"
        self.peer = FakePeer()
        self.tty = FakeAgent(self.peer)
        self.agent: FakeAgent | None = self.tty  # None: a stream session
        self.classification: dict[str, Any] = {}
        self.checks = FakeChecks()
        self.exit: object | None = None
        self.turns: FakeTurns | None = None
        self.term = None

    def pty(self, header: p.Header) -> FakeAgent:
        if (header.session or {}).get("generation", 1) != 1:
            raise RoostError("stale-generation", "another generation")
        return self.tty

    def prompted(self) -> None:
        """A prompt was typed (the classifier's business)."""


def said(sup: FakeSupervisor) -> list[str]:
    """Each gate told the node: its state, and why, what it withholds or the turn running."""
    out = []
    for note in sup.peer.said:
        extra = note.get("why") or note.get("withhold") or note.get("turn")
        out.append(f"{note['state']}:{extra}" if extra else note["state"])
    return out


async def opened() -> tuple[FakeSupervisor, Keyboard]:
    """A supervisor registered for the first time, its gate opened (the floor read first)."""
    sup = FakeSupervisor()
    board = Keyboard(cast(Session, sup))
    sup.peer.add("session.state", 1, {})  # the log before this supervisor: seq 1
    board.registration_lost()
    await board.catch_up()
    await kit.until(lambda: board.gate == {"state": "open"}, "the gate open", step=0)
    assert board.floor == 1 and said(sup) == ["hold:catch-up", "open"]
    assert sup.peer.said[-1] == {
        "gate": True,
        "state": "open",
        "record": "r1",
        "generation": 1,
        "instance": "i1",
    }
    return sup, board


# -- the gate -------------------------------------------------------------------------------------


def test_the_gate_holds_until_the_floor_is_read_then_opens() -> None:
    asyncio.run(opened())


def test_a_credential_screen_keeps_the_gate_open_withholding_the_text() -> None:
    """Input is committed there too, its text logged as its length only (the node's
    ``logged``); ``gate`` (what a node that knows no ``state`` reads) is false meanwhile."""

    async def scenario() -> tuple[list[str], list[bool]]:
        sup, board = await opened()
        sup.classification = {"state": "attention", "reason": "login"}
        board.update_gate()
        sup.classification = {"state": "ready", "reason": None}
        board.update_gate()
        board.update_gate()  # unchanged: nothing more said
        return said(sup), [n["gate"] for n in sup.peer.said]

    states, bare = asyncio.run(scenario())
    assert states == ["hold:catch-up", "open", "open:login", "open"]
    assert bare == [False, True, False, True]


def test_an_open_gate_says_the_line_limit_while_the_terminal_is_canonical() -> None:
    """The agent's terminal in canonical mode cuts a line at its limit: the gate says it, so that
    the node refuses a longer line before its commit; ``gate`` stays true (a node that knows no
    ``line_max`` commits as it did)."""

    async def scenario() -> list[dict[str, Any]]:
        sup, board = await opened()
        sup.tty.canonical = 4095
        board.update_gate()
        sup.tty.canonical = None  # the agent reads its terminal byte by byte again
        board.update_gate()
        return [{k: n.get(k) for k in ("gate", "state", "line_max")} for _, n in sup.peer.notes]

    assert asyncio.run(scenario())[1:] == [
        {"gate": True, "state": "open", "line_max": None},
        {"gate": True, "state": "open", "line_max": 4095},
        {"gate": True, "state": "open", "line_max": None},
    ]


def test_the_gate_is_full_while_the_agent_is_not_reading_and_opens_when_it_has() -> None:
    async def scenario() -> list[str]:
        sup, board = await opened()
        sup.tty.pending = INPUT_PENDING_MAX
        board.update_gate()
        sup.tty.pending = 0
        board.update_gate()  # what PtyAgent.on_drained calls
        return said(sup)

    assert asyncio.run(scenario()) == ["hold:catch-up", "open", "full", "open"]


def test_the_gate_holds_for_a_resumes_verdict_and_says_so() -> None:
    """A resumed session's verdict is awaited from its launch on: until then the node is told
    ``hold`` ``resume`` (input is refused ``resume-pending``), never ``open``."""

    async def scenario() -> tuple[list[str], list[str]]:
        sup = FakeSupervisor()
        sup.checks.verdict.clear()
        board = Keyboard(cast(Session, sup))
        board.registration_lost()
        await board.catch_up()
        for _ in range(20):
            await asyncio.sleep(0)
        before = said(sup)
        sup.checks.verdict.set()
        await kit.until(lambda: board.gate == {"state": "open"}, "the gate open", step=0)
        return before, said(sup)

    before, after = asyncio.run(scenario())
    assert "open" not in before and before[-1:] == ["hold:resume"]
    assert after[-1] == "open"


def test_the_gate_opens_after_a_resumes_verdict_once_the_floor_is_read() -> None:
    async def scenario() -> list[str]:
        sup = FakeSupervisor()
        sup.checks.verdict.clear()
        board = Keyboard(cast(Session, sup))
        await board.catch_up()
        for _ in range(20):
            await asyncio.sleep(0)
        assert board.gate != {"state": "open"} and sup.tty.typed == []
        sup.checks.verdict.set()
        await kit.until(lambda: board.gate == {"state": "open"}, "the gate open", step=0)
        return said(sup)

    states = asyncio.run(scenario())
    assert states[-1] == "open" and states.count("open") == 1


def test_the_gate_closes_when_the_agent_exits() -> None:
    async def scenario() -> list[str]:
        sup, board = await opened()
        sup.exit = object()
        board.update_gate()
        return said(sup)

    assert asyncio.run(scenario()) == ["hold:catch-up", "open", "closed"]


def test_nothing_is_said_while_unregistered_and_all_is_said_again_after() -> None:
    async def scenario() -> list[str]:
        sup, board = await opened()
        sup.peer.registered.clear()
        board.registration_lost()  # the node forgot the gate
        board.update_gate()
        assert said(sup) == ["hold:catch-up", "open"]
        sup.peer.registered.set()
        await board.catch_up()  # nothing was missed
        return said(sup)

    assert asyncio.run(scenario()) == ["hold:catch-up", "open", "open"]


def test_a_stream_sessions_gate_follows_its_turns() -> None:
    async def scenario() -> tuple[list[str], list[dict[str, Any]], list[int]]:
        sup = FakeSupervisor()
        sup.agent, sup.turns = None, FakeTurns()
        board = Keyboard(cast(Session, sup))
        await board.catch_up()  # no log to read: a catch-up asks for the latest turn
        sup.turns.running = "t1"
        board.update_gate()
        sup.turns.running, sup.turns.idle = None, False  # ended, its entries not delivered
        board.update_gate()
        sup.turns.idle = True  # delivered: TurnRunner.on_idle
        board.update_gate()
        sup.turns.refusal = RoostError("not-found", "no conversation to resume", {"x": 1})
        board.update_gate()  # the next turn's plan was refused: TurnRunner.on_idle
        sup.turns.refusal = None
        board.update_gate()
        sup.turns.closing = True
        board.update_gate()
        return said(sup), sup.peer.said, sup.peer.since_calls

    states, notes, reads = asyncio.run(scenario())
    assert states == ["open", "busy:t1", "hold:delivery", "open", "refused", "open", "closed"]
    assert notes[1] == {
        "gate": False,
        "state": "busy",
        "turn": "t1",
        "record": "r1",
        "generation": 1,
        "instance": "i1",
    }
    assert notes[4] == {
        "gate": False,
        "state": "refused",
        "code": "not-found",
        "message": "no conversation to resume",
        "detail": {"x": 1},
        "record": "r1",
        "generation": 1,
        "instance": "i1",
    }
    assert reads == []


def _stream(sup: FakeSupervisor, **turns: Any) -> None:
    sup.agent = None
    sup.turns = FakeTurns()
    for name, value in turns.items():
        setattr(sup.turns, name, value)


@pytest.mark.parametrize(
    ("case", "state"),
    [
        ("exited", {"state": "closed"}),
        ("unregistered", {"state": "hold", "why": "catch-up"}),
        ("catching-up", {"state": "hold", "why": "catch-up"}),
        ("never-opened", {"state": "hold", "why": "catch-up"}),
        ("resume-pending", {"state": "hold", "why": "resume"}),
        ("not-reading", {"state": "full"}),
        ("login", {"state": "open", "withhold": "login"}),
        ("api-key", {"state": "open", "withhold": "api-key"}),
        ("trust", {"state": "open"}),
        ("ready", {"state": "open"}),
        ("canonical", {"state": "open", "line_max": 4095}),
        ("canonical-login", {"state": "open", "withhold": "login", "line_max": 4095}),
        ("stream-no-runner", {"state": "closed"}),
        ("stream-closing", {"state": "closed"}),
        ("stream-running", {"state": "busy", "turn": "t1"}),
        ("stream-delivering", {"state": "hold", "why": "delivery"}),
        ("stream-idle", {"state": "open"}),
        (
            "stream-refused",
            {"state": "refused", "code": "not-found", "message": "gone", "detail": {}},
        ),
        ("stream-exited", {"state": "closed"}),
    ],
)
def test_the_gate_state(case: str, state: dict[str, Any]) -> None:
    async def scenario() -> dict[str, Any]:
        sup = FakeSupervisor()
        board = Keyboard(cast(Session, sup))
        board.floor = 1
        if case in ("exited", "stream-exited"):
            sup.exit = object()
        elif case == "unregistered":
            sup.peer.registered.clear()
        elif case == "catching-up":
            board.caught_up.clear()
        elif case == "never-opened":
            board.floor = None
        elif case == "resume-pending":
            sup.checks.verdict.clear()
        elif case == "not-reading":
            sup.tty.pending = INPUT_PENDING_MAX
        elif case in ("login", "api-key", "trust"):
            sup.classification = {"state": "attention", "reason": case}
        elif case.startswith("canonical"):
            sup.tty.canonical = 4095
            if case == "canonical-login":
                sup.classification = {"state": "attention", "reason": "login"}
        if case.startswith("stream"):
            _stream(sup)
            if case == "stream-no-runner":
                sup.turns = None
            elif case == "stream-closing":
                _stream(sup, closing=True)
            elif case == "stream-running":
                _stream(sup, running="t1")
            elif case == "stream-delivering":
                _stream(sup, idle=False)
            elif case == "stream-refused":
                _stream(sup, refusal=RoostError("not-found", "gone"))
        return board.gate_state()

    assert asyncio.run(scenario()) == state


# -- session.type ---------------------------------------------------------------------------------


def test_an_input_the_node_committed_is_typed_once() -> None:
    async def scenario() -> tuple[list[Any], list[bytes]]:
        sup, board = await opened()
        body = {"seq": 5, "data": {"input": "prompt", "text": "hi"}}
        first = await board.on_type(NODE, body)
        again = await board.on_type(NODE, body)  # the node did not hear the first answer
        keys = await board.on_type(NODE, {"seq": 6, "data": {"input": "key", "keys": ["enter"]}})
        raw = await board.on_type(NODE, {"seq": 7, "data": {"input": "input", "text": "x"}})
        return [first, again, keys, raw], sup.tty.typed

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
        (NODE, {"seq": 0, "data": {"input": "prompt", "text": "x"}}, "bad-request"),
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
            return err.code, sup.tty.typed
        return "", sup.tty.typed

    assert asyncio.run(scenario()) == (code, [])


def test_an_input_handed_over_during_a_resumes_verdict_waits_for_it() -> None:
    """Committed already (the gate was open as the node saw it): it is typed after the verdict,
    however long that takes, never refused."""

    async def scenario() -> list[bytes]:
        sup, board = await opened()
        sup.checks.verdict.clear()
        typing = asyncio.ensure_future(
            board.on_type(NODE, {"seq": 5, "data": {"input": "prompt", "text": "hi"}})
        )
        for _ in range(10):
            await asyncio.sleep(0)
        assert not typing.done() and sup.tty.typed == []
        sup.checks.verdict.set()
        await typing
        return sup.tty.typed

    assert asyncio.run(scenario()) == [b"hi\r"]


# -- the catch-up ---------------------------------------------------------------------------------


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
        assert board.gate is None and not board.caught_up.is_set()
        await board.catch_up()
        return sup.tty.typed, sup, board

    typed, sup, board = asyncio.run(scenario())
    assert typed == [b"handed\r", b"missed-1\r", b"\x1b", b"missed-3"]
    assert board.floor == len(sup.peer.log) and board.typed == set()
    assert board.caught_up.is_set() and said(sup) == ["hold:catch-up", "open", "open"]


def test_the_catch_up_reads_every_page() -> None:
    async def scenario() -> tuple[list[bytes], list[int]]:
        sup, board = await opened()
        for i in range(2500):
            sup.peer.add("session.input", 1, {"input": "input", "text": str(i)})
        board.registration_lost()
        await board.catch_up()
        return sup.tty.typed, sup.peer.since_calls

    typed, calls = asyncio.run(scenario())
    assert typed == [str(i).encode() for i in range(2500)]
    assert calls[1:] == [1, 1001, 2001]  # after the first opening's read, one call per page


def test_the_gate_holds_during_the_catch_up_and_opens_after_what_it_types() -> None:
    """Whatever asks for the gate meanwhile (a screen classified), the node is not told
    ``open`` before the catch-up has typed what was missed: new input comes after it."""

    async def scenario() -> tuple[list[str], list[str]]:
        sup, board = await opened()
        sup.peer.add("session.input", 1, {"input": "prompt", "text": "committed before"})
        board.registration_lost()
        board.update_gate()  # e.g. the screen was classified as the supervisor re-registered
        await board.catch_up()
        return said(sup), sup.tty.said_when_typed

    states, when = asyncio.run(scenario())
    assert states == ["hold:catch-up", "open", "hold:catch-up", "open"]
    assert when == ["hold"]  # what the node was last told as the missed input was typed


def test_a_catch_up_the_store_does_not_answer_keeps_the_gate_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Until it is done, the node commits nothing (it answers ``unavailable`` once its wait is
    over: ``gates.refusal``)."""
    monkeypatch.setattr(keyboard, "CATCH_UP_RETRY_S", 0.01)

    async def scenario() -> tuple[list[str], list[bytes]]:
        sup, board = await opened()
        sup.peer.add("session.input", 1, {"input": "prompt", "text": "missed"})
        board.registration_lost()
        board.update_gate()
        sup.peer.away = 1000
        catching = asyncio.ensure_future(board.catch_up())
        await asyncio.sleep(0.1)
        assert not catching.done() and said(sup)[-1] == "hold:catch-up"
        assert sup.tty.typed == [] and board.gate_state() == {"state": "hold", "why": "catch-up"}
        sup.peer.away = 0
        await asyncio.wait_for(catching, 5)
        return said(sup), sup.tty.typed

    states, typed = asyncio.run(scenario())
    assert states[-2:] == ["hold:catch-up", "open"] and typed == [b"missed\r"]


def test_a_first_registration_has_nothing_to_catch_up() -> None:
    async def scenario() -> list[int]:
        sup = FakeSupervisor()
        board = Keyboard(cast(Session, sup))
        board.registration_lost()
        assert board.caught_up.is_set()  # the gate never opened: the node committed nothing
        return sup.peer.since_calls

    assert asyncio.run(scenario()) == []


def test_a_repeated_operation_types_a_node_input_nobody_handed_over() -> None:
    """A node's commit answered too late for anyone to hand it over (its store stalled, the node
    died, the catch-up had run): the operation's repeat names its seq, and it is typed then,
    once, from the log; only if it is this record's and this generation's."""

    async def scenario() -> tuple[list[Any], list[bytes]]:
        sup, board = await opened()
        late = sup.peer.add("session.input", 1, {"input": "prompt", "text": "late"})
        typed = await board.on_type(NODE, {"seq": late})  # the node's hand-over of a duplicate
        again = await board.on_type(NODE, {"seq": late})
        other = sup.peer.add("session.input", 0, {"input": "prompt", "text": "older generation"})
        older = await board.on_type(NODE, {"seq": other})
        theirs = sup.peer.add("session.input", 1, {"input": "prompt", "text": "r2's"}, "r2")
        foreign = await board.on_type(NODE, {"seq": theirs})
        state = sup.peer.add("session.state", 1, {})
        not_input = await board.on_type(NODE, {"seq": state})
        return [typed, again, older, foreign, not_input], sup.tty.typed

    replies, typed = asyncio.run(scenario())
    assert replies == [
        {"typed": True},
        {"typed": True, "repeated": True},
        {"typed": False},
        {"typed": False},
        {"typed": False},
    ]
    assert typed == [b"late\r"]
