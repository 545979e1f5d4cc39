"""The session's screen and its append-only transcript (roost.actors.supervisor.terminal)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from roost.actors.supervisor import scrolling, terminal
from roost.actors.supervisor.emulator import Emulator
from roost.actors.supervisor.escapes import EscapeFilter
from roost.actors.supervisor.terminal import Terminal, Transcript, session_dir, write_private
from tests.unit.captures import capture_bytes


def test_text_shows_what_was_fed() -> None:
    term = Terminal(rows=5, cols=20)
    term.feed(b"hello\r\nworld")
    assert term.text() == "hello\nworld"
    assert term.cursor() == {"row": 1, "col": 5}


def test_text_of_a_blank_screen_is_empty() -> None:
    assert Terminal(rows=3, cols=10).text() == ""


def test_the_text_is_read_once_per_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers between two outputs share one reading; output and a resize make a new one."""
    reads: list[str] = []
    text = Emulator.text

    def counted(self: Emulator) -> str:
        reads.append(text(self))
        return reads[-1]

    monkeypatch.setattr(Emulator, "text", counted)
    term = Terminal(rows=3, cols=10)
    term.feed(b"one")
    assert term.text() == term.text() == "one" and len(reads) == 1
    term.feed(b"\x1b[?25l")  # a control that changes nothing still means a new reading
    term.feed(b" two")
    assert term.text() == "one two" and len(reads) == 2
    term.resize(3, 4)
    assert term.text() == "one" and len(reads) == 3


def test_escape_sequences_are_interpreted_not_shown() -> None:
    term = Terminal(rows=5, cols=20)
    term.feed(b"\x1b[31mred\x1b[0m line\r\nsecond")
    term.feed(b"\x1b[2J\x1b[Hclean")
    assert term.text() == "clean"


def test_utf8_split_across_feeds() -> None:
    term = Terminal(rows=2, cols=10)
    data = "héllo".encode()
    term.feed(data[:2])
    term.feed(data[2:])
    assert term.text() == "héllo"


def test_long_lines_wrap_at_the_width() -> None:
    term = Terminal(rows=4, cols=5)
    term.feed(b"abcdefgh")
    assert term.text() == "abcde\nfgh"


def test_only_visible_rows_are_kept() -> None:
    term = Terminal(rows=3, cols=10)
    term.feed(b"\r\n".join(f"line{i}".encode() for i in range(6)))
    assert term.text() == "line3\nline4\nline5"


def test_resize_changes_the_screen() -> None:
    term = Terminal(rows=3, cols=10)
    term.resize(5, 30)
    assert (term.screen.lines, term.screen.columns) == (5, 30)
    term.feed(b"x" * 25)
    assert term.text() == "x" * 25


def test_shrinking_keeps_the_rows_from_the_top_while_the_cursor_fits() -> None:
    """Rows are cut from the bottom while the cursor stays on screen (pyte alone cut them from
    the top, so a screen with its text at the top went blank, the cursor where no row was left)."""
    term = Terminal(rows=40, cols=120)
    term.feed(b"banner\r\necho-ready> hi\r\necho: hi\r\necho-ready> ")
    term.text()  # read, as the classifier does (pyte then holds every row)
    term.resize(10, 40)
    assert term.text() == "banner\necho-ready> hi\necho: hi\necho-ready>"
    assert term.cursor() == {"row": 3, "col": 12}
    term.feed(b"next")
    assert term.text().splitlines()[-1] == "echo-ready> next"


def test_shrinking_below_the_cursor_keeps_the_rows_above_it() -> None:
    term = Terminal(rows=8, cols=20)
    term.feed(b"\r\n".join(f"line{i}".encode() for i in range(6)))  # cursor on row 5
    term.resize(3, 20)
    assert term.text() == "line3\nline4\nline5"
    assert term.cursor() == {"row": 2, "col": 5}
    term.feed(b"!\r\nafter")  # the terminal scrolls on from there, as a real one does
    assert term.text() == "line4\nline5!\nafter"


def test_narrowing_keeps_the_cursor_on_the_screen() -> None:
    term = Terminal(rows=4, cols=30)
    term.feed(b"a" * 25)
    term.resize(4, 10)
    assert term.text() == "a" * 10 and term.cursor() == {"row": 0, "col": 9}
    term.resize(6, 10)  # growing adds blank rows below
    assert term.text() == "a" * 10 and (term.screen.lines, term.screen.columns) == (6, 10)


