"""``roost attach``: a live session's terminal in yours.

It subscribes to the record's output (``o/<record>``) and events first, then draws the screen the
supervisor holds (``session.show`` with ``screen``: its text, cursor and the transcript offset it
reflects) and from there writes the raw output as it comes. Output that overlaps what was drawn is
trimmed; a hole in the offsets (a subscriber that fell behind a flood) is filled from the
transcript by offset, so every byte is written once and in order; a hole the transcript no longer
holds, or one past ``FILL_MAX`` bytes, redraws the screen instead.

Keys typed go to the session as ``session.input`` (committed to the event log before they are
typed, like any input) unless ``--read-only``, the connection's role is ``observer``, stdin is not
a terminal, or ``--json`` is given. ``Ctrl-]`` detaches; the session runs on. After a few seconds
of silence it asks whether the node (or hub) is still there (``roost.cli.liveness``): after a
restart it subscribes again and redraws, a session that ended meanwhile ends the view, and a node
gone for two minutes ends it with ``unavailable``.

As tmux does, the session takes the size of the terminal attached last (and follows it when it
changes), so a full-screen TUI is drawn for the window it is seen in; a view that cannot type
(``--read-only``, an observer) never resizes, and ``--no-resize`` keeps the session's size. The view
runs on the terminal's alternate screen, so detaching gives the user's own screen back as it was.

With ``--json`` it prints JSON Lines: the screen first (``{"screen", "cursor", "offset", ...}``),
then ``{"offset", "data"}`` for each piece of output (``data`` as UTF-8 text, invalid bytes
replaced), and ``{"ended": <state>}`` when the session stops.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import select
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import click
import zmq

from roost.cli.context import Ctx, command, roost_line
from roost.cli.liveness import RETRY_FOR_S, Liveness
from roost.cli.output import emit_json
from roost.client.client import Client, EventStream
from roost.config import load
from roost.wire.errors import RoostError
from roost.wire.messages import RecordState

DETACH = b"\x1d"  # Ctrl-]
INTERRUPT = b"\x03"  # Ctrl-C, in raw mode a byte like any other; detaches a read-only view
ENDED: tuple[RecordState, ...] = ("dormant", "failed")
POLL_MS = 250
# The alternate screen on attach; on detach, the modes a TUI may have left on reset, then the
# user's own screen back (1049 also restores the cursor).
ENTER_SCREEN = b"\x1b[?1049h"
LEAVE_SCREEN = (
    b"\x1b[0m\x1b[?25h\x1b[?1l\x1b>\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l"
    b"\x1b[?1049l"
)
# Typed keys are sent in bursts (``burst``): a paste, key repeat or fast typing is one event.
BURST_IDLE_S, BURST_MAX_S, BURST_BYTES = 0.05, 0.25, 65536
# A hole in the output up to this size is read from the transcript; past it, drawing the screen
# again is cheaper than writing everything that was missed.
FILL_MAX, FILL_CHUNK = 4 << 20, 512 << 10


@dataclass
class Attachment:
    """One attached view: where the drawn output stands, and how to draw and type."""

    client: Client
    record: dict[str, Any]
    as_json: bool
    keyboard: bool  # stdin is a terminal to read keys from (for detaching, at least)
    writable: bool  # keys are sent to the session
    grant: str = ""
    alive: Liveness | None = None  # asks after a silence whether the node is still there
    expected: int = 0  # the transcript offset the next output byte must have

    stale: bool = False  # the node (or hub) restarted and the screen is not drawn again yet
    resized: bool = False
    detach: bytes = DETACH  # the key that ends the view (attach.detach_key of the config file)
    detach_name: str = "Ctrl-]"
    out: Any = field(default_factory=lambda: sys.stdout.buffer)
    keys: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace")
    )
    text: codecs.IncrementalDecoder = field(  # --json output: characters split across messages
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace")
    )

    @property
    def rid(self) -> str:
        return str(self.record["id"])

    def call(self, method: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        """A request; after a node restart the connection initializes again and retries once."""
        try:
            return self.client.call(method, body, **kw)
        except RoostError as err:
            if err.code != "not-initialized":
                raise
            self.client.initialize()
            return self.client.call(method, body, **kw)

    def draw(self, *, first: bool = False) -> None:
        """Draw the supervisor's screen and continue from the offset it reflects."""
        doc = self.call("session.show", {"id": self.rid, "screen": True})
        if doc.get("screen") is None:
            if first:
                raise RoostError("session-not-live", f"{self.rid} has no live session to attach to")
            return  # it ended meanwhile: its record.state event ends the view
        self.expected = int(doc.get("offset") or 0)
        self.text.reset()
        if self.as_json:
            emit_json({k: doc.get(k) for k in ("screen", "cursor", "offset", "classification")})
            return
        cursor = doc.get("cursor") or {"row": 0, "col": 0}
        rows = str(doc["screen"]).split("\n")
        text = "\x1b[H\x1b[2J" + "\r\n".join(rows)
        text += f"\x1b[{int(cursor['row']) + 1};{int(cursor['col']) + 1}H"
        self.write(text.encode())

    def output(self, body: dict[str, Any]) -> None:
        """One ``o/<record>`` message: written if it continues what is drawn, else redrawn."""
        offset, data = body.get("offset"), body.get("data")
        if not isinstance(offset, int) or not isinstance(data, bytes):
            return
        end = offset + len(data)
        if end <= self.expected:
            return  # already on the screen that was drawn
        if offset > self.expected and not self.fill(offset):
            self.draw()
            if end <= self.expected:
                return
            if offset > self.expected:  # the screen lags this message: draw it from the start
                self.expected = offset
        data = data[self.expected - offset :]
        offset, self.expected = self.expected, end
        self.emit(offset, data)

    def fill(self, upto: int) -> bool:
        """Write the output from ``expected`` up to ``upto`` read from the transcript; False
        (nothing written) when the hole is too big or the transcript no longer holds all of it."""
        if upto - self.expected > FILL_MAX:
            return False
        pieces, at = [], self.expected
        while at < upto:
            body = {"id": self.rid, "offset": at, "limit": min(FILL_CHUNK, upto - at)}
            got = self.call("session.transcript", body)
            data = got.get("data")
            if got.get("dropped") or got.get("offset") != at or not isinstance(data, bytes):
                return False
            if not data:
                return False  # not written yet: cannot be, as output is kept before it is sent
            pieces.append(data)
            at += len(data)
        self.emit(self.expected, b"".join(pieces))
        self.expected = upto
        return True

    def emit(self, offset: int, data: bytes) -> None:
        if self.as_json:
            emit_json({"offset": offset, "data": self.text.decode(data)})
        else:
            self.write(data)

    def write(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()

    def type(self, data: bytes) -> None:
        text = self.keys.decode(data)  # a character split across two reads waits for its end
        if text:
            self.call("session.input", {"id": self.rid, "text": text}, grant=self.grant)

    def fit(self) -> None:
        """Make the session's terminal the size of this one; a refusal (another client's claim)
        is said once per change and the view goes on at the session's size."""
        cols, rows = terminal_size()
        body = {"id": self.rid, "rows": rows, "cols": cols}
        try:
            self.call("session.resize", body, grant=self.grant)
        except RoostError as err:
            _status(self, f"not resized to {rows}x{cols}: {err.code}: {err.message}")


def terminal_size() -> tuple[int, int]:
    """The size of the terminal attach draws on (the tty itself: $COLUMNS and $LINES, which
    ``shutil.get_terminal_size`` prefers, may be stale or inherited), as (cols, rows)."""
    for fd in (sys.stdout.fileno(), sys.stdin.fileno()):
        with contextlib.suppress(OSError, ValueError):
            size = os.get_terminal_size(fd)
            return size.columns, size.lines
    return tuple(shutil.get_terminal_size())  # type: ignore[return-value]


@contextlib.contextmanager
def _raw(fd: int | None) -> Iterator[None]:
    if fd is None:
        yield
        return
    import termios  # POSIX only, like typing into a terminal this way
    import tty

    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@contextlib.contextmanager
def _alternate(view: Attachment, on: bool) -> Iterator[None]:
    """The view on the terminal's alternate screen; the user's own screen back however it ends."""
    if on:
        view.write(ENTER_SCREEN)
    try:
        yield
    finally:
        if on:
            view.write(LEAVE_SCREEN)


@click.command()
@click.argument("ref", metavar="ID")
@click.option("--read-only", is_flag=True, help="watch only: keys are not sent")
@click.option(
    "--resize/--no-resize",
    "fit",
    default=True,
    show_default=True,
    help="size the session's terminal to this one and follow it (the last attached wins)",
)
@command(op=False)
def attach(ctx: Ctx, ref: str, read_only: bool, fit: bool) -> None:
    """Show a live pty session's terminal and type into it; Ctrl-] detaches.

    As in tmux, the session takes the size of the terminal attached (or resized) last, so a
    full-screen TUI fits the window it is seen in; --no-resize keeps the session's size, and a
    read-only view never resizes. The view uses the alternate screen: on detach your terminal is
    as it was before."""
    attach_to(ctx, ref, read_only=read_only, fit=fit)


def attach_to(ctx: Ctx, ref: str, *, read_only: bool = False, fit: bool = True) -> None:
    """The whole of ``roost attach``, until the user detaches or the session ends; ``roost tui``
    calls it with the terminal handed over (App.suspend) and takes the terminal back after."""
    again = roost_line(ctx, "attach", ref)
    ctx.goes_on = f"the session of {ref} goes on; attach to it again with `{again}`"
    with ctx.client() as client:
        record = client.call("session.show", {"id": ref})["record"]
        if record["mode"] != "pty":
            raise RoostError(
                "bad-request",
                "attach shows pty sessions; follow a stream session with `roost events --follow`",
                {"field": "id", "mode": record["mode"]},
            )
        if record["state"] not in ("live", "attention"):
            raise RoostError(
                "session-not-live",
                f"{record['id']} is {record['state']}",
                {"id": record["id"], "record": record["id"], "state": record["state"]},
            )
        observer = client.info.get("role") == "observer"
        view = Attachment(
            client,
            record,
            ctx.json,
            keyboard=sys.stdin.isatty() and not ctx.json,
            writable=not (read_only or observer),
            grant=ctx.grant,
        )
        view.alive = Liveness(client, RETRY_FOR_S)
        name, view.detach, _ = load().detach_key()
        view.detach_name = "Ctrl-" + name[5:].upper()
        streams = [_subscribe(view)]
        try:
            _run(view, streams, fit and view.writable and view.keyboard)
        finally:
            streams[-1].close()


def _subscribe(view: Attachment) -> EventStream:
    return view.client.subscribe(f"o/{view.rid}", f"e/{view.rid}/record.state")


def _run(view: Attachment, streams: list[EventStream], fit: bool) -> None:
    stdin = sys.stdin.fileno() if view.keyboard else None
    winch = signal.getsignal(signal.SIGWINCH) if fit else None
    if fit:
        signal.signal(signal.SIGWINCH, lambda *_: setattr(view, "resized", True))
        view.fit()
    poller = zmq.Poller()
    poller.register(streams[-1].socket, zmq.POLLIN)
    if stdin is not None:
        poller.register(stdin, zmq.POLLIN)
    ended = ""
    screen = not view.as_json and view.out.isatty()
    with _raw(stdin), _alternate(view, screen):
        _status(view, _greeting(view))
        view.draw(first=True)
        try:
            ended = _loop(view, streams, poller, stdin)
        except KeyboardInterrupt:
            ended = ""
        finally:
            if fit:
                signal.signal(signal.SIGWINCH, winch)
    if view.as_json:
        if ended:
            emit_json({"ended": ended})
        return
    _status(view, f"session {{}} is {ended}" if ended else "detached from {} ({}); it runs on")


def _loop(
    view: Attachment, streams: list[EventStream], poller: zmq.Poller, stdin: int | None
) -> str:
    while True:
        ready = dict(poller.poll(POLL_MS))
        stream = streams[-1]
        if not ready and view.alive is not None and view.alive.due():
            ended = _recheck(view, streams, poller)
            if ended:
                return ended
            continue
        if view.resized:
            view.resized = False
            view.fit()
        if stdin is not None and stdin in ready:
            data = os.read(stdin, 4096)
            if not data:
                return ""
            if not view.writable:  # watching: any key but these is dropped
                if view.detach in data or INTERRUPT in data:
                    return ""
                continue
            keys, detach, _ = burst(stdin, data).partition(view.detach)
            _type(view, keys)
            if detach:
                return ""
        while stream.socket in ready:
            got = stream.recv(0)
            if got is None:
                break
            topic, body = got
            if view.alive is not None:
                view.alive.heard()
            if topic.startswith("o/"):
                view.output(body)
            elif (body.get("data") or {}).get("to") in ENDED:
                return str(body["data"]["to"])


def burst(fd: int, first: bytes) -> bytes:
    """``first`` and the keys that follow it closely: one ``session.input`` event per burst, not
    one per key. A burst ends after ``BURST_IDLE_S`` without a key, ``BURST_MAX_S`` after it
    began, at ``BURST_BYTES``, or at a key that is not text (Enter, Escape, arrows, Ctrl-...),
    which goes at once so the session answers it without a wait."""
    data = bytearray(first)
    deadline = time.monotonic() + BURST_MAX_S
    while len(data) < BURST_BYTES and not _ends_burst(data):
        wait = min(BURST_IDLE_S, deadline - time.monotonic())
        if wait <= 0 or not select.select([fd], [], [], wait)[0]:
            break
        more = os.read(fd, BURST_BYTES - len(data))
        if not more:
            break
        data += more
    return bytes(data)


def _ends_burst(data: bytes | bytearray) -> bool:
    return any(b < 0x20 or b == 0x7F for b in data)


def _recheck(view: Attachment, streams: list[EventStream], poller: zmq.Poller) -> str:
    """After a silence: subscribe again if the node (or hub) restarted or moved its events,
    then ask for the record: the state it ended in (missed while away), or a redraw."""
    assert view.alive is not None
    changed = view.alive.check()
    if changed is None:
        return ""
    if changed:
        poller.unregister(streams[-1].socket)
        streams[-1].close()
        streams[-1] = _subscribe(view)
        poller.register(streams[-1].socket, zmq.POLLIN)
    view.stale = view.stale or changed  # kept until a redraw: the first ask may still fail
    try:
        state = view.call("session.show", {"id": view.rid})["record"]["state"]
        if state in ENDED:
            return str(state)
        if view.stale:
            view.draw()
            view.stale = False
    except RoostError as err:
        view.alive.lost(err)  # through a hub: the node's link not back yet (unreachable)
    else:
        view.alive.found()
    return ""


def _greeting(view: Attachment) -> str:
    if view.writable and view.keyboard:
        return "attached to {} ({}); " + f"{view.detach_name} detaches"
    if view.keyboard:
        return "watching {} ({}), read-only; " + f"{view.detach_name} or Ctrl-C detaches"
    return "watching {} ({}), read-only"


def _type(view: Attachment, keys: bytes) -> None:
    try:
        view.type(keys)
    except RoostError as err:  # say so and stay attached: a claim or a restart may pass
        _status(view, f"input refused: {err.code}: {err.message}")


def _status(view: Attachment, template: str) -> None:
    """One line on stderr, kept apart from the session's own output."""
    if view.as_json:
        return
    name = view.record.get("name") or "unnamed"
    sys.stderr.write(f"\r\n[roost: {template.format(view.rid, name)}]\r\n")
    sys.stderr.flush()
