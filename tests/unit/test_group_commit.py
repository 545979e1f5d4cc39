"""The node's grouped input commits (roost.actors.node.inputs.GroupCommit): one request to the
state store on its way at a time, what comes meanwhile goes together in one
``state.events.append_each``; each input keeps its own answer, its own refusal, and the repeat
of a commit nobody answered."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from roost.actors.node.inputs import GroupCommit
from roost.actors.supervisor import keyboard
from roost.broker.errors import RoostError


class FakeStore:
    """Answers each request when the test releases it; ``fail`` codes fail the next requests."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.release = asyncio.Event()
        self.fail: list[str] = []
        self.refuse: dict[str, str] = {}  # an item's text -> the code it is refused with

    async def call(self, target: str, method: str, body: dict[str, Any], **kw: Any) -> Any:
        self.requests.append((method, body))
        await self.release.wait()
        if self.fail:
            raise RoostError(self.fail.pop(0), "no answer")
        if method == "state.events.append":
            return self.answer(body)
        assert method == "state.events.append_each"
        results = []
        for item in body["items"]:
            text = item["events"][0]["data"]["text"]
            if text in self.refuse:
                results.append({"error": {"code": self.refuse[text], "message": "", "detail": {}}})
            else:
                results.append({"ok": self.answer(item)})
        return {"results": results}

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
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
        group = GroupCommit(store)  # type: ignore[arg-type]
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
        group = GroupCommit(store)  # type: ignore[arg-type]
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
    monkeypatch.setattr(keyboard, "COMMIT_WAIT_S", 0.0)  # any failure counts as unanswered
    monkeypatch.setattr(keyboard, "COMMIT_RETRY_S", 0.01)

    async def scenario() -> tuple[list[Any], FakeStore]:
        store = FakeStore()
        group = GroupCommit(store)  # type: ignore[arg-type]
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
        group = GroupCommit(store)  # type: ignore[arg-type]
        return await asyncio.gather(group.commit(body(1)), return_exceptions=True)

    [err] = asyncio.run(scenario())
    assert isinstance(err, RoostError) and err.code == "unreachable"
