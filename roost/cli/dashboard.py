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
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.coordinate import Coordinate
from textual.message import Message
from textual.widgets import DataTable, Footer, Input, Static

from roost.cli.attach import attach_to
from roost.cli.board import ACTIVE, PAD, Board, Entry, Key, plain
from roost.cli.context import Ctx
from roost.cli.diff import summary
from roost.cli.feed import Batch, Feed, Health, Note, Preview
from roost.cli.tui_forms import Confirm, Form, Page, spawn_body, spawn_form
from roost.client.client import Client
from roost.providers import built_in, define, names
from roost.wire.errors import RoostError

Attacher = Callable[[Ctx, str], None]
AGE_REFRESH_S = 5.0  # the AGE and LAST columns are redrawn from what is held, this often
STACKED_BELOW = 120  # a terminal narrower than this has the preview under the list, not beside
PREVIEW_MIN = 40  # side by side, the preview keeps at least this many columns
SCROLLBAR = 2  # the list's vertical scrollbar, kept free so that no column goes under it
PROMPTABLE = ("starting", "live", "attention")  # states in which a prompt or a turn is taken
HELP = """\
keys
  up / down  select a record; its screen is previewed (the bottom of it)
  enter, a   attach to a pty session; Ctrl-] (attach.detach_key) comes back
  n          spawn: provider, name, cwd, mode, worktree, env, size
  p          prompt a pty session; on a stream session, run a turn with it
  s          stop (SIGTERM, SIGKILL after 3 s)
  r          resume a stopped record
  f          forget a stopped record (asks first; an active one is refused)
  d          diff: what a worktree session changed against its base
  /          filter: rows with every word typed; enter keeps, escape clears
  ?          this page
  q          quit (the sessions run on)

In a form, enter submits, escape cancels, tab moves to the next field. A
spawn, prompt or turn that fails keeps what was typed: the same key opens
the form with it again.

columns (those that do not fit give way: CWD, then ID, MODE, AGE, PROVIDER,
LAST, NODE, ACTIVITY; NAME and STATE stay, STATE always in full)
  !          newly needs attention (until you move onto the record)
  NODE       through a hub: the node the record is on
  NAME, ID   the record's name and id
  PROVIDER   the agent: {providers}, or one the config file defines
  MODE       pty (a terminal) or stream (one headless run per turn)
  STATE      starting, live, attention (reason), stopping, dormant, failed;
             a ? after it: the node is not answering, this is the last known
  ACTIVITY   working, ready, starting, waiting (for a human), shell, exited
  CWD        the directory it runs in
  AGE        since the record was created
  LAST       since the newest event about it

The status line: the record count, the filter, whether the node answers.
""".format(providers=", ".join(names()))


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
    #main { height: 1fr; layout: horizontal; }
    #main.stacked { layout: vertical; }
    #records { height: 1fr; scrollbar-gutter: stable; }
    #preview-box { width: 1fr; height: 1fr; border: round $accent; }
    #preview { width: 1fr; text-wrap: nowrap; text-overflow: clip; }
    #filter { display: none; border: none; height: 1; }
    #filter.shown { display: block; }
    #status { height: 1; background: $panel; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter,a", "attach", "attach"),
        Binding("n", "spawn", "spawn"),
        Binding("p", "prompt", "prompt"),
        Binding("s", "stop", "stop"),
        Binding("r", "resume", "resume"),
        Binding("f", "forget", "forget"),
        Binding("d", "diff", "diff"),
        Binding("slash", "filter", "filter"),
        Binding("question_mark", "help", "keys"),
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
        self.lost_since: float | None = None  # the node (or hub) last answered then, if it does not
        self.preview: Preview | None = None
        self.preview_text = ""  # what the preview shows
        self.layout: list[tuple[str, int]] = []  # the table's columns and their widths
        self.drafts: dict[object, dict[str, str]] = {}  # what was typed into a form that failed
        self.errors: dict[object, str] = {}  # and why it failed

    def compose(self) -> ComposeResult:
        with Container(id="main"):
            yield Records(id="records", cursor_type="row", zebra_stripes=True)
            with Container(id="preview-box"):
                yield Static(id="preview", markup=False)
        yield Input(id="filter", placeholder="filter: words that must all match; enter keeps")
        yield Static(id="status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.part("#records").focus()
        self.set_interval(AGE_REFRESH_S, self.redraw)
        self.feed.start()
        self.redraw()

    def part(self, selector: str) -> Any:
        """A widget of the list's screen, whatever dialog is on top of it (``query_one`` on the
        app looks at the screen on top)."""
        return self.screen_stack[0].query_one(selector)

    def on_resize(self, _event: events.Resize) -> None:
        self.call_after_refresh(self.redraw)

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
        elif isinstance(payload, Health):
            self.health(payload.since)
        elif isinstance(payload, Note):
            self.note = payload.text
            if payload.error:
                self.notify(payload.text, severity="error", timeout=10)
            self.status()

    def health(self, since: float | None) -> None:
        """The node (or hub) stopped answering (``since``: when it last did) or is back."""
        what = "hub" if self.board.hub else "node"
        if since is not None:
            self.notify(f"{what} not answering since {_clock(since)}", severity="error")
        elif self.lost_since is not None:
            self.notify(f"{what} answering again; reading what was missed")
        self.lost_since, self.board.stale = since, since is not None
        self.redraw()

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
        self.preview = preview
        self.draw_preview()
        self.title_preview()

    def draw_preview(self) -> None:
        """The screen's rows that fit the box: the bottom of a taller screen, the cursor's row
        kept in view (as tmux previews a pane)."""
        preview = self.preview
        if preview is None:
            self.preview_text = ""
            self.part("#preview").update("")
            return
        lines = [plain(line).rstrip() for line in preview.screen.split("\n")]
        height = max(1, self.part("#preview-box").content_size.height)
        used = [i for i, line in enumerate(lines) if line]
        end = max(used[-1] + 1 if used else 0, (preview.cursor or 0) + 1)
        start = max(0, end - height)
        if preview.cursor is not None and preview.cursor < start:
            start = preview.cursor
        self.preview_text = "\n".join(lines[start : start + height])
        style = "" if preview.live else "dim"
        self.part("#preview").update(
            Text(self.preview_text, style=style, no_wrap=True, overflow="crop")
        )

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
        layout = self.arrange(keys, now)
        if layout != self.layout or [_key(row.key.value) for row in table.ordered_rows] != keys:
            with table.prevent(DataTable.RowHighlighted):  # the rebuild is not the user moving
                table.clear(columns=layout != self.layout)
                if layout != self.layout:
                    for label, width in layout:
                        table.add_column(label, width=width, key=label or "mark")
                    self.layout = layout
                for key in keys:
                    table.add_row(*self.board.cells(key, now, layout), key=_row_key(key))
                if self.selected in keys:
                    table.move_cursor(row=keys.index(self.selected))
            self.selected_moved(self.current())
        else:
            for key in keys:
                for column, cell in zip(
                    table.columns, self.board.cells(key, now, layout), strict=True
                ):
                    table.update_cell(_row_key(key), column, cell)
        self.status()

    def arrange(self, keys: list[Key], now: float) -> list[tuple[str, int]]:
        """The columns that fit, and where the list and the preview go: side by side in a wide
        terminal (the list as wide as its columns, the preview the rest), else one above the
        other."""
        width = self.size.width
        stacked = width < STACKED_BELOW
        self.part("#main").set_class(stacked, "stacked")
        room = width - SCROLLBAR - (0 if stacked else PREVIEW_MIN)
        layout = self.board.layout(keys, now, room)
        records = self.part("#records")
        wanted = "1fr" if stacked else str(sum(w + PAD for _, w in layout) + SCROLLBAR)
        if str(records.styles.width) != wanted:
            records.styles.width = wanted
            # a width set while the table is rebuilt is not always laid out on its own
            self.call_after_refresh(self.screen_stack[0].refresh, layout=True)
        if self.preview is not None:
            self.call_after_refresh(self.draw_preview)
        return layout

    def current(self) -> Key | None:
        table = self.part("#records")
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
        self.preview = None
        self.draw_preview()
        self.title_preview()

    def title_preview(self) -> None:
        box = self.part("#preview-box")
        entry = self.board.entries.get(self.selected) if self.selected else None
        box.border_title = plain(_name(entry.record)) if entry else ""

    def status(self) -> None:
        """The line under the list: whether the node answers, the count, the filter, a note."""
        shown, total = len(self.board.visible()), len(self.board.entries)
        line = Text(no_wrap=True, overflow="ellipsis")
        if self.lost_since is not None:
            what = "hub" if self.board.hub else "node"
            line.append(
                f" {what} not answering since {_clock(self.lost_since)}: states with ? are the "
                "last known ",
                style="bold white on red",
            )
            line.append(" · ")
        line.append(f"{total} records" if self.loaded else "loading…")
        if self.board.filter:
            line.append(f" · filter '{self.board.filter}': {shown} shown", style="bold")
        if self.note:
            line.append(f" · {self.note}")
        line.append(f" · {self.where} · ? keys")
        base = self.screen_stack[:1]
        found = next(base[0].query("#status").results(Static), None) if base else None
        if found is not None:  # not while the app closes (its widgets go one by one)
            found.update(line)

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
        """The spawn form, with the defaults (``spawn`` in the config file) or, after a spawn
        that failed, what was typed then and why it failed."""
        node = (self.selected[0] if self.selected else "") if self.board.hub else None
        try:
            from roost.config import load  # as roost spawn: the config file's [spawn] defaults

            config = load()
        except RoostError as err:
            self.notify(f"spawn: {err.code}: {err.message}", severity="error", timeout=10)
            return
        define(config.defined_providers())  # the form names them beside the registered ones
        defaults = {
            "provider": built_in()[0],
            "cwd": os.getcwd(),
            "mode": config.spawn_mode()[0],
            "size": config.spawn_size()[0] or "",
            "node": node or "",
        }
        values = self.drafts.pop("spawn", defaults)
        error = self.errors.pop("spawn", "")

        def spawned(values: dict[str, str] | None) -> None:
            if values:
                key = (values.get("node", ""), "")
                body = spawn_body(values, config.spawn_env())
                body["restore"] = config.spawn_restore()[0]
                body["on_limit"] = config.spawn_on_limit()[0]
                self.request(key, "spawn", "session.spawn", body, 60.0, draft=("spawn", values))

        self.push_screen(spawn_form(values, node, error), spawned)

    def action_prompt(self) -> None:
        """A prompt typed into a pty session, or a turn run with it on a stream session; refused
        before anything is typed when the record cannot take it."""
        entry, key = self.entry(), self.selected
        if entry is None or key is None:
            return
        name, stream = _name(entry.record), entry.record["mode"] == "stream"
        if entry.state not in PROMPTABLE:
            how = "r resumes it" if entry.state == "dormant" else "it cannot run again"
            self.notify(
                f"{name} is {entry.state}: nothing takes a prompt ({how})", severity="warning"
            )
            return
        method, what = ("session.turn", "turn") if stream else ("session.prompt", "prompt")
        slot = (what, key)

        def typed(values: dict[str, str] | None) -> None:
            if values is not None:
                body = {"id": key[1], "text": values["text"]}
                self.request(key, what, method, body, 60.0 if stream else 15.0, (slot, values))

        self.board.seen(key)
        title = (
            f"turn of {name} (stream: runs the provider once with the text)"
            if stream
            else (f"prompt {name}")
        )
        text = self.drafts.pop(slot, {}).get("text", "")
        form = Form(title, [("text", "text", text)], error=self.errors.pop(slot, ""))
        self.push_screen(form, typed)

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
        name = _name(entry.record)
        if entry.state in ACTIVE:  # the node refuses it (session-record-busy): say so now
            self.notify(
                f"{name} is {entry.state}: stop it first (s), then forget it", severity="warning"
            )
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.request(key, "forget", "session.forget", {"id": key[1]})

        self.push_screen(Confirm(f"forget {name}? its record and history go"), answered)

    def action_diff(self) -> None:
        """What a worktree session changed against its base, on a page of its own."""
        entry, key = self.entry(), self.selected
        if entry is None or key is None:
            return
        name = _name(entry.record)
        if not entry.record.get("worktree"):
            self.notify(
                f"{name} has no worktree of its own: diff is for a session spawned with one "
                "(the spawn form's worktree, or roost spawn --worktree)",
                severity="warning",
            )
            return
        ctx = self.ctx_for(key)

        def run() -> None:
            try:
                doc = ctx.call("session.diff", {"id": key[1]}, timeout=30.0)
            except RoostError as err:
                self.call_from_thread(
                    self.notify, f"diff: {err.code}: {err.message}", severity="error"
                )
            else:
                self.call_from_thread(self.push_screen, Page(f"diff of {name}", _diff_text(doc)))

        self.run_worker(run, thread=True, group="requests", exit_on_error=False)

    def action_help(self) -> None:
        self.push_screen(Page("roost tui", HELP))

    def action_filter(self) -> None:
        field = self.part("#filter")
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
        field = self.part("#filter")
        with field.prevent(Input.Changed):
            field.value = text
        if not text:
            field.remove_class("shown")
        self.board.filter = text
        self.part("#records").focus()
        self.redraw()

    # requests

    def ctx_for(self, key: Key) -> Ctx:
        """Through a hub, a record's requests go to its node (``--node``)."""
        return dataclasses.replace(self.ctx, node=key[0]) if key[0] else self.ctx

    def request(
        self,
        key: Key,
        what: str,
        method: str,
        body: dict[str, Any],
        timeout: float = 15.0,
        draft: tuple[object, dict[str, str]] | None = None,
    ) -> None:
        """One request on a connection of its own, in a thread: the dashboard stays live (a
        stop waits out the grace period); the outcome is a notice, the change comes as events.
        ``draft``: the form it was typed in and its values, kept when the request fails."""
        ctx = self.ctx_for(key)

        def failed(err: RoostError) -> None:
            message = f"{what}: {err.code}: {err.message}"
            if draft is not None:
                self.drafts[draft[0]], self.errors[draft[0]] = draft[1], message
                message += f" (what you typed is kept: {what[0]} opens it again)"
            self.notify(message, severity="error", timeout=12)

        def run() -> None:
            try:
                ctx.call(method, body, timeout=timeout)
            except RoostError as err:
                self.call_from_thread(failed, err)
            else:
                self.call_from_thread(self.notify, f"{what}: accepted")

        self.run_worker(run, thread=True, group="requests", exit_on_error=False)


def _name(rec: dict[str, Any]) -> str:
    return str(rec.get("name") or rec["id"])


def _clock(when: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(when))


def _diff_text(doc: dict[str, Any]) -> Text:
    """``roost diff``'s summary, then the patch coloured as git colours it."""
    text = Text("\n".join(summary(doc)) + "\n\n")
    for line in (doc.get("patch") or "").splitlines():
        style = ""
        if line.startswith(("+++", "---", "diff ", "index ")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        text.append(line + "\n", style=style)
    if doc.get("truncated"):
        text.append("... (the patch is cut here; see git diff in the worktree)\n", style="dim")
    return text


def _row_key(key: Key) -> str:
    return f"{key[0]}\t{key[1]}"


def _key(value: str | None) -> Key:
    node, _, rid = (value or "").partition("\t")
    return (node, rid)


def _attach(ctx: Ctx, rid: str) -> None:
    attach_to(ctx, rid)
