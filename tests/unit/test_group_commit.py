"""The node's commits (roost.actors.node.commit): grouped input commits (``GroupCommit``), one
request to the state store on its way at a time, what comes meanwhile goes together in one
``state.events.append_each``, each input keeping its own answer, its own refusal, and the repeat
of a commit nobody answered (``until_answered``); and a turn's begin, repeated with the same turn
id until the store answers (``begin_turn``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from roost.actors.node import commit
from roost.actors.node.commit import GroupCommit, begin_body, begin_turn, until_answered
from roost.wire.errors import RoostError
from tests import kit


class FakeStore(kit.FakePeer):
    """Answers each request when the test releases it; ``fail`` codes fail the next requests."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.release = asyncio.Event()
        self.fail: list[str] = []
        self.refuse: dict[str, str] = {}  # an item's text -> the code it is refused with

    async def answer(
        self, target: str, method: str, body: dict[str, Any], kw: dict[str, Any]
    ) -> Any:
        self.requests.append((method, body))
        await self.release.wait()
        if self.fail:
            raise RoostError(self.fail.pop(0), "no answer")
        if method == "state.events.append":
            return self.appended(body)
        assert method == "state.events.append_each"
        results = []
        for item in body["items"]:
            text = item["events"][0]["data"]["text"]
            if text in self.refuse:
                results.append({"error": {"code": self.refuse[text], "message": "", "detail": {}}})
            else:
                results.append({"ok": self.appended(item)})
        return {"results": results}

    def appended(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"seqs": [int(body["events"][0]["data"]["text"].removeprefix("t"))]}


def body(n: int) -> dict[str, Any]:
    return {"events": [{"kind": "session.input", "eid": f"e{n}", "data": {"text": f"t{n}"}}]}


async def started() -> None:
    """A few turns of the loop: the commits started have sent what they send."""
    for _ in range(10):
        await asyncio.sleep(0)


def test_commits_while_one_is_on_its_way_go_next_together() -> None:
    async def scenario() -> tuple[list[Any], FakeStore, int]:
        store = FakeStore()
        group = GroupCommit(store)
        first = asyncio.ensure_future(group.commit(body(1)))
        await started()
        assert [m for m, _ in store.requests] == ["state.events.append"]  # at once, alone
        rest = [asyncio.ensure_future(group.commit(body(n))) for n in (2, 3, 4)]
        await started()
        assert len(store.requests) == 1  # waiting for the one on its way
        store.release.set()
        answers = await asyncio.gather(first, *rest)
        return answers, store, group.sent

    answers, store, sent = asyncio.run(scenario())
    assert answers == [{"seqs": [1]}, {"seqs": [2]}, {"seqs": [3]}, {"seqs": [4]}]
    assert [m for m, _ in store.requests] == ["state.events.append", "state.events.append_each"]
    assert store.requests[1][1]["items"] == [body(2), body(3), body(4)]
    assert sent == 2


def test_a_refused_input_fails_alone() -> None:
    async def scenario() -> list[Any]:
        store = FakeStore()
        store.refuse = {"t3": "storage-full"}
        group = GroupCommit(store)
        first = asyncio.ensure_future(group.commit(body(1)))
        await started()
        rest = [asyncio.ensure_future(group.commit(body(n))) for n in (2, 3)]
        await started()
        store.release.set()
        return list(await asyncio.gather(first, *rest, return_exceptions=True))

    one, two, three = asyncio.run(scenario())
    assert one == {"seqs": [1]} and two == {"seqs": [2]}
    assert isinstance(three, RoostError) and three.code == "storage-full"


def test_a_group_nobody_answered_is_repeated_each_input_with_its_event_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(commit, "COMMIT_WAIT_S", 0.0)  # any failure counts as unanswered
    monkeypatch.setattr(commit, "COMMIT_RETRY_S", 0.01)

    async def scenario() -> tuple[list[Any], FakeStore]:
        store = FakeStore()
        group = GroupCommit(store)
        first = asyncio.ensure_future(group.commit(body(1)))
        await started()
        rest = [asyncio.ensure_future(group.commit(body(n))) for n in (2, 3)]
        await started()
        store.fail = ["timeout", "timeout"]  # the first request and the group's: no answer
        store.release.set()
        answers = await asyncio.wait_for(asyncio.gather(first, *rest), 5)
        return answers, store

    answers, store = asyncio.run(scenario())
    assert answers == [{"seqs": [1]}, {"seqs": [2]}, {"seqs": [3]}]
    sent = [[b] if m == "state.events.append" else b["items"] for m, b in store.requests]
    eids = sorted(item["events"][0]["eid"] for request in sent for item in request)
    assert eids.count("e1") == 2 and eids.count("e2") == 2 and eids.count("e3") == 2


