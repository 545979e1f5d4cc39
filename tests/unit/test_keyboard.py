"""Typing into a pty session (roost.actors.supervisor.keyboard): what the log keeps of text typed
into a credential screen (the supervisor says the screen, ``withheld``; the node, which commits,
keeps the text's length only, ``inputs.logged``), and what each committed input types, its submit
key apart from the text where the provider asks for it."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from roost.actors.node.inputs import logged
from roost.actors.supervisor import keyboard
from roost.actors.supervisor.host import Session
from roost.actors.supervisor.keyboard import Keyboard, withheld
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from tests import kit

NODE = p.Header(kind="request", method="session.type", sender="node")


@pytest.mark.parametrize("reason", ["login", "api-key"])
def test_text_typed_into_a_credential_screen_is_kept_as_its_length(reason: str) -> None:
    seen = {"state": "attention", "reason": reason, "detail": ""}
    assert withheld(seen) == reason
    data = {"input": "prompt", "text": "sk-ant-secret"}
    assert logged(data, withheld(seen) or "") == {
        "input": "prompt",
        "length": 13,
        "withheld": reason,
    }


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
    assert withheld(seen) is None
    data = {"input": "prompt", "text": "hello"}
    assert logged(data, withheld(seen) or "") == data


# -- typing what the node committed ---------------------------------------------------------------


class FakeTerm:
    """The screen: what the agent was given shows once ``echo`` is on."""

    def __init__(self) -> None:
        self.echo = True
        self.shown = ""

    def text(self) -> str:
        return self.shown


class FakeAgent:
    pending = 0  # bytes typed that the terminal has not taken
    canonical: int | None = None  # the line limit of a terminal in canonical mode

    def __init__(self, term: FakeTerm) -> None:
        self.term = term
        self.typed: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.typed.append(data)
        if self.term.echo:
            self.term.shown += data.decode()

    def line_max(self) -> int | None:
        return self.canonical


class FakePeer(kit.FakePeer):
    def __init__(self) -> None:
        super().__init__(registered=False)  # nothing is said to a node here

    def notify(self, target: str, body: dict[str, Any]) -> None:
        raise AssertionError("not registered")


class FakeSupervisor:
    def __init__(self, submit_delay: float = 0.0) -> None:
        self.spec: dict[str, Any] = {"submit": b"\r", "submit_delay_s": submit_delay}
        self.record_id, self.generation, self.instance_id = "r1", 1, "i1"
        self.term = FakeTerm()
        self.peer, self.agent = FakePeer(), FakeAgent(self.term)
        self.classification: dict[str, Any] = {}
        self.checks = self
        self.exit = None
        self.turns = None
        self.pending = False  # no resume's verdict awaited
        self.prompts = 0  # prompts typed, as the classifier is told

    def pty(self, header: p.Header) -> FakeAgent:
        return self.agent

    def prompted(self) -> None:
        self.prompts += 1


def board_of(sup: FakeSupervisor) -> Keyboard:
    board = Keyboard(cast(Session, sup))
    board.floor = 0  # the gate opened once: seqs past 0 may come
    return board


@pytest.mark.parametrize(
    ("data", "typed"),
    [
        ({"input": "prompt", "text": "hi"}, [b"hi\r"]),
        ({"input": "input", "text": "hi"}, [b"hi"]),
        ({"input": "input", "text": ""}, [b""]),
        ({"input": "key", "keys": ["escape", "enter", "up"]}, [b"\x1b\r\x1b[A"]),
        ({"input": "prompt", "text": "sk-ant-secret"}, [b"sk-ant-secret\r"]),  # typed whole
    ],
)
def test_each_committed_input_types_its_keystrokes(
    data: dict[str, Any], typed: list[bytes]
) -> None:
    async def scenario() -> tuple[dict[str, Any], list[bytes], int]:
        sup = FakeSupervisor()
        reply = await board_of(sup).on_type(NODE, {"seq": 1, "data": data})
        return reply, sup.agent.typed, sup.prompts

    prompts = int(data["input"] == "prompt")  # a prompt's screen has its next verdict told
    assert asyncio.run(scenario()) == ({"typed": True}, typed, prompts)


@pytest.mark.parametrize(
    "data",
    [
        {"input": "prompt", "length": 13, "withheld": "login"},  # the log kept its length only
        {"input": "turn", "text": "a stream turn"},
        {"input": "key", "keys": "enter"},
        {"text": "no kind"},
    ],
)
def test_an_input_that_cannot_be_typed_is_refused_and_not_remembered(data: dict[str, Any]) -> None:
    async def scenario() -> tuple[str, list[bytes], bool]:
        sup = FakeSupervisor()
        board = board_of(sup)
        try:
            await board.on_type(NODE, {"seq": 1, "data": data})
        except RoostError as err:
            return err.code, sup.agent.typed, board._was_typed(1)
        return "", sup.agent.typed, board._was_typed(1)

    assert asyncio.run(scenario()) == ("bad-request", [], False)


def test_a_prompts_submit_key_goes_once_the_screen_shows_its_text() -> None:
    async def scenario() -> tuple[list[bytes], float]:
        sup = FakeSupervisor(submit_delay=0.01)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await board_of(sup).on_type(NODE, {"seq": 1, "data": {"input": "prompt", "text": "hi"}})
        return sup.agent.typed, loop.time() - started

    typed, took = asyncio.run(scenario())
    assert typed == [b"hi", b"\r"] and took < 1.0


def test_a_submit_key_waits_for_the_echo_at_most_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keyboard, "ECHO_WAIT_S", 0.1)

    async def scenario() -> tuple[list[bytes], float, list[bool]]:
        sup = FakeSupervisor(submit_delay=0.01)
        sup.term.echo = False  # a TUI that never shows what it was given
        board = board_of(sup)
        loop = asyncio.get_running_loop()
        started = loop.time()
        typing = asyncio.ensure_future(
            board.on_type(NODE, {"seq": 1, "data": {"input": "prompt", "text": "hello"}})
        )
        await asyncio.sleep(0.05)
        during = [board.typing, sup.agent.typed == [b"hello"]]
        await typing
        return sup.agent.typed, loop.time() - started, [*during, board.typing]

    typed, took, typing = asyncio.run(scenario())
    assert typed == [b"hello", b"\r"] and 0.1 <= took < 1.0
    assert typing == [True, True, False]  # session.screen's ``accepting`` while it types
