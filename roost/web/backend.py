"""The web server's side of the wire: one node (or hub) seen by many browsers.

Requests go through a small pool of ``Client`` connections, each used by one worker thread at a
time (the client library is synchronous), so a slow answer never holds up the event loop. Events
and output come in on one SUB socket (``zmq.asyncio``), subscribed before the list is read, as
``roost events --follow`` does: the log is de-duplicated by ``seq`` and a jump in it (or a node
that restarted) reads the whole list again.

Every browser is a ``Feed`` (the list) and zero or more ``Term`` (a session's terminal). Each has a
bounded queue that the SUB socket's reader only ever appends to without waiting: a viewer that
cannot keep up drops its queue and catches up on its own (the list read again; the terminal from
the transcript, by offset), so it never slows the agent, the node or another viewer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import zmq
import zmq.asyncio

from roost.client.client import Client
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.policy import HUB, node_address

Key = tuple[str, str]  # (node id or "", record id)
NODES_S = 5.0  # through a hub: how often the linked nodes are asked for (a node that links later)
CHECK_S = 3.0  # silence after which the node (or hub) is asked whether it is still the same one
CALL_S = 15.0
FEED_QUEUE = 512  # list messages a browser may fall behind by before it is sent the whole list
TERM_QUEUE_BYTES = 1 << 20  # output bytes a terminal may fall behind by before it resynchronises
READ_LIMIT = 262144  # transcript bytes per session.transcript
ENDED = ("dormant", "failed")
Send = Callable[[Any], Awaitable[None]]  # a JSON-able dict, or bytes (a binary frame)


def key_text(key: Key) -> str:
    return f"{key[0]}/{key[1]}" if key[0] else key[1]


@dataclass
class Entry:
    """One record and what the page shows beside it."""

    record: dict[str, Any]
    last_activity: float
    turn: bool = False  # stream mode: a turn runs

    def doc(self, key: Key) -> dict[str, Any]:
        return {
            "key": key_text(key),
            "node": key[0],
            "record": self.record,
            "last_activity": self.last_activity,
            "turn": self.turn,
        }


class Feed:
    """One browser's list: JSON messages in a bounded queue; on overflow, the whole list."""

    def __init__(self) -> None:
        self.items: deque[dict[str, Any]] = deque()
        self.wake = asyncio.Event()
        self.overflowed = False

    def offer(self, message: dict[str, Any]) -> None:
        if len(self.items) >= FEED_QUEUE:
            self.items.clear()
            self.overflowed = True
        else:
            self.items.append(message)
        self.wake.set()


