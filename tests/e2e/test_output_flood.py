"""An agent flooding its terminal, through a real node: the transcript holds
exactly the bytes the pty carried, the screen once the output settles is the one pyte makes of
every byte, and an attached client sees that screen and every byte after it, in order.

The echo agent writes the flood itself: a file it runs first (``ROOST_ECHO_PRELOAD``) waits in a
thread until the test opens a FIFO, then writes the prepared bytes to its terminal (as bench
figure 4's writer does). The flood mixes what the lazy screen skips (lines of text, styles)
with what it must not (clears, a scroll region, the alternate screen, cursor moves, wide and
combining characters, a title).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from roost.actors.supervisor.emulator import Emulator
from roost.actors.supervisor.escapes import EscapeFilter
from tests.e2e.conftest import JsonLines, Node, wait_for

HOOK = """import os, threading
def _flood():
    with open(os.environ["ROOST_TEST_FLOOD_FIFO"], "rb") as fh:
        fh.read()
    data = open(os.environ["ROOST_TEST_FLOOD"], "rb").read()
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]
if os.environ.get("ROOST_TEST_FLOOD_FIFO"):
    threading.Thread(target=_flood, daemon=True).start()
"""
ROWS, COLS = 30, 100
DONE = b"FLOOD-DONE"


def flood() -> bytes:
    """Lines with styles, wide and combining characters, the alternate screen, a title, then a
    box above a scroll region that a flood starts at the top of, a status line below it."""
    parts = [b"\x1b[32m%06d\x1b[0m ok %s\n" % (i, b"x" * (i % 90)) for i in range(12_000)]
    parts += [f"中文 {i} ✔️ done e\u0301\n".encode() for i in range(4_000)]
    parts += [b"\x1b[?1049h\x1b[Halternate\n\x1b[?1049l", b"\x1b[10;10Hmoved\x1b[40;1H\n"]
    parts += [b"\x1b]0;flooding\x07\x1b[2J\x1b[H\xe2\x94\x8c" + b"\xe2\x94\x80" * 40 + b"\n"]
    parts += [b"\x1b[%d;1Hstatus: flooding\x1b[3;%dr\x1b[3;1H" % (ROWS, ROWS - 2)]
    parts += [b"\x1b[1mline %d\x1b[22m of the region\n" % i for i in range(5_000)]
    parts += [b"\x1b[r\x1b[%d;1H\x1b[2K" % ROWS, DONE]
    return b"".join(parts)


def carried(data: bytes) -> bytes:
    """What the pty passes on of ``data`` (its output processing turns LF into CR LF)."""
    return data.replace(b"\n", b"\r\n")


def transcript(node: Node, rid: str, start: int, end: int) -> bytes:
    out, at = b"", start
    with node.client() as client:
        while at < end:
            got = client.call("session.transcript", {"id": rid, "offset": at, "limit": 500_000})
            assert not got["dropped"] and got["offset"] == at
            out += got["data"]
            at += len(got["data"])
    return out


def reference(data: bytes) -> Emulator:
    emulator = Emulator(ROWS, COLS)
    emulator.feed(EscapeFilter().feed(data))
    return emulator


@pytest.mark.skipif(os.name != "posix", reason="a FIFO and a POSIX pty")
def test_a_flood_keeps_every_byte_and_ends_on_the_right_screen(node: Node, tmp_path: Path) -> None:
    hook, fifo, source = tmp_path / "hook.py", tmp_path / "go", tmp_path / "flood.bin"
    hook.write_text(HOOK)
    os.mkfifo(fifo)
    data = flood()
    source.write_bytes(data)
    node.up()
    env = {"ROOST_ECHO_PRELOAD": str(hook), "ROOST_TEST_FLOOD_FIFO": str(fifo)}
    env["ROOST_TEST_FLOOD"] = str(source)
    with node.client() as client:
        body: dict[str, Any] = {"provider": "echo", "cwd": str(tmp_path), "name": "flood"}
        body.update(rows=ROWS, cols=COLS, env=env)
        rid = client.call("session.spawn", body)["record"]["id"]
    node.wait_screen(rid, "echo-ready>")
    attached = JsonLines(node.env, "attach", rid)
    try:
        first = attached.get()
        start = int(first["offset"])
        os.close(wait_for(lambda: opened(fifo), 15, "the agent waiting on its FIFO"))
        want = carried(data)
        end = start + len(want)
        wait_for(lambda: node.run("transcript", rid, "--limit", "1")["end"] >= end, 90, "it all")
        assert transcript(node, rid, start, end) == want
        whole = reference(transcript(node, rid, 0, end))
        with node.client() as client:
            shown = client.call("session.show", {"id": rid, "screen": True})
        assert shown["screen"] == whole.text() and DONE.decode() in shown["screen"]
        assert shown.get("cursor") in (None, whole.cursor())
        live = following(attached, start)
        assert live == want.decode("utf-8", "replace")
    finally:
        attached.close()
    again = JsonLines(node.env, "attach", rid)  # a client attaching now sees the same screen
    try:
        assert again.get()["screen"] == whole.text()
    finally:
        again.close()


def opened(fifo: Path) -> int | None:
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: the agent has not opened it yet
        return None


def following(attached: JsonLines, start: int) -> str:
    """The output an attached client printed from ``start`` on, up to the flood's end: in
    order, and with no redraw. A client can miss published output (its subscription may reach
    the node after the flood began, as a loaded machine showed); it fills that from the
    transcript, so a redraw would mean it lost bytes."""
    pieces: list[str] = []
    at = start

    def caught_up() -> bool:
        nonlocal at
        for line in attached.drain(0.2):
            assert "screen" not in line, "the client redrew: it missed output"
            assert line["offset"] >= at
            at = line["offset"]
            pieces.append(line["data"])
        return "".join(pieces[-3:]).endswith(DONE.decode())

    wait_for(caught_up, 60, "the attached client's output")
    return "".join(pieces)