def _data(transcript: Transcript, offset: int, limit: int) -> object:
    return transcript.read(offset, limit)["data"]


def test_title_is_kept_from_osc_0_and_2_split_or_not() -> None:
    term = Terminal(5, 40)
    assert term.title() == ""
    term.feed(b"\x1b]0;\xe2\xa0\x99 wor")
    term.feed(b"king | proj\x07shown")
    assert term.title() == "\u2819 working | proj"
    term.feed(b"\x1b]2;done | proj\x1b\\")  # ST-terminated, OSC 2
    assert term.title() == "done | proj"
    assert term.text() == "shown"  # a title is never drawn on the screen


def test_title_of_codex_streaming_then_done() -> None:
    """codex 0.171.0's own bytes: a braille spinner leads the title while a turn runs."""
    term = Terminal(40, 120)
    term.feed(capture_bytes("codex-mock-long-head.pty"))
    spinner, rest = term.title().split(" ", 1)
    assert 0x2800 <= ord(spinner) < 0x2900 and rest == "Please give a LONG answer | proj"
    term.feed(capture_bytes("codex-mock-long-tail.pty"))
    assert term.title() == "Please give a LONG answer | proj"


def test_transcript_offsets(tmp_path: Path) -> None:
    transcript = Transcript(tmp_path / "s")
    try:
        assert transcript.offset == 0
        assert transcript.append(b"abc") == 0
        assert transcript.append(b"de") == 3
        assert transcript.offset == 5
        assert _data(transcript, 0, 100) == b"abcde"
        assert _data(transcript, 2, 2) == b"cd"
        assert _data(transcript, -5, 2) == b"ab"
        assert _data(transcript, 99, 10) == b""
        assert transcript.read(0, 1)["end"] == 5
    finally:
        transcript.close()


def test_transcript_offsets_run_across_reopens(tmp_path: Path) -> None:
    first = Transcript(tmp_path)
    first.append(b"generation one\n")
    first.close()
    second = Transcript(tmp_path)
    try:
        assert second.offset == len(b"generation one\n")
        assert second.append(b"two\n") == len(b"generation one\n")
        assert _data(second, 0, 100) == b"generation one\ntwo\n"
        assert _data(second, second.offset - 4, 100) == b"two\n"
    finally:
        second.close()


def test_transcript_is_bounded_by_rotation_and_offsets_keep_running(tmp_path: Path) -> None:
    transcript = Transcript(tmp_path, limit=10)
    try:
        for chunk in (b"aaaaaaaa", b"bbbbbbbb", b"cccccccc", b"dddddddd", b"ee"):
            transcript.append(chunk)  # rotates after the b's and after the d's
        assert transcript.offset == 34
        assert (tmp_path / "transcript.bin").stat().st_size == 2
        # the oldest bytes were dropped; a read from there says so and starts at what is kept
        old = transcript.read(0, 100)
        assert old["dropped"] and old["offset"] == 16 and old["data"] == b"ccccccccdddddddd"
        expected = {"offset": 30, "data": b"dd", "end": 34, "dropped": False}
        assert transcript.read(30, 100) == expected
        assert transcript.read(32, 100)["data"] == b"ee"
    finally:
        transcript.close()
    reopened = Transcript(tmp_path, limit=10)
    try:
        assert reopened.offset == 34 and reopened.append(b"f") == 34
    finally:
        reopened.close()


def test_session_dir_and_private_files(tmp_path: Path) -> None:
    folder = session_dir(tmp_path, "r1")
    assert folder == tmp_path / "sessions" / "r1"
    assert session_dir(tmp_path, "r1") == folder
    target = folder / "secret"
    write_private(target, b"one")
    write_private(target, b"2")
    assert target.read_bytes() == b"2"
    assert target.stat().st_mode & 0o777 == 0o600


# -- the lazy screen: what it shows equals emulating every byte -------------------------------


def reference(rows: int, cols: int, data: bytes, resize: tuple[int, int, int] | None) -> Emulator:
    """pyte alone fed everything (one escape filter, one feed), resized where the stream says."""
    filt, emulator = EscapeFilter(), Emulator(rows, cols, fast=False)
    if resize is None:
        emulator.feed(filt.feed(data))
        return emulator
    at, new_rows, new_cols = resize
    emulator.feed(filt.feed(data[:at]))
    emulator.resize(new_rows, new_cols)
    emulator.feed(filt.feed(data[at:]))
    return emulator