class Backend:
    def __init__(
        self,
        connect: Callable[[], Client],
        workers: int = 8,
        observer: Callable[[], Client] | None = None,
    ) -> None:
        self._connect = connect
        self._idle: list[Client] = []
        # the connections of the pages logged in with the observer token (--observer-token-file)
        self._observer = observer
        self._idle_observer: list[Client] = []
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="roost-web")
        self.info: dict[str, Any] = {}
        self.target = "node"
        self.topic_prefix = ""
        self.events_endpoint = ""
        self._curve: Any = None
        self.entries: dict[Key, Entry] = {}
        self.feeds: set[Feed] = set()
        self.listeners: list[Callable[[dict[str, Any]], None]] = []  # every notice (web push)
        self.terms: dict[Key, set[Term]] = {}
        self.seqs: dict[str, int] = {}
        self.nodes: set[str] = set()  # through a hub: the nodes whose events are subscribed to
        self._dirty: set[Key] = set()
        self._dirty_wake = asyncio.Event()
        self._relist = asyncio.Event()
        self._sub: zmq.asyncio.Socket | None = None
        self._zctx = zmq.asyncio.Context()
        self._tasks: list[asyncio.Task[None]] = []
        self.connected = True

    @property
    def role(self) -> str:
        return str(self.info.get("role") or "operator")

    @property
    def hub(self) -> bool:
        return self.target == HUB

    # -- requests ---------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        client = await loop.run_in_executor(self._pool, self._connect)
        self.info, self.target = dict(client.info), client.target
        self.topic_prefix, self.events_endpoint = client.topic_prefix, client.events_endpoint
        self._curve = client.curve
        self._idle.append(client)
        self._subscribe()
        await self.relist()
        self._tasks = [
            asyncio.create_task(self._read_events()),
            asyncio.create_task(self._refresher()),
        ]
        if self.hub:
            self._tasks.append(asyncio.create_task(self._new_nodes()))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._sub is not None:
            self._sub.close(0)
        self._pool.shutdown(wait=True, cancel_futures=True)
        for client in [*self._idle, *self._idle_observer]:
            client.close()
        self._zctx.term()

    async def call(
        self,
        method: str,
        body: dict[str, Any],
        node: str = "",
        timeout: float = CALL_S,
        *,
        observer: bool = False,
    ) -> dict[str, Any]:
        """One request to the node (through a hub: to ``node``, or the hub itself); with
        ``observer``, on a connection with the node's observer role, which the node refuses
        anything but reading."""
        loop = asyncio.get_running_loop()
        call = functools.partial(self._call, method, body, node, timeout, observer)
        return await loop.run_in_executor(self._pool, call)

    def _call(
        self, method: str, body: dict[str, Any], node: str, timeout: float, observer: bool = False
    ) -> dict[str, Any]:
        idle, connect = self._idle, self._connect
        if observer:
            if self._observer is None:
                raise RoostError("forbidden", "an observer's page only watches")
            idle, connect = self._idle_observer, self._observer
        client = idle.pop() if idle else connect()
        target = node_address(node) if node else ""
        try:
            try:
                return client.call(method, body, target=target, timeout=timeout)
            except RoostError as err:
                if err.code != "not-initialized":  # the node restarted: once more, anew
                    raise
                client.initialize()
                return client.call(method, body, target=target, timeout=timeout)
        finally:
            idle.append(client)

    def _check(self) -> dict[str, Any]:
        client = self._idle.pop() if self._idle else self._connect()
        try:
            info = client.initialize(timeout=5.0)
            return {**info, "events": client.events_endpoint}
        finally:
            self._idle.append(client)

    # -- the list ---------------------------------------------------------------------------

    async def relist(self) -> None:
        """The whole list again (at start, after a jump in the log or a restart); through a
        hub, every linked node's events are followed first."""
        if self.hub:
            await self._follow_nodes()
        doc = await self.call("session.list", {})
        keep = set(doc.get("unanswered") or [])
        old = self.entries
        self.entries = {k: e for k, e in old.items() if k[0] in keep}
        for rec in doc["records"]:
            key = (str(rec.get("node") or ""), str(rec["id"]))
            before = old.get(key)
            last = float(rec.get("updated") or 0.0)
            entry = Entry(rec, max(last, before.last_activity) if before else last)
            entry.turn = before.turn if before else False
            self.entries[key] = entry
        self.broadcast(self.snapshot())

    def snapshot(self) -> dict[str, Any]:
        return {
            "t": "list",
            "entries": [e.doc(k) for k, e in self.entries.items()],
            "connected": self.connected,
        }

    def broadcast(self, message: dict[str, Any]) -> None:
        for feed in self.feeds:
            feed.offer(message)

    async def _refresher(self) -> None:
        """Reads again the records events were about, each once however many came."""
        while True:
            await self._dirty_wake.wait()
            self._dirty_wake.clear()
            if self._relist.is_set():
                self._relist.clear()
                self._dirty.clear()
                with contextlib.suppress(RoostError):
                    await self.relist()
                continue
            keys, self._dirty = self._dirty, set()
            for key in keys:
                await self._reread(key)

    async def _reread(self, key: Key) -> None:
        try:
            doc = await self.call("session.show", {"id": key[1]}, key[0])
        except RoostError as err:
            if err.code == "not-found":
                self._forget(key)
            return
        rec = {**doc["record"], "usage": doc.get("usage")}
        if key[0]:
            rec["node"] = key[0]
        entry = self.entries.get(key)
        before = (entry.record["state"], entry.record.get("attention")) if entry else None
        if entry is None:
            entry = self.entries[key] = Entry(rec, float(rec.get("updated") or time.time()))
        entry.record = rec
        self.broadcast({"t": "record", "entry": entry.doc(key)})
        now = (rec["state"], rec.get("attention"))
        if rec["state"] == "attention" and before != now:
            reason = f" ({rec['attention']})" if rec.get("attention") else ""
            self.notice(key, "attention", f"needs attention{reason}")

    def _forget(self, key: Key) -> None:
        if self.entries.pop(key, None) is not None:
            self.broadcast({"t": "gone", "key": key_text(key)})

    def notice(self, key: Key, kind: str, text: str) -> None:
        entry = self.entries.get(key)
        name = (entry.record.get("name") if entry else None) or key[1]
        message = {"t": "notice", "kind": kind, "key": key_text(key), "name": name, "text": text}
        self.broadcast(message)
        for listener in self.listeners:
            listener(message)

    # -- events and output ------------------------------------------------------------------

    def _subscribe(self) -> None:
        """The events (through a hub: each followed node's) and the output of the sessions a
        page shows, nothing more: a session's output is published only while someone
        subscribes to it."""
        if self._sub is not None:
            self._sub.close(0)
        sock = self._zctx.socket(zmq.SUB)
        sock.setsockopt(zmq.LINGER, 0)
        if self._curve is not None:
            self._curve.apply(sock)
        events = [f"{node}/e/" for node in self.nodes] if self.hub else [self.topic_prefix + "e/"]
        # a hub with no node followed yet: "hub/" matches nothing (no node is called hub)
        for topic in [*(events or ["hub/"]), *map(self._output_topic, self.terms)]:
            sock.setsockopt(zmq.SUBSCRIBE, topic.encode())
        sock.connect(self.events_endpoint)
        self._sub = sock

    def _output_topic(self, key: Key) -> str:
        return f"{key[0]}/o/{key[1]}" if self.hub else f"{self.topic_prefix}o/{key[1]}"

    async def _follow_nodes(self) -> None:
        """Through a hub: subscribe to the events of every node linked now."""
        doc = await self.call("hub.nodes", {})
        for item in doc.get("nodes") or []:
            node = str(item.get("node_id") or "")
            if node and item.get("linked") and node not in self.nodes:
                self.nodes.add(node)
                if self._sub is not None:
                    self._sub.setsockopt(zmq.SUBSCRIBE, f"{node}/e/".encode())

    async def _new_nodes(self) -> None:
        """Through a hub: a node that links later is followed, and its records listed, within
        ``NODES_S`` (the hub publishes nothing of its own to say so)."""
        while True:
            await asyncio.sleep(NODES_S)
            known = set(self.nodes)
            with contextlib.suppress(RoostError):
                await self._follow_nodes()
            if self.nodes != known:
                self._relist.set()
                self._dirty_wake.set()

    def watch(self, term: Term) -> None:
        watchers = self.terms.setdefault(term.key, set())
        if not watchers and self._sub is not None:
            self._sub.setsockopt(zmq.SUBSCRIBE, self._output_topic(term.key).encode())
        watchers.add(term)

    def unwatch(self, term: Term) -> None:
        watchers = self.terms.get(term.key)
        if watchers is None:
            return
        watchers.discard(term)
        if not watchers:
            del self.terms[term.key]
            if self._sub is not None:
                self._sub.setsockopt(zmq.UNSUBSCRIBE, self._output_topic(term.key).encode())

    async def _read_events(self) -> None:
        loop = asyncio.get_running_loop()
        heard = time.monotonic()
        while True:
            sub = self._sub
            assert sub is not None
            if await sub.poll(1000):
                frames = await sub.recv_multipart()
                heard = time.monotonic()
                if len(frames) == 3:
                    with contextlib.suppress(Exception):  # one bad message never stops the feed
                        self._dispatch(frames[0].decode(errors="replace"), frames[2])
                continue
            if time.monotonic() - heard < CHECK_S:
                continue
            heard = time.monotonic()
            try:
                info = await loop.run_in_executor(self._pool, self._check)
            except RoostError:
                self._connection(False)
                continue
            self._connection(True)
            if (info.get("incarnation"), info["events"]) != (
                self.info.get("incarnation"),
                self.events_endpoint,
            ):
                self.info.update(info)
                self.events_endpoint = info["events"]
                self._subscribe()
                self.seqs.clear()
                self._relist.set()
                self._dirty_wake.set()
                for watchers in self.terms.values():
                    for term in watchers:
                        term.stale()

    def _connection(self, up: bool) -> None:
        if up != self.connected:
            self.connected = up
            self.broadcast({"t": "connection", "connected": up})

    def _dispatch(self, topic: str, raw: bytes) -> None:
        topic = topic.removeprefix(self.topic_prefix)
        node = ""
        if self.hub:
            node, _, topic = topic.partition("/")
        body = p.unpack(raw, limit=p.HARD_FRAME_LIMIT)
        if topic.startswith("o/"):
            for term in self.terms.get((node, topic[2:]), ()):
                term.offer(body.get("offset"), body.get("data"))
        elif topic.startswith("e/"):
            self._event(node, body)

    def _event(self, node: str, event: dict[str, Any]) -> None:
        seq, last = int(event["seq"]), self.seqs.get(node)
        if last is not None and seq <= last:
            return
        self.seqs[node] = seq
        gap = last is not None and seq > last + 1
        kind, rid, data = event["kind"], event.get("record"), event.get("data") or {}
        if gap or kind == "node.started":
            self._relist.set()
            self._dirty_wake.set()
            if kind == "node.started":
                for watched, watchers in self.terms.items():
                    if watched[0] == node:
                        for term in watchers:
                            term.stale()
        if not rid:
            return
        key = (node, str(rid))
        if kind == "record.forgotten":
            self._forget(key)
            return
        entry = self.entries.get(key)
        if entry is not None:
            entry.last_activity = max(entry.last_activity, float(event.get("ts") or 0.0))
            if kind == "session.input" and data.get("input") == "turn":
                entry.turn = True
            elif kind in ("session.turn", "session.exited", "session.lost"):
                entry.turn = False
        self._dirty.add(key)
        self._dirty_wake.set()
        if kind == "session.classified" and data.get("turn_end"):
            self.notice(key, "turn", "ended a turn")
        elif kind == "session.turn":
            self.notice(key, "turn", f"turn {data.get('status')}")
        elif kind == "record.state" and data.get("to") in ENDED:
            for term in self.terms.get(key, ()):
                term.ended(str(data["to"]))


