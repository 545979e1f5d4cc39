"""The node's copy of the session records: what its requests read, kept in memory.

While the node runs it is the records' only writer (through the state store; ``node repair`` needs
it stopped), so reads can be served from memory as long as every write it makes lands here too:
the record a write's reply carries (as committed) replaces the copy. A write that fails leaves its
record in doubt (the store may or may not have applied it: a timeout, a store that died), and the
next read of it asks the store. A record read from the store is kept only when no write of the
same record ran meanwhile (that write's reply is newer than the read), and a new state-store
incarnation drops everything: the next read loads the whole list again.

A read of a record while a write of it is in flight waits for that write to end (a name that no
copy has waits for the writes in flight: one may be the spawn or rename that gives it). The store
publishes a write's events as it commits, before its reply reaches the node, so a client that
reads a record on hearing of a change must not be answered with the copy from before it.

Values of ``env`` stay in the store: a record here has the names only, like a client sees them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import structlog

from roost.actors.state import records as r
from roost.actors.state.records import Record
from roost.wire.errors import RoostError

log = structlog.get_logger("roost.known")

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]  # a state.* request
Listener = Callable[[Record], None]  # told of every record kept (the death watch follows them)


def record_of(reply: dict[str, Any]) -> Record:
    """The record of a state-store reply, its env reduced to the names."""
    raw = dict(reply["record"])
    raw.pop("size", None)
    raw["env"] = dict.fromkeys(raw.get("env") or [], "")  # names only; values stay in the store
    return Record.from_row(raw)


class KnownRecords:
    """Records by id and name; ``get`` answers from memory once the list is loaded."""

    def __init__(self, call: Call, listener: Listener | None = None) -> None:
        self._call, self.listener = call, listener
        self._records: dict[str, Record] = {}
        self._names: dict[str, set[str]] = {}
        self._active: set[str] = set()
        self._doubt: set[str] = set()
        self._writes: Counter[str] = Counter()  # writes in flight, by record
        self._idle: dict[str, asyncio.Event] = {}  # set when a record's writes have all ended
        self._version: Counter[str] = Counter()  # bumped as each write starts and ends
        self._epoch = 0  # bumped by reset: reads begun before it are not kept
        self._store: str | None = None  # the state store's incarnation last heard of
        self._loaded = False
        self._loading: asyncio.Lock = asyncio.Lock()

    # -- reading -------------------------------------------------------------------------------

    async def get(self, ref: str) -> Record:
        """The record ``ref`` names (an id, else a unique name): ``not-found``, ``ambiguous-name``
        as the store would answer."""
        await self.load()
        while True:
            if self._doubt:
                await self._settle()
            known = ref in self._records or ref in self._writes  # by id (a create in flight too)
            record_id = ref if known else self._by_name(ref)
            if record_id is None and self._idle:  # a name no copy has yet: a write in flight
                await asyncio.wait([asyncio.ensure_future(e.wait()) for e in self._idle.values()])
                continue  # (a spawn or rename) may be giving it; answer as of their replies
            idle = self._idle.get(record_id) if record_id is not None else None
            if idle is None:
                break
            await idle.wait()  # a write of it is in flight: answer as of its reply
        if record_id is None and not self._doubt:
            raise RoostError("not-found", f"no record with id or name {ref!r}", {"ref": ref})
        if record_id is None or record_id in self._doubt:
            return record_of(await self._call("state.record.find", {"ref": ref}))
        return self._records[record_id]

    def active(self) -> list[Record]:
        """The records in an active state (a supervisor may exist), as last known, in the
        order they were created (the store lists them so)."""
        found = [self._records[i] for i in self._active]
        return sorted(found, key=lambda rec: (rec.created, rec.id))

    def counts(self) -> dict[str, int]:
        """How many records are in each state, as last known."""
        return dict(Counter(record.state for record in self._records.values()))

    @property
    def loaded(self) -> bool:
        return self._loaded

    async def load(self) -> None:
        """Read the whole list once (again after a reset)."""
        while not self._loaded:
            async with self._loading:
                if self._loaded:
                    return
                epoch, before = self._epoch, dict(self._version)
                listing = await self._call("state.record.list", {})
                if epoch != self._epoch:
                    continue  # reset meanwhile: that list may be the old store's
                for raw in listing["records"]:
                    record = record_of({"record": raw})
                    if self._quiet(record.id, before.get(record.id, 0)):
                        self._keep(record)
                self._loaded = True

    def _by_name(self, ref: str) -> str | None:
        ids = self._names.get(ref) or set()
        if len(ids) > 1:
            raise RoostError("ambiguous-name", f"{ref!r} names {len(ids)} records")
        return next(iter(ids), None)

    async def _settle(self) -> None:
        """Read each record in doubt again; kept when no write of it ran meanwhile."""
        for record_id in list(self._doubt):
            epoch, version = self._epoch, self._version[record_id]
            try:
                reply = await self._call("state.record.get", {"id": record_id})
            except RoostError as err:
                if err.code != "not-found":
                    raise
                if epoch == self._epoch and self._quiet(record_id, version):
                    self._forget(record_id)
                continue
            if epoch == self._epoch and self._quiet(record_id, version):
                self._keep(record_of(reply))

    def _quiet(self, record_id: str, version: int) -> bool:
        return self._writes[record_id] == 0 and self._version[record_id] == version

    # -- writing -------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def writing(self, record_id: str) -> AsyncIterator[None]:
        """Around a write of ``record_id``: a write that raises leaves the record in doubt."""
        self._writes[record_id] += 1
        self._version[record_id] += 1
        idle = self._idle.setdefault(record_id, asyncio.Event())
        try:
            yield
        except BaseException:
            self._doubt.add(record_id)
            raise
        finally:
            self._writes[record_id] -= 1
            self._version[record_id] += 1
            if not self._writes[record_id]:
                del self._writes[record_id]
                del self._idle[record_id]
                idle.set()

    def put(self, record: Record) -> Record:
        """A write's reply: the record as committed."""
        self._keep(record)
        return record

    def drop(self, record_id: str) -> None:
        """The record was deleted."""
        self._forget(record_id)

    def store_up(self, incarnation: str) -> None:
        """The state store (re)registered: a new incarnation opened the file afresh and may
        hold the records otherwise than remembered here, so they are read again."""
        if incarnation != self._store and self._loaded:
            log.info("records-reloaded", incarnation=incarnation)
            self.reset()
        self._store = incarnation

    def reset(self) -> None:
        """Forget everything (a new state-store incarnation): the next read loads again."""
        self._epoch += 1
        self._records.clear()
        self._names.clear()
        self._active.clear()
        self._doubt.clear()
        self._loaded = False

    def _keep(self, record: Record) -> None:
        self._unname(record.id)
        self._records[record.id] = record
        self._doubt.discard(record.id)
        if record.name is not None:
            self._names.setdefault(record.name, set()).add(record.id)
        if record.state in r.ACTIVE_STATES:
            self._active.add(record.id)
        else:
            self._active.discard(record.id)
        if self.listener is not None:
            self.listener(record)

    def _forget(self, record_id: str) -> None:
        self._unname(record_id)
        gone = self._records.pop(record_id, None)
        self._active.discard(record_id)
        self._doubt.discard(record_id)
        if gone is not None and self.listener is not None:
            self.listener(_gone(gone))

    def _unname(self, record_id: str) -> None:
        old = self._records.get(record_id)
        if old is not None and old.name is not None:
            ids = self._names.get(old.name)
            if ids is not None:
                ids.discard(record_id)
                if not ids:
                    del self._names[old.name]


def _gone(record: Record) -> Record:
    """What a listener is told of a deleted record: no longer active, nothing running."""
    return Record(record.id, record.name, record.provider, record.mode, record.cwd, state=r.DORMANT)
