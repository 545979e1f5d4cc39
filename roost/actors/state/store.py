"""The state-store actor (address ``state``): the single writer of the node's SQLite database.

Mutations go through one writer task that commits them in small groups (one transaction, a
savepoint per request, so one refused request never spoils its neighbours). Events are published
to the broker only after their transaction committed, so a subscriber never sees an event that
the log does not hold. Retention (``retention``) trims the oldest events through the same
writer, a bounded chunk at a time, and only when the log has grown (or old operation ids are
due): an idle store does not wake.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import structlog
import zmq.asyncio

from roost.actors.runtime.peer import Peer, Serving
from roost.actors.runtime.process import (
    child_args,
    run_until,
    run_until_stopped,
    setup_logging,
    watch_lifeline,
)
from roost.actors.state import db, integrity, ledger, retention
from roost.actors.state.backup import Backup
from roost.actors.state.journal import Journal, check_events, check_op
from roost.actors.state.ledger import Ledger
from roost.actors.state.records import Record
from roost.actors.state.retention import Retention
from roost.actors.state.storage import Storage
from roost.actors.state.writer import Mutation
from roost.wire import fields as f
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.limits import check_limit
from roost.wire.messages import Event

log = structlog.get_logger("roost.state")

BATCH = 64
TRIM_EVERY_S = 1.0


def event_topic(event: Event) -> str:
    return f"e/{event.get('record') or 'node'}/{event['kind']}"


def expect_state(current: Record, expected: list[str]) -> Record:
    """Compare-and-set: refuse a change to a record that is no longer in an expected state."""
    if expected and current.state not in expected:
        raise RoostError(
            "session-record-busy",
            f"record {current.id} is {current.state}",
            {"record": current.id, "state": current.state},
        )
    return current


def db_directory(conn: sqlite3.Connection) -> Path | None:
    """The directory of the connection's main database file (None in memory)."""
    row = conn.execute("PRAGMA database_list").fetchone()
    return Path(row[2]).parent if row and row[2] else None


