"""What ``roost tui`` shows, as plain data: the records, their marks, the filter and the rows.

No sockets and no widgets here: the feed (``roost.cli.feed``) hands in records and events, the
dashboard (``roost.cli.tui``) draws what ``rows`` gives. A record is keyed by ``(node, id)``:
``node`` is ``""`` on a node and the node id through a hub, where ids are only unique per node.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text

from roost.broker.messages import RecordState

Key = tuple[str, str]
ACTIVE: tuple[RecordState, ...] = ("starting", "live", "attention", "stopping")
ACTIVITY = {  # the screen's classification (record.activity), as an operator reads it
    "busy": "working",
    "ready": "ready",
    "starting": "starting",
    "attention": "waiting",
    "shell": "shell",
    "exited": "exited",
}
STATE_STYLE = {
    "live": "green",
    "starting": "cyan",
    "stopping": "cyan",
    "dormant": "dim",
    "failed": "bold red",
    "attention": "bold black on yellow",
}
COLUMNS = ("", "NAME", "ID", "PROVIDER", "MODE", "STATE", "ACTIVITY", "CWD", "AGE", "LAST")


def key_of(rec: dict[str, Any]) -> Key:
    return (str(rec.get("node") or ""), str(rec["id"]))


def ago(seconds: float) -> str:
    """A duration the way a list shows it: 42s, 7m, 3h, 12d."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def short_path(path: str, width: int = 28) -> str:
    """A cwd that fits its column: the home directory as ``~``, then the tail."""
    home = os.path.expanduser("~")
    if home != "/" and (path == home or path.startswith(home + os.sep)):
        path = "~" + path[len(home) :]
    return path if len(path) <= width else "…" + path[-(width - 1) :]


@dataclass
class Entry:
    """One record and what the dashboard knows about it beyond the record itself."""

    record: dict[str, Any]
    last_activity: float  # the newest event about it (the record's update time until one comes)
    turn: bool = False  # stream mode: a turn runs (between its session.input and session.turn)
    marked: bool = False  # entered attention since the user last looked at it

    @property
    def state(self) -> str:
        return str(self.record["state"])

    def activity(self) -> str:
        if self.state not in ACTIVE:
            return "-"
        if self.record["mode"] == "stream":
            return "working" if self.turn else "ready"
        value = self.record.get("activity")
        return ACTIVITY.get(str(value), str(value)) if value else "-"

    def haystack(self) -> str:
        rec = self.record
        parts = (rec.get("node"), rec.get("name"), rec["id"], rec["provider"], rec["mode"])
        rest = (self.state, rec.get("attention"), rec.get("cwd"), self.activity())
        return " ".join(str(p) for p in (*parts, *rest) if p).lower()


@dataclass
class Board:
    """The records the dashboard holds, in creation order per node, and the filter."""

    entries: dict[Key, Entry] = field(default_factory=dict)
    filter: str = ""
    hub: bool = False  # through a hub: a NODE column leads each row

    def load(self, records: Iterable[dict[str, Any]]) -> None:
        """The list as ``session.list`` answered it; nothing is marked (nothing is new)."""
        for rec in records:
            self.entries[key_of(rec)] = Entry(rec, float(rec.get("updated") or 0.0))

    def update(self, rec: dict[str, Any]) -> bool:
        """A record as ``session.show`` answers it now; True when it newly needs attention
        (it entered ``attention``, or its reason changed): the dashboard rings and marks it."""
        key = key_of(rec)
        was = self.entries.get(key)
        before = (was.state, was.record.get("attention")) if was is not None else None
        newly = rec["state"] == "attention" and before != ("attention", rec.get("attention"))
        if was is None:
            was = self.entries[key] = Entry(rec, float(rec.get("updated") or time.time()))
        was.record = rec
        if newly:
            was.marked = True
        elif rec["state"] != "attention":
            was.marked = False
        return newly

    def remove(self, key: Key) -> None:
        self.entries.pop(key, None)

    def touch(self, key: Key, event: dict[str, Any]) -> None:
        """An event about the record: its time is the record's last activity; a stream turn's
        start and end say whether it is working."""
        entry = self.entries.get(key)
        if entry is None:
            return
        entry.last_activity = max(entry.last_activity, float(event.get("ts") or 0.0))
        data = event.get("data") or {}
        if event["kind"] == "session.input" and data.get("input") == "turn":
            entry.turn = True
        elif event["kind"] in ("session.turn", "session.exited", "session.lost"):
            entry.turn = False

    def seen(self, key: Key | None) -> None:
        """The user looked at the record (moved onto it, acted on it): its mark goes."""
        if key is not None and key in self.entries:
            self.entries[key].marked = False

    def visible(self) -> list[Key]:
        """The keys the filter lets through, by node, then as each node lists them."""
        words = self.filter.lower().split()
        keys = [
            key
            for key, entry in self.entries.items()
            if all(word in entry.haystack() for word in words)
        ]
        return sorted(keys, key=lambda k: (k[0], float(self.entries[k].record.get("created") or 0)))

    def columns(self) -> tuple[str, ...]:
        return ("NODE", *COLUMNS) if self.hub else COLUMNS

    def row(self, key: Key, now: float) -> list[Text]:
        """The cells of one row; the state cell says ``attention (reason)``, highlighted."""
        entry = self.entries[key]
        rec = entry.record
        state = entry.state + (f" ({rec['attention']})" if rec.get("attention") else "")
        cells = [
            Text("!" if entry.marked else "", style="bold yellow"),
            Text(str(rec.get("name") or "-")),
            Text(str(rec["id"]), style="dim"),
            Text(str(rec["provider"])),
            Text(str(rec["mode"])),
            Text(state, style=STATE_STYLE.get(entry.state, "")),
            Text(entry.activity(), style="bold" if entry.activity() == "working" else ""),
            Text(short_path(str(rec.get("cwd") or ""))),
            Text(ago(now - float(rec.get("created") or now))),
            Text(ago(now - entry.last_activity)),
        ]
        return [Text(key[0]), *cells] if self.hub else cells
