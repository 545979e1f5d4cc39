"""The dashboard's wire side: one thread that follows the node's (or every node's) events.

It keeps the slow-joiner rule of ``roost events --follow``: subscribe to ``e/`` first, note the
log's ``last_seq``, read the list once (``session.list``), then read the log after that seq and
take PUB events de-duplicated by seq, filling any hole from the log. The list is never asked
again: an event about a record makes that record dirty and the feed asks for it alone
(``session.show``) once the burst has been read. The selected record's screen comes the same way:
its output topic (``o/<record>``) and its events make the preview dirty, and the feed fetches the
screen at most every ``PREVIEW_S``. After a few seconds of silence it asks whether the node (or
hub) is the same one (``roost.cli.liveness``), and after a restart subscribes and reads again.

Through a hub every linked node is followed: topics arrive as ``<node-id>/e/...``, each node has
its own sequence numbers, and requests go to ``<node-id>/node``. A node that links after the
dashboard started is found at the next silence check (``hub.nodes``).

What it learns goes to ``post`` as ``Batch``, ``Preview``, ``Health`` and ``Note`` values, from its
thread; the dashboard turns them into Textual messages.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import zmq

from roost.cli.board import Key
from roost.cli.liveness import TRANSIENT, Liveness
from roost.client.client import Client, EventStream
from roost.wire.errors import RoostError

POLL_S = 0.1  # how long the thread waits on its socket before it looks at the selection again
PREVIEW_S = 0.1  # the preview's screen is fetched at most this often
SHOW_S = 5.0  # deadline of each record or screen fetch


@dataclass
class Batch:
    """What a burst of events changed: records loaded or fetched anew, records gone, events."""

    records: list[dict[str, Any]] = field(default_factory=list)
    listed: list[str] | None = None  # the nodes whose whole lists ``records`` are, else changes
    removed: list[Key] = field(default_factory=list)
    events: list[tuple[Key, dict[str, Any]]] = field(default_factory=list)
    unanswered: dict[str, str] = field(default_factory=dict)  # through a hub


@dataclass
class Preview:
    key: Key
    screen: str
    live: bool  # the live screen (else the last one saved, or a note)
    cursor: int | None = None  # the cursor's row on a live screen


@dataclass
class Health:
    """Whether the node (or hub) answers: ``since`` is the wall-clock time it last answered
    while it does not, None once it answers again."""

    since: float | None


@dataclass
class Note:
    text: str
    error: bool = False


class Feed:
    """Owns ``client`` (and its sockets) from ``start`` on; ``select`` and ``stop`` are the only
    calls from other threads."""

    def __init__(self, client: Client, post: Callable[[object], None]) -> None:
        self.client, self.post = client, post
        self.hub = client.target == "hub"
        self.nodes: list[str] = []
        self.last: dict[str, int] = {}
        self.stream: EventStream | None = None
        self.dirty: set[Key] = set()
        self.wanted: tuple[Key, str] | None = None  # (key, mode) the user selected
        self.shown: tuple[Key, str] | None = None
        self.preview_due = False
        self.preview_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="roost-tui-feed", daemon=True)
        self.answered = time.time()  # when the node (or hub) last answered or published
        self.alive = Liveness(client, float("inf"), note=self._health)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def select(self, key: Key | None, mode: str = "") -> None:
        self.wanted = (key, mode) if key is not None else None

    def _health(self, _text: str) -> None:
        """Liveness's note, said once when the node stops answering and once when it is back."""
        lost = self.alive.lost_at is not None
        self.post(Health(self.answered if lost else None))

    # the thread

    def _run(self) -> None:
        try:
            self._begin()
            while not self._stop.is_set():
                self._step()
        except RoostError as err:
            self.post(Note(f"{err.code}: {err.message}", error=True))
        except zmq.ContextTerminated:
            pass
        finally:
            if self.stream is not None:
                self.stream.close()
            self.client.close()

    def _begin(self) -> None:
        self.nodes = self._linked() if self.hub else [""]
        self._subscribe()
        self.last = {node: self._last_seq(node) for node in self.nodes}
        listed = self.client.call("session.list")
        unanswered = listed.get("unanswered") or {}
        self.post(Batch(listed["records"], listed=list(self.nodes), unanswered=unanswered))
        for node in self.nodes:
            self._catch_up(node)

    def _step(self) -> None:
        assert self.stream is not None
        if self.wanted != self.shown:
            self._switch()
        timeout = POLL_S if not self.preview_due else min(POLL_S, PREVIEW_S / 2)
        batch = Batch()
        try:
            got = self.stream.recv(timeout)
            while got is not None:
                self.alive.heard()
                self.answered = time.time()
                self._message(got[0], got[1], batch)
                got = self.stream.recv(0)
            self._settle(batch)
        except RoostError as err:  # a restart under way: what is dirty is fetched later
            self.alive.lost(err)
        if self.alive.due():
            self._recheck()

    def _message(self, topic: str, body: dict[str, Any], batch: Batch) -> None:
        node, rest = ("", topic)
        if self.hub:
            node, _, rest = topic.partition("/")
        if rest.startswith("o/"):
            if self.shown is not None and self.shown[0] == (node, rest[2:]):
                self.preview_due = True
            return
        if node not in self.last or not isinstance(body.get("seq"), int):
            return
        if body["seq"] > self.last[node] + 1:  # a hole on PUB: the log has what fell in it
            self._catch_up(node, batch)
        elif body["seq"] == self.last[node] + 1:
            self._event(node, body, batch)

    def _event(self, node: str, event: dict[str, Any], batch: Batch) -> None:
        self.last[node] = int(event["seq"])
        rid = event.get("record")
        if not rid:
            return
        key = (node, str(rid))
        if event["kind"] == "record.forgotten":
            self.dirty.discard(key)
            batch.removed.append(key)
        else:
            self.dirty.add(key)
        batch.events.append((key, event))
        if self.shown is not None and self.shown[0] == key:
            self.preview_due = True

    def _settle(self, batch: Batch) -> None:
        """Fetch the dirty records, post what changed, then the preview when it is due."""
        try:
            self._fetch_dirty(batch)
        finally:  # what was fetched before a failure is posted all the same
            if batch.records or batch.removed or batch.events:
                self.post(batch)
        if self.preview_due and time.monotonic() - self.preview_at >= PREVIEW_S:
            self._preview()

    def _fetch_dirty(self, batch: Batch) -> None:
        while self.dirty:
            key = next(iter(self.dirty))
            try:
                rec = self._call(key[0], "session.show", {"id": key[1]}, timeout=SHOW_S)["record"]
            except RoostError as err:
                if err.code != "not-found":
                    raise
                batch.removed.append(key)
            else:
                batch.records.append({**rec, "node": key[0]} if self.hub else rec)
            self.dirty.discard(key)

    def _switch(self) -> None:
        """The selection moved: follow the new record's output instead of the old one's."""
        assert self.stream is not None
        old, self.shown = self.shown, self.wanted
        if old is not None and old[1] == "pty":
            self.stream.socket.setsockopt(zmq.UNSUBSCRIBE, self._output_topic(old[0]))
        if self.shown is not None and self.shown[1] == "pty":
            self.stream.socket.setsockopt(zmq.SUBSCRIBE, self._output_topic(self.shown[0]))
        self.preview_due = self.shown is not None

    def _preview(self) -> None:
        self.preview_due, self.preview_at = False, time.monotonic()
        if self.shown is None:
            return
        key = self.shown[0]
        try:
            doc = self._call(key[0], "session.show", {"id": key[1], "screen": True}, timeout=SHOW_S)
        except RoostError as err:
            if err.code not in (*TRANSIENT, "not-found"):
                raise
            self.post(Preview(key, f"(no screen: {err.code})", live=False))
            return
        if doc.get("screen") is not None:
            cursor = (doc.get("cursor") or {}).get("row")
            row = cursor if isinstance(cursor, int) else None
            self.post(Preview(key, str(doc["screen"]), live=True, cursor=row))
        elif doc.get("last_screen") is not None:
            self.post(Preview(key, str(doc["last_screen"]), live=False))
        else:
            self.post(Preview(key, f"(no screen: {doc['record']['state']})", live=False))

    def _recheck(self) -> None:
        """After a silence: subscribe again if the node (or hub) restarted, look for nodes that
        linked meanwhile (through a hub), and read what the log has after each last seq."""
        changed = self.alive.check()
        if changed is None:
            return
        self.answered = time.time()
        try:
            if changed:
                self._subscribe()
            new = [n for n in self._linked() if n not in self.last] if self.hub else []
            for node in new:
                self._join(node)
            batch = Batch()
            for node in self.nodes:
                self._catch_up(node, batch)
            self._settle(batch)
        except RoostError as err:
            self.alive.lost(err)  # through a hub: a node's link not back yet (unreachable)
        else:
            self.alive.found()

    def _join(self, node: str) -> None:
        """A node linked to the hub after the dashboard started: follow it too."""
        assert self.stream is not None
        self.stream.socket.setsockopt(zmq.SUBSCRIBE, f"{node}/e/".encode())
        self.nodes.append(node)
        self.last[node] = self._last_seq(node)
        self._relist(node)

    def _relist(self, node: str) -> None:
        """One node's whole list: when it joins, or after retention dropped events it missed."""
        records = self._call(node, "session.list", {})["records"]
        records = [{**rec, "node": node} for rec in records] if self.hub else records
        self.post(Batch(records, listed=[node]))

    # requests

    def _call(self, node: str, method: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return self.client.call(method, body, target=f"{node}/node" if node else "", **kw)

    def _linked(self) -> list[str]:
        nodes = self.client.call("hub.nodes")["nodes"]
        return [str(n["node_id"]) for n in nodes if n.get("linked")]

    def _last_seq(self, node: str) -> int:
        return int(self._call(node, "events.since", {"after": 0, "limit": 1})["last_seq"])

    def _catch_up(self, node: str, batch: Batch | None = None) -> None:
        """Read the log after the node's last seq, page by page."""
        own = batch is None
        batch = batch or Batch()
        query = {"after": self.last[node], "limit": 1000}
        for doc in self.client.event_pages(query, target=f"{node}/node" if node else ""):
            if doc.get("gap"):  # retention dropped some: any record may have moved on
                self._relist(node)
            for event in doc["events"]:
                if event["seq"] > self.last[node]:
                    self._event(node, event, batch)
        if own:
            self._settle(batch)

    # sockets

    def _subscribe(self) -> None:
        if self.stream is not None:
            with contextlib.suppress(zmq.ZMQError):
                self.stream.close()
        prefixes = [f"{node}/e/" if node else "e/" for node in self.nodes]
        # A hub with no node linked yet: "hub/" matches nothing (no node is called hub), where
        # no prefix at all would subscribe to everything.
        self.stream = self.client.subscribe(*(prefixes or ["hub/"]))
        if self.shown is not None and self.shown[1] == "pty":
            self.stream.socket.setsockopt(zmq.SUBSCRIBE, self._output_topic(self.shown[0]))

    def _output_topic(self, key: Key) -> bytes:
        return (f"{key[0]}/o/{key[1]}" if self.hub else f"o/{key[1]}").encode()