class StateStore:
    """Serves ``state.*`` methods over one SQLite connection."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        peer: Peer,
        keep: Retention | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.conn, self.peer = conn, peer
        self.keep, self.clock = keep or Retention(), clock
        self._ops_due = 0.0
        self.storage = Storage(db_directory(conn), clock)
        self._grown = asyncio.Event()  # events were committed since the trimmer last looked
        self._queue: asyncio.Queue[tuple[Mutation, asyncio.Future[dict[str, Any]]]] = (
            asyncio.Queue()
        )
        handlers: dict[str, Serving] = {
            "state.open": self._open,
            "state.workspace.add": self._workspace_add,
            "state.workspace.list": self._workspace_list,
            "state.workspace.find": self._workspace_find,
            "state.record.create": self._record_create,
            "state.record.update": self._record_update,
            "state.record.get": self._record_get,
            "state.record.find": self._record_find,
            "state.record.list": self._record_list,
            "state.record.delete": self._record_delete,
            "state.events.append": self._events_append,
            "state.events.append_each": self._events_append_each,
            "state.events.since": self._events_since,
            **Journal(self).handlers(),
            **Ledger(self).handlers(),
        }
        if (directory := db_directory(conn)) is not None:  # in memory: nothing to copy
            handlers["state.backup"] = Backup(directory / "state.db").handle
        p.check_served(p.STATE, {*handlers, "state.backup"})  # what the table says it serves
        peer.handlers.update(handlers)

    async def writer(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while not self._queue.empty() and len(batch) < BATCH:
                batch.append(self._queue.get_nowait())
            self._commit(batch)

    def _commit(self, batch: list[tuple[Mutation, asyncio.Future[dict[str, Any]]]]) -> None:
        """One transaction for the batch. A request refused by roost's rules is rolled back
        alone; SQLite failing to write (a full disk, an I/O error, damage) fails the whole
        batch with its stable code, nothing of it committed, and the writer goes on: the next
        batch tries again, so service is back by itself once the disk has room."""
        try:
            outcomes = self._apply(batch)
        except sqlite3.Error as err:
            failure = self.storage.failed(err)
            with contextlib.suppress(sqlite3.Error):
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
            for _, future in batch:
                if not future.done():
                    future.set_exception(RoostError(failure.code, failure.message, failure.detail))
            return
        self.storage.committed()
        for future, result, events in outcomes:
            if events:
                self._grown.set()
            for event in events:
                self.peer.publish(event_topic(event), cast(dict[str, Any], event))
            if future.done():
                continue
            if isinstance(result, RoostError):
                future.set_exception(result)
            else:
                future.set_result(result)

    def _apply(
        self, batch: list[tuple[Mutation, asyncio.Future[dict[str, Any]]]]
    ) -> list[tuple[asyncio.Future[dict[str, Any]], Any, list[Event]]]:
        outcomes: list[tuple[asyncio.Future[dict[str, Any]], Any, list[Event]]] = []
        self.conn.execute("BEGIN IMMEDIATE")
        for mutation, future in batch:
            self.conn.execute("SAVEPOINT op")
            try:
                result, events = mutation()
                self.conn.execute("RELEASE op")
                outcomes.append((future, result, events))
            except (RoostError, ValueError, KeyError, TypeError) as err:
                if not isinstance(err, RoostError):  # a bug in one request spoils only it
                    log.exception("mutation-failed")
                    err = RoostError("internal", "the state store could not apply the request")
                self.conn.execute("ROLLBACK TO op")
                self.conn.execute("RELEASE op")
                outcomes.append((future, err, []))
        self.conn.execute("COMMIT")
        return outcomes

    async def trimmer(self, every: float = TRIM_EVERY_S) -> None:
        """Retention, through the writer: one bounded chunk per write, so the writes queued
        meanwhile go between chunks; then a pause while nothing is due."""
        while True:
            self._grown.clear()
            try:
                step = await self.write(self.trim_step)
            except RoostError:  # storage-full and the like: the writer logged it; try later
                step = {"more": False}
                self._grown.set()
            if not step["more"]:
                await asyncio.sleep(every)
                await self._until_due()

    async def _until_due(self) -> None:
        """Until events were committed, or the operation ids are due to be looked at."""
        if self._grown.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._grown.wait(), max(0.0, self._ops_due - self.clock()))

    def trim_step(self) -> tuple[dict[str, Any], list[Event]]:
        """Delete one chunk of events past the limit and, every ``OPS_EVERY_S``, the operation
        ids older than ``OPS_KEEP_S``. Nothing is published: retention is not an event."""
        now, ops = self.clock(), 0
        if now >= self._ops_due:
            ops = retention.trim_ops(self.conn, now - retention.OPS_KEEP_S)
            self._ops_due = now + retention.OPS_EVERY_S
        upto = self.keep.plan(*db.seq_range(self.conn))
        events = 0 if upto is None else retention.trim_events(self.conn, upto)
        if events or ops:
            log.info("trimmed", events=events, upto=upto, ops=ops)
        return {"more": upto is not None and upto < self.keep.target}, []

    async def write(self, mutation: Mutation) -> dict[str, Any]:
        return await self._queued(mutation)

    def _queued(self, mutation: Mutation) -> asyncio.Future[dict[str, Any]]:
        """``mutation`` in the writer's queue (unbounded: never waits); its outcome's future."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((mutation, future))
        return future

    def append(self, events: list[Event]) -> list[Event]:
        """Append; returns only the events newly written (re-sent spooled ones are skipped)."""
        written = [db.append_event(self.conn, e) for e in events]
        return [e for e in written if not e.get("duplicate")]

    # -- handlers ------------------------------------------------------------------------------

    async def _open(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        first, last = db.seq_range(self.conn)
        return {
            "node_id": db.get_meta(self.conn, "node_id"),
            "schema": db.SCHEMA_VERSION,
            "last_seq": last,
            "first_seq": first,
            "retain_events": self.keep.limit,
            "storage": self.storage.status(),
        }

    async def _workspace_add(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        path, name = f.req_str(body, "path"), f.opt_str(body, "name", max_len=128)

        def mutation() -> tuple[dict[str, Any], list[Event]]:
            before = db.find_workspace(self.conn, path)
            ws, change = db.add_workspace(self.conn, path, name)
            events: list[Event] = []
            if change == "added":
                events = [{"kind": "workspace.added", "data": ws}]
            elif change == "renamed" and before is not None:
                renamed = {"id": ws["id"], "path": path, "from": before["name"], "to": name}
                events = [{"kind": "workspace.renamed", "data": renamed}]
            reply = {"workspace": ws, "created": change == "added", "renamed": change == "renamed"}
            return reply, self.append(events)

        return await self.write(mutation)

    async def _workspace_list(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        return {"workspaces": db.list_workspaces(self.conn)}

    async def _workspace_find(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        return {"workspace": db.find_workspace(self.conn, f.req_str(body, "ref"))}

    async def _record_create(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        record = Record.from_row(f.opt_map(body, "record"))
        events = check_events(body)

        def mutation() -> tuple[dict[str, Any], list[Event]]:
            record.created = record.updated = time.time()
            db.insert_record(self.conn, record)
            for event in events:  # a fork starts from its source's usage: see ledger.seed_fork
                origin = (event.get("data") or {}).get("fork")
                if event.get("kind") == "record.created" and isinstance(origin, dict):
                    ledger.seed_fork(self.conn, record.id, origin)
            return {"record": record.to_wire()}, self.append(events)

        return await self.write(mutation)

    async def _record_update(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        record_id = f.req_str(body, "id")
        changes = f.opt_map(body, "set")
        expect_states = f.str_list(body, "expect_states")
        expect_generation = f.opt_int(body, "expect_generation")
        events = check_events(body)

        def mutation() -> tuple[dict[str, Any], list[Event]]:
            current = expect_state(db.get_record(self.conn, record_id), expect_states)
            if expect_generation is not None and current.generation != expect_generation:
                raise RoostError(
                    "stale-generation",
                    f"record {record_id} is at generation {current.generation}",
                    {"generation": current.generation},
                )
            db.update_record(self.conn, record_id, {**changes, "updated": time.time()})
            record = db.get_record(self.conn, record_id)
            return {"record": record.to_wire(), "previous": current.to_wire()}, self.append(events)

        return await self.write(mutation)

    async def _record_get(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        record = db.get_record(self.conn, f.req_str(body, "id"))
        return {"record": record.to_wire(), "env": record.env}

    async def _record_find(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        record = db.find_record(self.conn, f.req_str(body, "ref"))
        return {"record": record.to_wire(), "env": record.env}

    async def _record_list(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        used = ledger.totals(self.conn)
        return {
            "records": [
                {**r.to_wire(), "usage": used.get(r.id)} for r in db.list_records(self.conn)
            ]
        }

    async def _record_delete(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        record_id = f.req_str(body, "id")
        expect_states = f.str_list(body, "expect_states")
        events = check_events(body)

        def mutation() -> tuple[dict[str, Any], list[Event]]:
            current = expect_state(db.get_record(self.conn, record_id), expect_states)
            db.delete_record(self.conn, record_id)
            return {"record": current.to_wire()}, self.append(events)

        return await self.write(mutation)

    async def _events_append(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """Append events; with ``op``, record the operation in the same transaction, and a
        repeated operation id returns the first outcome without appending anything. A request
        whose first event's ``eid`` is in the log already is this same request again (its
        sender did not hear the answer): ``{seqs, repeated: true}``, nothing appended."""
        return await self.write(self._append_mutation(body))

    async def _events_append_each(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """``items``: up to ``BATCH`` bodies of ``state.events.append``, each applied as that
        request would be (in order, in the writer's next transaction, each in a savepoint of its
        own): ``{results}``, for each ``{ok: its answer}`` or ``{error: {code, message,
        detail}}``. The node's group commit: inputs committed while the one before is on its way
        go together, one request and one answer for them all."""
        items = body.get("items")
        if not isinstance(items, list) or not 0 < len(items) <= BATCH:
            raise RoostError(
                "bad-request", f"field 'items' must be a list of 1 to {BATCH}", {"field": "items"}
            )
        # every item queued before the first is awaited: the writer takes them in one batch
        queued: list[asyncio.Future[dict[str, Any]] | dict[str, Any]] = []
        for item in items:
            try:
                if not isinstance(item, dict):
                    raise RoostError("bad-request", "each item is a map", {"field": "items"})
                queued.append(self._queued(self._append_mutation(item)))
            except RoostError as err:  # refused alone, before it was queued
                queued.append({"error": err.to_body()})
        results: list[dict[str, Any]] = []
        for entry in queued:
            if isinstance(entry, dict):
                results.append(entry)
                continue
            try:
                results.append({"ok": await entry})
            except RoostError as err:
                results.append({"error": err.to_body()})
        return {"results": results}

    def _append_mutation(self, body: dict[str, Any]) -> Mutation:
        events = check_events(body)
        op = check_op(body)

        def mutation() -> tuple[dict[str, Any], list[Event]]:
            if events and (again := _repeated(self.conn, events)) is not None:
                return {"seqs": again, "repeated": True}, []
            if op is not None and (seen := db.get_op(self.conn, op["id"])) is not None:
                return {
                    "duplicate": True,
                    "op": seen,
                    "seqs": (seen["result"] or {}).get("seqs", []),
                }, []
            written = [db.append_event(self.conn, e) for e in events]
            seqs = [e["seq"] for e in written]
            if op is not None:
                op["result"] = {**(op.get("result") or {}), "seqs": seqs}
                db.put_op(self.conn, op)
            return {"seqs": seqs}, [e for e in written if not e.get("duplicate")]

        return mutation

    async def _events_since(self, h: p.Header, body: dict[str, Any]) -> p.Packed:
        after = f.opt_int(body, "after") or 0
        limit = f.opt_int(body, "limit", lo=1, hi=5000) or 1000
        record_id = f.opt_str(body, "record")
        try:
            events, more = db.events_page(self.conn, after, limit, record_id)
        except ValueError as err:
            raise integrity.damaged(f"events after seq {after}: {err}") from None
        first, last = db.seq_range(self.conn)
        # Seqs are contiguous but for what retention trimmed from the front, so seqs after
        # ``after`` are missing exactly when ``first`` is past ``after + 1``. With ``record`` the
        # gap is node-wide: the dropped events may or may not have included that record's.
        # The events are stored bytes, spliced in: the reply is built here, packed, and the node
        # relays it as it is.
        head = {"more": more, "last_seq": last, "first_seq": first, "gap": after + 1 < first}
        return p.Packed(db.packed_map(head, "events", events))


def _repeated(conn: sqlite3.Connection, events: list[Event]) -> list[int] | None:
    """The seqs of ``events`` when the first one's ``eid`` is in the log (they were appended
    together, so all of them are), else None."""
    eid = events[0].get("eid")
    if not eid or db.event_seq(conn, eid) is None:
        return None
    seqs = [db.event_seq(conn, e["eid"]) if e.get("eid") else None for e in events]
    return [s for s in seqs if s is not None]


async def serve(args: argparse.Namespace, stop: asyncio.Event) -> None:
    state_dir = Path(args.state_dir)
    # the daemon has just checked the file before this first start; a restart checks again
    conn, _ = db.open_db(state_dir / "state.db", args.node_id, check=not args.checked)
    given = None if args.retain_events is None else check_limit(args.retain_events)
    keep = Retention(retention.load_limit(conn, given))
    ctx = zmq.asyncio.Context()
    peer = Peer(
        ctx,
        args.endpoint,
        "state",
        os.environ.get("ROOST_ACTOR_TOKEN", ""),
        incarnation=os.urandom(6).hex(),
        meta={"pid": os.getpid()},
    )
    store = StateStore(conn, peer, keep)
    watch_lifeline(args.lifeline, stop.set)
    try:  # a crashed writer (or trimmer, or link) ends the store; the daemon starts a new one
        await run_until(stop, peer.run(), store.writer(), store.trimmer())
    finally:
        conn.close()
        ctx.destroy(0)


def main() -> None:
    args = child_args(
        "roost-state", "--node-id", optional=("--retain-events",), flags=("--checked",)
    )
    setup_logging(Path(args.state_dir) / "logs" / "state.log", "state")
    run_until_stopped(lambda stop: serve(args, stop))


if __name__ == "__main__":
    main()
