"""The node's records in memory (roost.actors.node.known): read once, kept by every write's reply,
read again when a write left them in doubt, and never overwritten by a read older than a write
of the same record. The state store is a fake holding rows; a gate holds a read at a chosen
moment so that a write can pass it."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from roost.actors.node.known import KnownRecords
from roost.actors.state import records as r
from roost.actors.state.records import Record
from roost.wire.errors import RoostError


def rec(rid: str, name: str | None = None, **changes: Any) -> Record:
    changes.setdefault("state", r.DORMANT)
    return Record(rid, name, "echo", "pty", "/", env={"K": "v"}, **changes)


class FakeStore:
    """``state.record.*`` reads over ``rows``; ``gates[method]`` (an Event) holds that read."""

    def __init__(self, *records: Record) -> None:
        self.rows = {x.id: x for x in records}
        self.calls: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}

    async def call(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(method)
        snapshot = dict(self.rows)  # what the store held when the request arrived
        if method in self.gates:
            await self.gates[method].wait()
        if method == "state.record.list":
            return {"records": [x.to_wire() for x in snapshot.values()]}
        ref = str(body.get("id") or body.get("ref"))
        found = snapshot.get(ref) or next((x for x in snapshot.values() if x.name == ref), None)
        if found is None:
            raise RoostError("not-found", f"no record {ref!r}")
        return {"record": found.to_wire(), "env": found.env}

    def write(self, record: Record) -> Record:
        self.rows[record.id] = record
        return dataclasses.replace(record, env=dict.fromkeys(record.env, ""))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_reads_come_from_memory_after_one_list() -> None:
    store = FakeStore(rec("r1", "one"), rec("r2", "two", state=r.LIVE))

    async def scenario() -> None:
        known = KnownRecords(store.call)
        assert (await known.get("r1")).name == "one"
        assert (await known.get("two")).id == "r2"
        assert (await known.get("r2")).env == {"K": ""}  # names only: values stay in the store
        with pytest.raises(RoostError) as gone:
            await known.get("nosuch")
        assert gone.value.code == "not-found" and gone.value.detail == {"ref": "nosuch"}
        assert [x.id for x in known.active()] == ["r2"]

    run(scenario())
    assert store.calls == ["state.record.list"]


def test_a_write_s_reply_replaces_the_copy_names_included() -> None:
    store = FakeStore(rec("r1", "one"))

    async def scenario() -> None:
        known = KnownRecords(store.call)
        await known.load()
        async with known.writing("r1"):
            known.put(store.write(rec("r1", "uno", state=r.LIVE)))
        assert (await known.get("uno")).state == r.LIVE
        with pytest.raises(RoostError):
            await known.get("one")  # the old name is free again
        async with known.writing("r3"):
            known.put(store.write(rec("r3", "three")))
        assert (await known.get("three")).id == "r3"
        known.drop("r3")
        with pytest.raises(RoostError):
            await known.get("r3")

    run(scenario())
    assert store.calls == ["state.record.list"]


def test_a_failed_write_leaves_its_record_to_be_read_again() -> None:
    store = FakeStore(rec("r1", "one"))

    async def scenario() -> None:
        known = KnownRecords(store.call)
        await known.load()
        with pytest.raises(RoostError):
            async with known.writing("r1"):
                store.rows["r1"] = rec("r1", "one", state=r.DORMANT, generation=4)  # applied...
                raise RoostError("unavailable", "...but its answer was lost")
        assert (await known.get("r1")).generation == 4
        assert (await known.get("one")).generation == 4

    run(scenario())
    assert store.calls == ["state.record.list", "state.record.get"]


def test_a_create_in_doubt_is_found_by_its_name() -> None:
    store = FakeStore()

    async def scenario() -> Record:
        known = KnownRecords(store.call)
        await known.load()
        with pytest.raises(RoostError):
            async with known.writing("r9"):
                store.rows["r9"] = rec("r9", "late")
                raise RoostError("unavailable", "the create's answer was lost")
        return await known.get("late")

    assert run(scenario()).id == "r9"


def test_a_read_older_than_a_write_is_not_kept() -> None:
    """A record in doubt is read again; a write of it passes the read (the read is held at the
    store with the old row): the write's record stays, the read's is answered but not kept."""
    store = FakeStore(rec("r1", state=r.LIVE, generation=1))

    async def scenario() -> None:
        known = KnownRecords(store.call)
        await known.load()
        with pytest.raises(RoostError):
            async with known.writing("r1"):
                raise RoostError("timeout", "in doubt")
        store.gates["state.record.get"] = gate = asyncio.Event()
        reading = asyncio.ensure_future(known.get("r1"))
        while "state.record.get" not in store.calls:
            await asyncio.sleep(0)
        async with known.writing("r1"):
            known.put(store.write(rec("r1", state=r.DORMANT, generation=1)))
        gate.set()
        await reading
        assert (await known.get("r1")).state == r.DORMANT

    run(scenario())


def test_a_list_older_than_a_write_keeps_the_write() -> None:
    store = FakeStore(rec("r1", state=r.LIVE))

    async def scenario() -> None:
        known = KnownRecords(store.call)
        store.gates["state.record.list"] = gate = asyncio.Event()
        loading = asyncio.ensure_future(known.load())
        while not store.calls:
            await asyncio.sleep(0)
        async with known.writing("r1"):
            known.put(store.write(rec("r1", state=r.DORMANT)))
        gate.set()
        await loading
        assert (await known.get("r1")).state == r.DORMANT
        assert known.active() == []

    run(scenario())


def test_a_reset_reads_the_list_again_and_a_list_begun_before_it_is_not_kept() -> None:
    store = FakeStore(rec("r1", "one"))

    async def scenario() -> None:
        known = KnownRecords(store.call)
        await known.load()
        store.rows["r2"] = rec("r2", "two")  # (the node writes every record; a reset is a guard)
        store.gates["state.record.list"] = gate = asyncio.Event()
        known.reset()
        loading = asyncio.ensure_future(known.get("two"))
        while store.calls.count("state.record.list") < 2:
            await asyncio.sleep(0)
        known.reset()  # a new store incarnation while the list was under way
        gate.set()
        assert (await loading).id == "r2"

    run(scenario())
    assert store.calls.count("state.record.list") == 3


def test_the_listener_hears_every_record_kept_and_those_deleted() -> None:
    heard: list[tuple[str, str]] = []
    store = FakeStore(rec("r1", state=r.LIVE))

    async def scenario() -> None:
        known = KnownRecords(store.call, lambda x: heard.append((x.id, x.state)))
        await known.load()
        known.put(rec("r1", state=r.DORMANT))
        known.drop("r1")

    run(scenario())
    assert heard == [("r1", r.LIVE), ("r1", r.DORMANT), ("r1", r.DORMANT)]


def test_active_records_come_in_the_order_they_were_created() -> None:
    store = FakeStore(
        rec("rb", state=r.LIVE, created=2.0),
        rec("ra", state=r.STARTING, created=1.0),
        rec("rc", state=r.DORMANT, created=0.5),
    )

    async def scenario() -> list[str]:
        known = KnownRecords(store.call)
        await known.load()
        return [x.id for x in known.active()]

    assert run(scenario()) == ["ra", "rb"]


def test_a_new_state_store_incarnation_reads_the_records_again() -> None:
    store = FakeStore(rec("r1", "one"))

    async def scenario() -> None:
        known = KnownRecords(store.call)
        known.store_up("a")  # heard before anything was read: nothing to read again
        await known.get("r1")
        known.store_up("a")  # the same store saying hello again (a reconnect)
        await known.get("r1")
        known.store_up("b")  # a restarted store
        await known.get("r1")

    run(scenario())
    assert store.calls == ["state.record.list", "state.record.list"]


def test_a_read_during_a_write_of_the_record_waits_for_its_reply() -> None:
    """The state store publishes a write's events as it commits, before its reply reaches the
    node. A client that reads the record on hearing such an event must not get the copy from
    before the write (the dashboard kept showing `stopping` after `session.exited`)."""
    store = FakeStore(rec("r1", "one", state=r.STOPPING))

    async def scenario() -> None:
        known = KnownRecords(store.call)
        await known.load()
        committed, answered = asyncio.Event(), asyncio.Event()

        async def write() -> None:
            async with known.writing("r1"):
                row = store.write(rec("r1", "one", state=r.DORMANT))
                committed.set()  # the store has committed and published; its reply is on its way
                await answered.wait()
                known.put(row)

        async def create() -> None:
            async with known.writing("r2"):
                row = store.write(rec("r2", "two", state=r.STARTING))
                committed.set()
                await answered.wait()
                known.put(row)

        for writer, rid, state in ((write, "r1", r.DORMANT), (create, "r2", r.STARTING)):
            committed.clear()
            answered.clear()
            task = asyncio.create_task(writer())
            await committed.wait()
            read = asyncio.create_task(known.get(rid))
            await asyncio.sleep(0.01)
            assert not read.done()  # held until the write's reply is in
            answered.set()
            assert (await read).state == state
            await task

    run(scenario())


def test_a_read_after_a_failed_write_asks_the_store() -> None:
    store = FakeStore(rec("r1", "one", state=r.STOPPING))

    async def scenario() -> None:
        known = KnownRecords(store.call)
        await known.load()
        committed = asyncio.Event()

        async def write() -> None:
            async with known.writing("r1"):
                store.write(rec("r1", "one", state=r.DORMANT))
                committed.set()
                await asyncio.sleep(0.01)
                raise RoostError("timeout", "the reply was lost")

        task = asyncio.create_task(write())
        await committed.wait()
        assert (await known.get("r1")).state == r.DORMANT
        with pytest.raises(RoostError):
            await task

    run(scenario())


def test_counts_follow_every_write() -> None:
    store = FakeStore(rec("r1"), rec("r2", state=r.LIVE), rec("r3", state=r.LIVE))

    async def scenario() -> None:
        known = KnownRecords(store.call)
        await known.load()
        assert known.counts() == {r.DORMANT: 1, r.LIVE: 2}
        async with known.writing("r2"):
            known.put(store.write(rec("r2", state=r.STOPPING)))
        known.drop("r1")
        assert known.counts() == {r.STOPPING: 1, r.LIVE: 1}

    run(scenario())


def test_a_name_no_copy_has_waits_for_the_writes_in_flight() -> None:
    """A client that heard `record.renamed` (or `record.created`) asks for the new name at once."""
    store = FakeStore(rec("r1", "old"))

    async def scenario() -> None:
        known = KnownRecords(store.call)
        await known.load()
        committed, answered = asyncio.Event(), asyncio.Event()

        async def rename() -> None:
            async with known.writing("r1"):
                row = store.write(rec("r1", "new"))
                committed.set()
                await answered.wait()
                known.put(row)

        task = asyncio.create_task(rename())
        await committed.wait()
        read = asyncio.create_task(known.get("new"))
        await asyncio.sleep(0.01)
        assert not read.done()
        answered.set()
        assert (await read).id == "r1"
        await task
        with pytest.raises(RoostError) as gone:  # with no write in flight: not-found at once
            await known.get("nosuch")
        assert gone.value.code == "not-found"

    run(scenario())