def lazily(
    rows: int, cols: int, data: bytes, resize: tuple[int, int, int] | None, rng: random.Random
) -> Terminal:
    """The lazy terminal fed in random reads, its screen read now and then."""
    term, at = Terminal(rows, cols), 0
    stops = sorted({rng.randrange(len(data) + 1) for _ in range(rng.randint(1, 40))} | {len(data)})
    if resize is not None:
        stops = sorted({*stops, resize[0]})
    for stop in stops:
        term.feed(data[at:stop])
        at = stop
        if rng.random() < 0.3:
            term.text()
        if resize is not None and stop == resize[0]:
            term.resize(resize[1], resize[2])
    return term


def same_screen(term: Terminal, ref: Emulator) -> None:
    mine, theirs = term.screen, ref.screen
    assert (mine.lines, mine.columns) == (theirs.lines, theirs.columns)
    for y in range(theirs.lines):
        assert dict(mine.buffer[y]) == dict(theirs.buffer[y]), f"row {y}"
    assert (mine.cursor.x, mine.cursor.y, mine.cursor.attrs, mine.cursor.hidden) == (
        theirs.cursor.x,
        theirs.cursor.y,
        theirs.cursor.attrs,
        theirs.cursor.hidden,
    )
    assert (mine.margins, mine.mode, mine.title) == (theirs.margins, theirs.mode, theirs.title)
    assert term.text() == ref.text() and term.cursor() == ref.cursor()


TEXT = "abcdefghij KLMNOP 0123456789 .,;:"
PIECES: list[Callable[[random.Random, int, int], bytes]] = [
    lambda r, h, w: b"\x1b[%dm" % r.choice([0, 1, 4, 7, 22, 31, 32, 39, 44, 49]),
    lambda r, h, w: r.choice([b"\x1b[m", b"\x1b[0;1;33m", b"\x1b[38;5;111m", b"\x1b[;4m"]),
    lambda r, h, w: r.choice([b"\x1b[K", b"\x1b[1K", b"\x1b[2K", b"\x1b[0K", b"\x1b[3K"]),
    lambda r, h, w: r.choice([b"\x1b[2J", b"\x1b[H", b"\x1b[J", b"\x1b[1J", b"\x1bc"]),
    lambda r, h, w: b"\x1b[%d;%dH" % (r.randint(1, h + 1), r.randint(1, w + 1)),
    lambda r, h, w: b"\x1b[%d%s" % (r.randint(0, 3), r.choice([b"A", b"B", b"C", b"D", b"G"])),
    lambda r, h, w: b"\x1b[%d;%dr" % (r.randint(1, h), r.randint(1, h)),
    lambda r, h, w: r.choice([b"\x1b[r", b"\x1bD", b"\x1bM", b"\x1bE", b"\x1b7", b"\x1b8"]),
    lambda r, h, w: r.choice([b"\x1b[?1049h", b"\x1b[?1049l", b"\x1b[?7l", b"\x1b[?7h"]),
    lambda r, h, w: r.choice([b"\x1b[4h", b"\x1b[4l", b"\x1b[20h", b"\x1b[20l", b"\x1b[?6h"]),
    lambda r, h, w: r.choice([b"\t", b"\x08", b"\x07", b"\r", b"\n", b"\x0b", b"\x1b[?25l"]),
    lambda r, h, w: r.choice([b"\x1b]0;a title\x07", b"\x1b]2;other\x1b\\", b"\x1b]0;open"]),
    lambda r, h, w: r.choice([b"\x1b[>4;2m", b"\x1b[?996n", b"\x1b_Gi=1\x1b\\", b"\x1bP"]),
    lambda r, h, w: r.choice(["中文".encode(), "e\u0301".encode(), "\u2714\ufe0f".encode()]),
    lambda r, h, w: r.choice([b"\xc2\x9b31m", b"\xff", b"\xe4\xb8", b"\x1b%@\xe9\x1b%G"]),
    lambda r, h, w: r.choice([b"\x1b(0qqq\x1b(B", b"\x0e", b"\x0f", b"\x1b[3;2H\x1b[5X"]),
]


def line(rng: random.Random, width: int) -> bytes:
    body = "".join(rng.choice(TEXT) for _ in range(rng.randint(0, 2 * width)))
    if rng.random() < 0.1:
        body += rng.choice(["中", "é", "\u2500\u2500", "e\u0301"])
    if rng.random() < 0.2:
        cut = rng.randrange(len(body) + 1)
        body = body[:cut] + rng.choice(["\x1b[31m", "\x1b[0m", "\x1b[K", "\x1b[1;4m"]) + body[cut:]
    return body.encode() + rng.choice([b"\r\n"] * 8 + [b"\n", b"\r", b"\r\n\r\n"])