@dataclass(eq=False)  # hashed by identity: a set holds a record's viewers
class Term:
    """One browser's view of one session's terminal, as ``roost attach`` draws it: the screen,
    then the output by transcript offset; a hole, an overflow or a reconnection is filled from the
    transcript, so every byte is shown once."""

    backend: Backend
    key: Key
    send: Send
    expected: int = -1  # the transcript offset of the next byte to show; -1: draw the screen
    items: deque[tuple[int, bytes]] = field(default_factory=deque)
    size: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    resync: bool = False
    redraw: bool = False
    done: str = ""

    def offer(self, offset: Any, data: Any) -> None:
        """From the SUB reader: never waits; past the bound, the queue goes and the view
        resynchronises from the transcript."""
        if not isinstance(offset, int) or not isinstance(data, bytes):
            return
        if self.size + len(data) > TERM_QUEUE_BYTES:
            self.items.clear()
            self.size = 0
            self.resync = True
        else:
            self.items.append((offset, data))
            self.size += len(data)
        self.wake.set()

    def stale(self) -> None:
        """The node restarted: read what was missed from the transcript."""
        self.resync = True
        self.wake.set()

    def ended(self, state: str) -> None:
        self.done = state
        self.wake.set()

    async def run(self) -> None:
        """Until the session ends or the browser goes (the caller cancels it)."""
        if self.expected < 0:
            await self.draw()
        else:
            await self.fill(None)
        while True:
            await self.wake.wait()
            self.wake.clear()
            if self.resync:
                self.resync = False
                self.items.clear()
                self.size = 0
                await self.fill(None)
            while self.items:
                offset, data = self.items.popleft()
                self.size -= len(data)
                await self.output(offset, data)
            if self.done:
                await self.send({"t": "ended", "state": self.done})
                return

    async def draw(self) -> None:
        doc = await self.backend.call(
            "session.show", {"id": self.key[1], "screen": True}, self.key[0]
        )
        if doc.get("screen") is None:
            raise RoostError("session-not-live", f"{self.key[1]} has no live session to show")
        self.expected = int(doc.get("offset") or 0)
        await self.send(
            {
                "t": "screen",
                "screen": doc["screen"],
                "cursor": doc.get("cursor") or {"row": 0, "col": 0},
                "offset": self.expected,
            }
        )

    async def output(self, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if end <= self.expected:
            return
        if offset > self.expected:  # a hole: the transcript has the bytes between
            await self.fill(offset)
            if end <= self.expected:
                return
            if offset > self.expected:
                offset = self.expected  # cannot happen unless bytes were dropped
        await self.frame(self.expected, data[self.expected - offset :])

    async def frame(self, offset: int, data: bytes) -> None:
        self.expected = offset + len(data)
        await self.send(offset.to_bytes(8, "big") + data)

    async def fill(self, upto: int | None) -> None:
        """The transcript from ``expected`` to ``upto`` (or its end); bytes gone from it
        (rotated away) redraw the screen instead."""
        while upto is None or self.expected < upto:
            body = {"id": self.key[1], "offset": self.expected, "limit": READ_LIMIT}
            doc = await self.backend.call("session.transcript", body, self.key[0])
            if doc.get("dropped") or int(doc["offset"]) != self.expected:
                await self.draw()
                return
            data = bytes(doc.get("data") or b"")
            if not data:
                return
            await self.frame(self.expected, data)
            if self.expected >= int(doc["end"]):
                return


def dumps(message: dict[str, Any]) -> str:
    return json.dumps(message, default=str)
