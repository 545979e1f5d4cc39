"""The Textual app behind ``roost tui`` (``roost.cli.tui``): the table, the preview, the keys.

Imported only when the dashboard starts, so that other commands do not pay for Textual.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.coordinate import Coordinate
from textual.message import Message
from textual.widgets import DataTable, Footer, Input, Static

from roost.broker.client import Client
from roost.broker.errors import RoostError
from roost.cli.attach import attach_to
from roost.cli.board import Board, Entry, Key
from roost.cli.context import Ctx
from roost.cli.feed import Batch, Feed, Note, Preview
from roost.cli.tui_forms import Confirm, Form, spawn_body, spawn_form

Attacher = Callable[[Ctx, str], None]
AGE_REFRESH_S = 5.0  # the AGE and LAST columns are redrawn from what is held, this often


class FeedMessage(Message):
    """Something the feed thread learned (a Batch, a Preview or a Note)."""

    def __init__(self, payload: object) -> None:
        super().__init__()
        self.payload = payload


class Records(DataTable[Text]):
    """The list; enter attaches (where a plain DataTable would only select the row)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "app.attach", "attach", show=False)]


class Dashboard(App[None]):
    """The dashboard over one connection (``client``, handed to the feed) and ``ctx`` for the
    requests its keys make, each on a connection of its own."""

    TITLE = "roost"
    CSS = """
    #main { height: 1fr; }
    #records { width: 3fr; }
    #preview-box { width: 2fr; border: round $accent; }
    #preview { width: auto; }
    #filter { dock: bottom; display: none; }
    #filter.shown { display: block; }
    #status { dock: bottom; height: 1; background: $panel; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter,a", "attach", "attach"),
        Binding("n", "spawn", "spawn"),
        Binding("p", "prompt", "prompt"),
        Binding("s", "stop", "stop"),
        Binding("r", "resume", "resume"),
        Binding("f", "forget", "forget"),
        Binding("slash", "filter", "filter"),
        Binding("escape", "clear_filter", "clear filter", show=False),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, ctx: Ctx, client: Client, attach: Attacher | None = None) -> None:
        super().__init__()
        self.ctx, self.attacher = ctx, attach or _attach
        self.board = Board(hub=client.target == "hub")
        self.feed = Feed(client, self.from_feed)
        self.where = "hub" if self.board.hub else (ctx.node or str(client.info.get("node_id")))
        self.selected: Key | None = None
        self.bells = 0  # how often it rang for attention (a headless test has no bell to hear)
        self.loaded = False
        self.note = ""
        self.preview_text = ""

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield Records(id="records", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="preview-box"):
                yield Static(id="preview", markup=False)
        yield Input(id="filter", placeholder="filter: words that must all match; enter keeps")
        yield Static(id="status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for label in self.board.columns():
            table.add_column(label, key=label or "mark")
        table.focus()
        self.set_interval(AGE_REFRESH_S, self.redraw)
        self.feed.start()
        self.status()

    def on_unmount(self) -> None:
        self.feed.stop()

    # what the feed says

    def from_feed(self, payload: object) -> None:
        """Called in the feed's thread: a message for the app's own loop (thread-safe)."""
        self.post_message(FeedMessage(payload))

    def on_feed_message(self, message: FeedMessage) -> None:
        if not self.is_running:  # shutting down: the widgets may be gone already
            return
        payload = message.payload
        if isinstance(payload, Batch):
            self.apply(payload)
        elif isinstance(payload, Preview):
            self.show_preview(payload)
        elif isinstance(payload, Note):
            self.note = payload.text
            if payload.error:
                self.notify(payload.text, severity="error", timeout=10)
            self.status()

    def apply(self, batch: Batch) -> None:
        if batch.listed is not None:
            for key in [k for k in self.board.entries if k[0] in batch.listed]:
                self.board.remove(key)
            self.board.load(batch.records)
            self.loaded = True
        else:
            for rec in batch.records:
                if self.board.update(rec):
                    self.attention(rec)
        for key in batch.removed:
            self.board.remove(key)
        for key, event in batch.events:
            self.board.touch(key, event)
        for node, code in sorted(batch.unanswered.items()):
            self.notify(f"node {node} did not answer: {code}", severity="warning")
        self.redraw()

    def attention(self, rec: dict[str, Any]) -> None:
        """A record newly needs a human: ring, say so, and keep it marked."""
        self.bells += 1
        self.bell()
        name = rec.get("name") or rec["id"]
        self.notify(
            f"{name} needs attention ({rec.get('attention') or 'attention'})",
            severity="warning",
            timeout=8,
        )

    def show_preview(self, preview: Preview) -> None:
        if preview.key != self.selected:
            return
        self.preview_text = preview.screen
        style = "" if preview.live else "dim"
        self.query_one("#preview", Static).update(
            Text(preview.screen, style=style, no_wrap=True, overflow="crop")
        )
        self.title_preview()

    # drawing

    def redraw(self) -> None:
        """The table from the board: cells updated in place, rows rebuilt when the visible set
        changed (a record came or went, the filter changed); the selection stays on its record."""
        base = self.screen_stack[:1]  # the list's screen, under any dialog
        found = base[0].query(DataTable) if base else None
        if not found:  # before the list is mounted, or after it is gone: the mount redraws
            return
        table = found.first()
        keys, now = self.board.visible(), time.time()
        if [_key(row.key.value) for row in table.ordered_rows] != keys:
            with table.prevent(DataTable.RowHighlighted):  # the rebuild is not the user moving
                table.clear()
                for key in keys:
                    table.add_row(*self.board.row(key, now), key=_row_key(key))
                if self.selected in keys:
                    table.move_cursor(row=keys.index(self.selected))
            self.selected_moved(self.current())
        else:
            for key in keys:
                for column, cell in zip(table.columns, self.board.row(key, now), strict=True):
                    table.update_cell(_row_key(key), column, cell)
        self.status()

    def current(self) -> Key | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        cell = table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0))
        return _key(cell.row_key.value)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.selected_moved(_key(event.row_key.value))

    def selected_moved(self, key: Key | None) -> None:
        if key == self.selected:
            return
        self.selected = key
        if key is not None and self.board.entries[key].marked:
            self.board.seen(key)
            self.call_later(self.redraw)
        entry = self.board.entries.get(key) if key else None
        self.feed.select(key, entry.record["mode"] if entry else "")
        self.preview_text = ""
        self.query_one("#preview", Static).update("")
        self.title_preview()

    def title_preview(self) -> None:
        box = self.query_one("#preview-box")
        entry = self.board.entries.get(self.selected) if self.selected else None
        box.border_title = (entry.record.get("name") or entry.record["id"]) if entry else ""

    def status(self) -> None:
        shown, total = len(self.board.visible()), len(self.board.entries)
        parts = [f"roost tui · {self.where}", f"{total} records" if self.loaded else "loading…"]
        if self.board.filter:
            parts.append(f"filter '{self.board.filter}': {shown} shown")
        if self.note:
            parts.append(self.note)
        self.query_one("#status", Static).update(" · ".join(parts))

    # keys

    def entry(self) -> Entry | None:
        """The selected record's entry, or None (said so) when nothing is selected."""
        entry = self.board.entries.get(self.selected) if self.selected else None
        if entry is None:
            self.notify("no record selected", severity="warning")
        return entry

    def action_attach(self) -> None:
        entry = self.entry()
        if entry is None or self.selected is None:
            return
        rec = entry.record
        if rec["mode"] != "pty":
            self.notify("a stream session has no terminal: `roost events --follow` shows it")
            return
        if entry.state not in ("live", "attention"):
            self.notify(f"{rec.get('name') or rec['id']} is {entry.state}: nothing to attach to")
            return
        self.board.seen(self.selected)
        ctx = dataclasses.replace(self.ctx_for(self.selected), json=False)
        try:
            with self.terminal():
                self.attacher(ctx, str(rec["id"]))
        except RoostError as err:
            self.notify(f"attach: {err.code}: {err.message}", severity="error")
        self.redraw()

    @contextlib.contextmanager
    def terminal(self) -> Iterator[None]:
        """The terminal handed over for the block, taken back after (none in a headless test)."""
        if self.is_headless:
            yield
            return
        with self.suspend():
            yield

    def action_spawn(self) -> None:
        node = (self.selected[0] if self.selected else "") if self.board.hub else None

        def spawned(values: dict[str, str] | None) -> None:
            if values:
                key = (values.get("node", ""), "")
                self.request(key, "spawn", "session.spawn", spawn_body(values), timeout=60.0)

        self.push_screen(spawn_form(os.getcwd(), node), spawned)

    def action_prompt(self) -> None:
        entry, key = self.entry(), self.selected
        if entry is None or key is None:
            return

        def typed(values: dict[str, str] | None) -> None:
            if values is not None:
                body = {"id": key[1], "text": values["text"]}
                self.request(key, "prompt", "session.prompt", body)

        self.board.seen(key)
        name = entry.record.get("name") or entry.record["id"]
        self.push_screen(Form(f"prompt {name}", [("text", "text (enter submits)", "")]), typed)

    def action_stop(self) -> None:
        if (key := self.selected) and self.entry() is not None:
            self.request(key, "stop", "session.stop", {"id": key[1], "grace_ms": 3000}, 35.0)

    def action_resume(self) -> None:
        if (key := self.selected) and self.entry() is not None:
            self.request(key, "resume", "session.resume", {"id": key[1]}, timeout=60.0)

    def action_forget(self) -> None:
        entry, key = self.entry(), self.selected
        if entry is None or key is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.request(key, "forget", "session.forget", {"id": key[1]})

        name = entry.record.get("name") or entry.record["id"]
        self.push_screen(Confirm(f"forget {name}? its record and history go"), answered)

    def action_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.add_class("shown")
        field.value = self.board.filter
        field.focus()

    def action_clear_filter(self) -> None:
        self.set_filter("")

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.board.filter = event.value
            self.redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self.set_filter(event.value)

    def set_filter(self, text: str) -> None:
        field = self.query_one("#filter", Input)
        with field.prevent(Input.Changed):
            field.value = text
        if not text:
            field.remove_class("shown")
        self.board.filter = text
        self.query_one(DataTable).focus()
        self.redraw()

    # requests

    def ctx_for(self, key: Key) -> Ctx:
        """Through a hub, a record's requests go to its node (``--node``)."""
        return dataclasses.replace(self.ctx, node=key[0]) if key[0] else self.ctx

    def request(
        self, key: Key, what: str, method: str, body: dict[str, Any], timeout: float = 15.0
    ) -> None:
        """One request on a connection of its own, in a thread: the dashboard stays live (a
        stop waits out the grace period); the outcome is a notice, the change comes as events."""
        ctx = self.ctx_for(key)

        def run() -> None:
            try:
                ctx.call(method, body, timeout=timeout)
            except RoostError as err:
                self.call_from_thread(
                    self.notify, f"{what}: {err.code}: {err.message}", severity="error"
                )
            else:
                self.call_from_thread(self.notify, f"{what}: accepted")

        self.run_worker(run, thread=True, group="requests", exit_on_error=False)


def _row_key(key: Key) -> str:
    return f"{key[0]}\t{key[1]}"


def _key(value: str | None) -> Key:
    node, _, rid = (value or "").partition("\t")
    return (node, rid)


def _attach(ctx: Ctx, rid: str) -> None:
    attach_to(ctx, rid)
