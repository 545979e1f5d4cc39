"""What ``roost tui`` shows, as plain data: the records, their marks, the filter and the rows.

No sockets and no widgets here: the feed (``roost.cli.feed``) hands in records and events, the
dashboard (``roost.cli.tui``) draws what ``rows`` gives. A record is keyed by ``(node, id)``:
``node`` is ``""`` on a node and the node id through a hub, where ids are only unique per node.
"""

from __future__ import annotations

import os
import time
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rich.cells import cell_len
from rich.text import Text

from roost.cli.texts import short_count
from roost.wire.messages import RecordState

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
COLUMNS = ("", "NAME", "ID", "PROVIDER", "MODE", "STATE", "ACTIVITY", "CWD", "AGE", "LAST", "USAGE")
CAPS = {
    "": 1,
    "NAME": 24,
    "CWD": 28,
    "NODE": 16,
}  # the widest these get; the rest fit their content
SHRUNK = {"NAME": 12, "CWD": 16, "NODE": 8}  # what they shrink to before any column gives way
# The columns that give way when the rest do not fit, first to last; the mark, NAME and STATE
# never do (a state that needs a human is read in full), NAME shrinks to NAME_MIN at the last.
GIVE_WAY = ("USAGE", "CWD", "ID", "MODE", "AGE", "PROVIDER", "LAST", "NODE", "ACTIVITY")
NAME_MIN = 6
PAD = 2  # a cell's padding, one column either side
UNKNOWN = "?"  # after the state of a record the node has not confirmed since it stopped answering


def usage_cell(usage: dict[str, Any] | None) -> str:
    """A session's usage in a few cells: its tokens (every kind) and its cost when known,
    ``48.2k $0.21``; ``-`` before any."""
    if not usage:
        return "-"
    tokens = sum(int(usage.get(k) or 0) for k in ("input", "output", "cache_read", "cache_write"))
    cost = usage.get("cost_usd")
    return short_count(tokens) + (f" ${cost:.2f}" if cost is not None else "")


def key_of(rec: dict[str, Any]) -> Key:
    return (str(rec.get("node") or ""), str(rec["id"]))


def ago(seconds: float) -> str:
    """A duration the way a list shows it: 42s, 7m, 3h, 12d."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def plain(text: str) -> str:
    """``text`` as a terminal draws it at the width it is counted: no control characters, no
    joiners or variation selectors (terminals disagree on the width of what they join)."""
    text = unicodedata.normalize("NFC", text)
    return "".join(
        " " if unicodedata.category(ch) == "Cc" else ch
        for ch in text
        if unicodedata.category(ch) not in ("Mn", "Me", "Cf")
    )


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells, its end replaced by ``…`` when cut."""
    if cell_len(text) <= width:
        return text
    out = ""
    for ch in text:
        if cell_len(out + ch) > width - 1:
            break
        out += ch
    return out + "…"


def short_path(path: str, width: int = 28) -> str:
    """A cwd that fits its column: the home directory as ``~``, then the tail."""
    home = os.path.expanduser("~")
    if home != "/" and (path == home or path.startswith(home + os.sep)):
        path = "~" + path[len(home) :]
    return path if len(path) <= width else "…" + path[-(width - 1) :]


def add_usage(before: Any, turn: dict[str, Any]) -> dict[str, Any]:
    """A session's usage with a stream turn's (``session.turn``'s ``usage``) added."""
    old = before if isinstance(before, dict) else {}
    new = turn["usage"]
    total: dict[str, Any] = {
        k: int(old.get(k) or 0) + int(new.get(k) or 0)
        for k in ("input", "output", "cache_read", "cache_write")
    }
    if old.get("cost_usd") is not None or new.get("cost_usd") is not None:
        total["cost_usd"] = float(old.get("cost_usd") or 0.0) + float(new.get("cost_usd") or 0.0)
    return total


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
    stale: bool = False  # the node (or hub) is not answering: active states are the last known

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
        if "usage" not in rec:  # session.show's record: the figures stay those last known
            rec = {**rec, "usage": was.record.get("usage")}
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
        if event["kind"] == "session.usage" and isinstance(data.get("total"), dict):
            entry.record = {**entry.record, "usage": data["total"]}
        elif event["kind"] == "session.turn" and isinstance(data.get("usage"), dict):
            entry.record = {**entry.record, "usage": add_usage(entry.record.get("usage"), data)}
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
        """The cells of one row; the state cell says ``attention (reason)``, highlighted. While
        the node does not answer (``stale``), an active record's state is the last known, ``?``
        after it, and its activity unknown."""
        entry = self.entries[key]
        rec = entry.record
        state = entry.state + (f" ({rec['attention']})" if rec.get("attention") else "")
        activity = entry.activity()
        unknown = self.stale and entry.state in ACTIVE
        if unknown:
            state, activity = state + UNKNOWN, UNKNOWN
        cells = [
            Text("!" if entry.marked else "", style="bold yellow"),
            Text(plain(str(rec.get("name") or "-"))),
            Text(str(rec["id"]), style="dim"),
            Text(str(rec["provider"])),
            Text(str(rec["mode"])),
            Text(state, style="dim" if unknown else STATE_STYLE.get(entry.state, "")),
            Text(activity, style="bold" if activity == "working" else ""),
            Text(plain(short_path(str(rec.get("cwd") or "")))),
            Text(ago(now - float(rec.get("created") or now))),
            Text(ago(now - entry.last_activity)),
            Text(usage_cell(rec.get("usage")), style="dim"),
        ]
        return [Text(plain(key[0])), *cells] if self.hub else cells

    def layout(self, keys: list[Key], now: float, width: int) -> list[tuple[str, int]]:
        """The columns shown in ``width`` cells and the width of each: every column as wide as
        its widest cell (NAME, CWD and NODE capped); when they do not fit, NAME, CWD and NODE
        shrink, then columns give way in the order of ``GIVE_WAY``, then NAME shrinks further."""
        labels = self.columns()
        rows = [self.row(key, now) for key in keys]
        want = {
            label: min(
                CAPS.get(label, 1 << 16),
                max([cell_len(label), *(cell_len(str(row[i])) for row in rows)]),
            )
            for i, label in enumerate(labels)
        }
        want[""] = 1
        natural = dict(want)

        def total() -> int:
            return sum(w + PAD for w in want.values())

        for label, narrow in SHRUNK.items():
            if total() > width and label in want:
                want[label] = min(want[label], max(narrow, cell_len(label)))
        for label in GIVE_WAY:
            if total() > width and label in want:
                del want[label]
        for label in SHRUNK:  # what the columns that gave way left, to those that shrank
            if label in want and total() < width:
                want[label] = min(natural[label], want[label] + width - total())
        if total() > width:
            want["NAME"] = max(NAME_MIN, want["NAME"] - (total() - width))
        return [(label, want[label]) for label in labels if label in want]

    def cells(self, key: Key, now: float, layout: list[tuple[str, int]]) -> list[Text]:
        """The row's cells of the columns ``layout`` shows, each cut to its width with ``…``."""
        row = dict(zip(self.columns(), self.row(key, now), strict=True))
        out = []
        for label, width in layout:
            cell = row[label]
            if cell_len(cell.plain) > width:
                cell = Text(fit(cell.plain, width), style=cell.style)
            out.append(cell)
        return out