def test_a_refusal_of_the_whole_request_at_once_is_not_repeated() -> None:
    async def scenario() -> Any:
        store = FakeStore()
        store.fail = ["unreachable"]  # the store is away: answered at once, nothing committed
        store.release.set()
        group = GroupCommit(store)
        return await asyncio.gather(group.commit(body(1)), return_exceptions=True)

    [err] = asyncio.run(scenario())
    assert isinstance(err, RoostError) and err.code == "unreachable"


# -- until_answered -------------------------------------------------------------------------------


@pytest.fixture
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commit, "COMMIT_WAIT_S", 0.05)
    monkeypatch.setattr(commit, "COMMIT_RETRY_S", 0.01)


def attempts(*outcomes: str | float) -> tuple[list[int], Any]:
    """An attempt per outcome: a code refuses at once, a number of seconds waits that long (no
    answer) and fails ``timeout``, ``ok`` answers."""
    tried: list[int] = []

    async def attempt() -> dict[str, Any]:
        outcome = outcomes[len(tried)]
        tried.append(len(tried))
        if isinstance(outcome, float):
            await asyncio.sleep(outcome)
            raise RoostError("timeout", "no answer")
        if outcome != "ok":
            raise RoostError(outcome, "refused")
        return {"seqs": [len(tried)]}

    return tried, attempt


@pytest.mark.parametrize(
    ("outcomes", "result", "tries"),
    [
        (("ok",), {"seqs": [1]}, 1),
        (("unavailable",), "unavailable", 1),  # refused at once: nothing was committed
        (("storage-full",), "storage-full", 1),
        (("bad-request",), "bad-request", 1),
        ((0.06, "ok"), {"seqs": [2]}, 2),  # no answer: it may have been committed
        ((0.06, "unavailable", "storage-full", "ok"), {"seqs": [4]}, 4),
        ((0.06, "bad-request"), "bad-request", 2),
    ],
)
def test_a_commit_is_repeated_only_once_it_may_have_been_committed(
    short_deadline: None, outcomes: tuple[str | float, ...], result: Any, tries: int
) -> None:
    async def scenario() -> tuple[Any, int]:
        tried, attempt = attempts(*outcomes)
        try:
            return await until_answered(attempt), len(tried)
        except RoostError as err:
            return err.code, len(tried)

    assert asyncio.run(scenario()) == (result, tries)


# -- begin_turn -----------------------------------------------------------------------------------


class StalledStore(kit.FakePeer):
    """``state.turn.begin`` fails with ``codes`` first, then answers."""

    def __init__(self, *codes: str) -> None:
        super().__init__()
        self.codes = list(codes)
        self.begins: list[dict[str, Any]] = []

    async def answer(
        self, target: str, method: str, body: dict[str, Any], kw: dict[str, Any]
    ) -> Any:
        assert (target, method) == ("state", "state.turn.begin")
        assert kw["timeout"] == commit.COMMIT_WAIT_S
        self.begins.append(body)
        if self.codes:
            raise RoostError(self.codes.pop(0), "state did not answer state.turn.begin in time")
        return {"turn": body["turn"]["id"], "seq": 7}


def turn_body() -> dict[str, Any]:
    return begin_body("r1", 1, "node:x:turn:t1:1", "t1", "hi", "op-1")


def test_a_begin_is_repeated_with_the_same_turn_id_until_answered(short_deadline: None) -> None:
    async def scenario() -> tuple[dict[str, Any], StalledStore]:
        store = StalledStore("unavailable", "timeout", "storage-full", "unreachable")
        return await begin_turn(store, turn_body()), store

    reply, store = asyncio.run(scenario())
    assert reply == {"turn": "t1", "seq": 7} and len(store.begins) == 5
    assert all(b == turn_body() for b in store.begins)  # same turn id, same event id


@pytest.mark.parametrize("code", ["storage-full", "storage-failed", "bad-request", "forbidden"])
def test_a_begin_refused_at_once_began_nothing_and_is_not_repeated(
    short_deadline: None, code: str
) -> None:
    async def scenario() -> tuple[str, int]:
        store = StalledStore(code)
        try:
            await begin_turn(store, turn_body())
        except RoostError as err:
            return err.code, len(store.begins)
        return "", len(store.begins)

    assert asyncio.run(scenario()) == (code, 1)


def test_a_begins_body_holds_the_turn_its_event_and_its_operation() -> None:
    assert turn_body() == {
        "turn": {"id": "t1", "record": "r1", "generation": 1, "text": "hi"},
        "events": [
            {
                "kind": "session.input",
                "record": "r1",
                "generation": 1,
                "data": {"input": "turn", "text": "hi", "turn": "t1"},
                "eid": "node:x:turn:t1:1",
            }
        ],
        "op": {"id": "op-1", "method": "session.turn", "record": "r1"},
    }
    assert "op" not in begin_body("r1", 1, "e", "t1", "hi", "")
