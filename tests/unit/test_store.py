"""The state store's ``state.events.append`` (roost.actors.state.store): an operation id stored with
its events answers a repeat as a duplicate, and the same request sent again (its events' ids in
the log already: its sender never heard the answer) answers ``repeated``, appending nothing. Real
SQLite in a temporary directory, the store's own writer task; the broker is a fake."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from roost.actors.runtime.peer import Peer
from roost.actors.state import db
from roost.actors.state.store import StateStore
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from tests import kit


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection, _ = db.open_db(tmp_path / "state.db", "n-test")
    yield connection
    connection.close()


def prompt(text: str, eid: str, op: str) -> dict[str, Any]:
    event = {"kind": "session.input", "record": "r1", "generation": 1, "data": {"text": text}}
    return {
        "events": [{**event, "eid": eid}],
        "op": {"id": op, "method": "session.prompt", "record": "r1"},
    }


def appends(conn: sqlite3.Connection, *bodies: dict[str, Any]) -> list[dict[str, Any]]:
    async def scenario() -> list[dict[str, Any]]:
        store = StateStore(conn, cast(Peer, kit.FakePeer()))
        writer = asyncio.create_task(store.writer())
        try:
            append = store._events_append
            return [await append(p.Header(kind="request"), body) for body in bodies]
        finally:
            writer.cancel()

    return asyncio.run(scenario())


def texts(conn: sqlite3.Connection) -> list[str]:
    return [e["data"]["text"] for e in db.events_since(conn, 0, 100)]


def test_the_same_request_again_is_repeated_and_appends_nothing(conn: sqlite3.Connection) -> None:
    first, again = appends(conn, prompt("hi", "i1:input:1", "P1"), prompt("hi", "i1:input:1", "P1"))
    assert first == {"seqs": [1]}
    assert again == {"seqs": [1], "repeated": True}
    assert texts(conn) == ["hi"]
    op = db.get_op(conn, "P1")
    assert op is not None and op["result"] == {"seqs": [1]}


def test_another_request_with_the_operation_id_is_a_duplicate(conn: sqlite3.Connection) -> None:
    first, other = appends(conn, prompt("hi", "i1:input:1", "P1"), prompt("hi", "i2:input:1", "P1"))
    assert first == {"seqs": [1]}
    assert other["duplicate"] is True and other["seqs"] == [1]
    assert other["op"]["id"] == "P1" and other["op"]["method"] == "session.prompt"
    assert texts(conn) == ["hi"]


def test_events_without_an_event_id_are_appended_each_time(conn: sqlite3.Connection) -> None:
    bare = {"events": [{"kind": "session.input", "record": "r1", "data": {"text": "x"}}]}
    assert appends(conn, bare, bare) == [{"seqs": [1]}, {"seqs": [2]}]
    assert texts(conn) == ["x", "x"]


def append_each(conn: sqlite3.Connection, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``state.events.append_each`` and how many transactions the writer committed for it."""

    async def scenario() -> tuple[dict[str, Any], int]:
        store = StateStore(conn, cast(Peer, kit.FakePeer()))
        commits = 0
        commit = store._commit

        def counted(batch: Any) -> None:
            nonlocal commits
            commits += 1
            commit(batch)

        pytest.MonkeyPatch().setattr(store, "_commit", counted)  # this store's, for its life
        writer = asyncio.create_task(store.writer())
        try:
            reply = await store._events_append_each(p.Header(kind="request"), body)
            return reply, commits
        finally:
            writer.cancel()

    return asyncio.run(scenario())


def test_append_each_applies_every_item_as_its_own_append_in_one_transaction(
    conn: sqlite3.Connection,
) -> None:
    appends(conn, prompt("first", "i1:input:1", "P1"))
    reply, commits = append_each(
        conn,
        {
            "items": [
                prompt("second", "n:input:1", "P2"),
                prompt("first", "i1:input:1", "P1"),  # sent again: repeated
                prompt("other", "n:input:2", "P1"),  # the op again: duplicate
                {"events": "not a list"},  # refused alone
                "not a map",
                prompt("third", "n:input:3", "P3"),
            ]
        },
    )
    results = reply["results"]
    assert results[0] == {"ok": {"seqs": [2]}}
    assert results[1] == {"ok": {"seqs": [1], "repeated": True}}
    assert results[2]["ok"]["duplicate"] is True and results[2]["ok"]["seqs"] == [1]
    assert results[3]["error"]["code"] == "bad-request"
    assert results[4]["error"]["code"] == "bad-request"
    assert results[5] == {"ok": {"seqs": [3]}}
    assert commits == 1
    assert texts(conn) == ["first", "second", "third"]
    first = db.get_op(conn, "P3")
    assert first is not None and first["result"] == {"seqs": [3]}


@pytest.mark.parametrize("items", [[], "x", [{}] * 65])
def test_append_each_needs_1_to_64_items(conn: sqlite3.Connection, items: Any) -> None:
    with pytest.raises(RoostError) as err:
        append_each(conn, {"items": items})
    assert err.value.code == "bad-request"