def stream(rng: random.Random, rows: int, cols: int) -> bytes:
    out: list[bytes] = []
    for _ in range(rng.randint(5, 40)):
        if rng.random() < 0.35:  # a flood: more rows than the screen has, often many more
            out.extend(line(rng, cols) for _ in range(rng.randint(rows, 8 * rows)))
        else:
            out.append(rng.choice(PIECES)(rng, rows, cols))
    return b"".join(out)


@pytest.mark.parametrize("seed", range(150))
def test_the_lazy_screen_is_the_screen_of_every_byte(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Synthetic output (floods of lines, clears, scroll regions, the alternate screen, cursor
    moves, styles, wide and combining characters, titles, split sequences, a resize in the
    middle) read in random pieces: the screen, cursor, style, modes and title are those of pyte
    fed every byte at once, and the floods were mostly skipped."""
    monkeypatch.setattr(scrolling, "MIN_SKIP", 16)  # small screens: cut even short runs
    monkeypatch.setattr(terminal, "BACKLOG", 64 << (seed % 8))
    rng = random.Random(seed)
    rows, cols = rng.randint(2, 9), rng.randint(4, 30)
    data = stream(rng, rows, cols)
    resize = None
    if seed % 3 == 0:
        resize = (rng.randrange(len(data)), rng.randint(2, 9), rng.randint(4, 30))
    term = lazily(rows, cols, data, resize, rng)
    same_screen(term, reference(rows, cols, data, resize))


def test_the_lazy_screen_skips_a_flood() -> None:
    """The writer of bench figure 4: 1 MB of lines, read as the pty gives it; the screen shows
    the last lines while pyte was fed a few rows' worth."""
    data = b"".join(b"%08d " % i + b"y" * 90 + b"\r\n" for i in range(10_000)) + b"DONE\r\n"
    term = Terminal(50, 200)
    for at in range(0, len(data), 4095):
        term.feed(data[at : at + 4095])
    text = term.text()
    assert text.splitlines()[-2:] == [f"{9_999:08d} " + "y" * 90, "DONE"]
    assert term.skipped > len(data) * 0.95
    same_screen(term, reference(50, 200, data, None))


@pytest.mark.parametrize("rows", [40, 24])
def test_codex_streaming_read_lazily_is_read_whole(rows: int) -> None:
    """codex 0.171.0's own bytes (a 2,400-word answer streaming), read in random pieces."""
    data = capture_bytes("codex-mock-long-head.pty") + capture_bytes("codex-mock-long-tail.pty")
    for seed in range(5):
        term = lazily(40, 120, data, (len(data) // 2, rows, 100), random.Random(seed))
        same_screen(term, reference(40, 120, data, (len(data) // 2, rows, 100)))


def flood(n: int, text: bytes = b"n") -> bytes:
    return b"".join(text + b"%d\r\n" % i for i in range(n))


@pytest.mark.parametrize(
    ("before", "skips"),
    [
        # rows of old text below the cursor: a cut that left fewer than a screen's worth of line
        # feeds after it would show what is left of one of them on the top row
        (b"\x1b[2J\x1b[H" + b"\r\n".join([b"X" * 20] * 5) + b"\x1b[2;1H", True),
        # above a region that starts below the top row: a combining character at column 0 of the
        # region's top row joins the last cell of the row above it, outside the region (so
        # nothing is skipped from there)
        (b"\x1b[2;5r\x1b[1;1H" + "a\r\n\r\u0301".encode(), False),
        # ISO 8859-1 (ESC % @): 0x9B is CSI, so the same bytes are not text any more
        (b"\x1b%@" + flood(30) + b"\x9b?25l" + flood(30) + b"\x1b%G", True),
        # an SGR only the skipped text has, under styles set before it
        (b"\x1b[1;31m" + flood(30, b"\x1b[4m\x1b[39m") + b"\x1b[44m", True),
    ],
)
def test_the_skipping_rules_at_their_edges(
    before: bytes, skips: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scrolling, "MIN_SKIP", 16)
    data = before + flood(60)
    for size in (7, 64, len(data)):
        term = Terminal(5, 20)
        for at in range(0, len(data), size):
            term.feed(data[at : at + size])
        same_screen(term, reference(5, 20, data, None))
        assert bool(term.skipped) is skips
