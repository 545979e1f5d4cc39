"""The fast reader of a TUI's redraws (roost.actors.supervisor.redraw) against pyte alone: the
recorded output of claude, codex and kimi (tests/fixtures/replay), read in random pieces with
the screen looked at random moments, resized mid-stream or not, gives pyte's screen (cells,
cursor, style, modes, margins, title) at every look; so does random output made of the
sequences the reader handles itself and of those it hands to pyte."""

from __future__ import annotations

import random
from collections.abc import Callable

import pyte
import pytest

from roost.actors.supervisor.emulator import Emulator
from roost.actors.supervisor.escapes import EscapeFilter
from roost.actors.supervisor.terminal import Terminal
from tests.replay import PROVIDERS, load
from tests.unit.test_terminal import PIECES, lazily, reference, same_screen


def same(fast: Emulator, slow: Emulator) -> None:
    mine, theirs = fast.screen, slow.screen
    assert (mine.lines, mine.columns) == (theirs.lines, theirs.columns)
    for y in set(mine.buffer) | set(theirs.buffer):
        assert dict(mine.buffer[y]) == dict(theirs.buffer[y]), f"row {y}"
    assert (mine.cursor.x, mine.cursor.y, mine.cursor.attrs, mine.cursor.hidden) == (
        theirs.cursor.x,
        theirs.cursor.y,
        theirs.cursor.attrs,
        theirs.cursor.hidden,
    )
    assert (mine.margins, mine.mode, mine.title, mine.icon_name) == (
        theirs.margins,
        theirs.mode,
        theirs.title,
        theirs.icon_name,
    )
    assert fast.text() == slow.text()
    looked = fast.text()
    fast._rows_size = (0, 0)  # every row read again: the rows text() kept were all current
    assert fast.text() == looked


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("seed", range(2))
def test_a_recorded_answer_read_in_any_pieces_is_pytes_screen(provider: str, seed: int) -> None:
    """Each fixture fed in random pieces, the screen compared with pyte alone after each."""
    data = EscapeFilter().feed(load(provider).data())
    rng = random.Random(seed)
    fast, slow = Emulator(40, 120), Emulator(40, 120, fast=False)
    at = 0
    for stop in [*sorted(rng.sample(range(len(data)), 80)), len(data)]:
        fast.feed(data[at:stop])
        slow.feed(data[at:stop])
        at = stop
        same(fast, slow)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("seed", range(2))
def test_the_lazy_terminal_on_a_recorded_answer_is_pytes_at_every_look(
    provider: str, seed: int
) -> None:
    """The terminal as the supervisor runs it: the recorded reads, looks at random moments (the
    classifier's, a client's), a resize mid-stream for odd seeds; at the end the screen, cursor
    and title are those of pyte alone fed every byte."""
    recorded = load(provider)
    rng = random.Random(seed)
    resize = None
    data = recorded.data()
    if seed % 2:
        resize = (rng.randrange(len(data)), rng.choice([24, 40, 50]), rng.choice([80, 100, 132]))
    term = lazily(recorded.rows, recorded.cols, data, resize, rng)
    same_screen(term, reference(recorded.rows, recorded.cols, data, resize))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_look_during_a_recorded_answer_is_exact(provider: str) -> None:
    """Reads as recorded, the screen looked at once a second of the recording (the classifier's
    pace while output flows): each look equals pyte alone fed the same bytes."""
    recorded = load(provider)
    term, filt = Terminal(recorded.rows, recorded.cols), EscapeFilter()
    slow = Emulator(recorded.rows, recorded.cols, fast=False)
    clock, looked, looks = 0.0, 0.0, 0
    for delay, data in recorded.chunks:
        clock += delay
        term.feed(data)
        slow.feed(filt.feed(data))
        if clock - looked >= 1.0:
            looked, looks = clock, looks + 1
            assert term.text() == slow.text()
            assert term.cursor() == slow.cursor() and term.title() == slow.title()
    assert looks >= 20


Piece = Callable[[random.Random, int, int], bytes]
REDRAWS: list[Piece] = [
    lambda r, h, w: b"\x1b[%d;%dH%s" % (r.randint(0, h + 2), r.randint(0, w + 2), text(r, w)),
    lambda r, h, w: r.choice([b"\x1b[m", b"\x1b[0m", b"\x1b[1m", b"\x1b[0;7m", b"\x1b[22;39m"]),
    lambda r, h, w: b"\x1b[%dH" % r.randint(0, h + 1),
    lambda r, h, w: b"\x1b[;%df" % r.randint(0, w + 1),
    lambda r, h, w: text(r, w),
    lambda r, h, w: r.choice(
        ["\u2500\u2502\u256d", "\u2022 ok", "\u00b7 \u2026", "\u276f"]
    ).encode(),
    lambda r, h, w: b"\x1b[38;5;%dm" % r.randint(0, 255),  # many styles: the id table refills
    lambda r, h, w: b"\x1b[48;2;%d;%d;%dm" % (r.randint(0, 9), r.randint(0, 9), r.randint(0, 9)),
    lambda r, h, w: r.choice([b"\x1b[?6h", b"\x1b[?6l", b"\x1b[?5h", b"\x1b[?5l", b"\x1b[?3l"]),
    lambda r, h, w: r.choice([b"\x1b[?2026h", b"\x1b[?2026l", b"\x1b[?25h", b"\x1b[1;2;3H"]),
    lambda r, h, w: r.choice([b"\x1b[K", b"\x1b[1K", b"\x1b[2K", b"\x1b[?K", b"\x1b[1;2K"]),
    lambda r, h, w: b"\x1b[%d%s" % (r.randint(0, 4), r.choice(list(b"ABCDEFGdea'")).to_bytes()),
    lambda r, h, w: (
        b"\x1b[%s%s%s"  # a move and the text after it (a pending wrap, margins...)
        % (
            r.choice([b"", b"0", b"1", b"2", b"%d" % w, b"9999", b"99999"]),
            r.choice(list(b"ABCDG")).to_bytes(),
            text(r, w),
        )
    ),
    lambda r, h, w: b"\x1b[%d;%dr" % (r.randint(1, h), r.randint(1, h)),  # margins
    lambda r, h, w: r.choice([b"\x1b]1;icon\x07", b"\x1b]2;t\x9c", b"\x1b]0;\x1b[x\x07"]),
    lambda r, h, w: r.choice([b"\x1b[99999;3H", b"\x1b[3;99999H", b"\x1b[0;0H", b"\x1b[1;1H"]),
    lambda r, h, w: b"".join(  # a row's changed words, each after a CHA (some past the edge)
        b"\x1b[%dG%s" % (r.randint(0, w + 2), text(r, w // 3)) for _ in range(r.randint(2, 6))
    ),
    lambda r, h, w: bytes(r.choice(b"\r\n\n") for _ in range(r.randint(2, h + 2))),  # down rows
    lambda r, h, w: r.choice([b"\x1b[20h", b"\x1b[20l", b"\n\n", b"\r\r"]),  # LNM: LF is a CR too
]


def text(rng: random.Random, width: int) -> bytes:
    return "".join(rng.choice("ab \u2500.") for _ in range(rng.randint(0, width + 3))).encode()


@pytest.mark.parametrize("seed", range(200))
def test_random_redraws_are_pytes_screen(seed: int) -> None:
    """Random output of the sequences the reader handles itself (cursor moves, text, styles,
    erases, modes, titles) mixed with those it hands to pyte (scrolls, wide and combining
    characters, insert mode, character sets, split sequences), cut in random pieces."""
    rng = random.Random(seed)
    rows, cols = rng.randint(1, 8), rng.randint(2, 30)
    pieces: list[Piece] = [*REDRAWS] * 3 + list(PIECES)
    data = b"".join(rng.choice(pieces)(rng, rows, cols) for _ in range(rng.randint(20, 300)))
    filt = EscapeFilter()
    fast, slow = Emulator(rows, cols), Emulator(rows, cols, fast=False)
    at = 0
    for stop in sorted({rng.randrange(len(data) + 1) for _ in range(rng.randint(1, 20))}):
        piece = filt.feed(data[at:stop])
        at = stop
        fast.feed(piece)
        slow.feed(piece)
        same(fast, slow)
    piece = filt.feed(data[at:])
    fast.feed(piece)
    slow.feed(piece)
    same(fast, slow)


def test_the_style_table_refills_without_losing_a_cell() -> None:
    """More styles in one feed than the reader numbers (255): the cells keep theirs."""
    data = b"".join(
        b"\x1b[%d;%dH\x1b[38;5;%dmx" % (i // 40 + 1, i % 40 + 1, i % 256) for i in range(600)
    )
    fast, slow = Emulator(20, 40), Emulator(20, 40, fast=False)
    fast.feed(data)
    slow.feed(data)
    same(fast, slow)


def test_a_style_set_again_is_the_one_pyte_makes_under_either_screen_mode() -> None:
    """The same SGRs from the same style, before and after DECSCNM (reverse video, which an
    SGR 0's default style reads) is switched: the styles remembered for them are not reused
    across it."""
    once = b"\x1b[1;31mA\x1b[27mB\x1b[0mC\x1b[7mD\x1b[mE"  # 27: reverse off under DECSCNM too
    data = once + b"\x1b[?5h" + once  # (a DECSCNM reset would set every cell's reverse alike)
    fast, slow = Emulator(4, 20), Emulator(4, 20, fast=False)
    fast.feed(data)
    slow.feed(data)
    same(fast, slow)


def test_redraws_never_reach_pytes_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """codex's answer (cursor moves, text, styles, modes, titles, hyperlinks) is drawn without
    pyte's parser (a few sequences at most reach it, where pyte alone takes thousands of
    feeds)."""
    data = EscapeFilter().feed(load("codex").data())
    parsed: list[str] = []
    original = pyte.Stream.feed

    def counting(stream: pyte.Stream, text: str) -> None:
        parsed.append(text)
        original(stream, text)

    monkeypatch.setattr(pyte.Stream, "feed", counting)
    Emulator(40, 120).feed(data)
    assert len(parsed) < 20


def test_a_scroll_moves_the_rows_kept_aside_in_its_region_only() -> None:
    """Text above, in and below a scrolling region, then line feeds at its bottom row, in one
    feed: the rows kept aside in the region move up with pyte's, the others stay."""
    data = (
        b"\x1b[2;4r\x1b[1;1Habove\x1b[6;1Hbelow\x1b[5;1Hunder"
        b"\x1b[2;1Htop\x1b[3;1Hmid\x1b[4;1Hbottom\n\n\x1b[4;3Hnew\n"
    )
    fast, slow = Emulator(6, 10), Emulator(6, 10, fast=False)
    fast.feed(data)
    slow.feed(data)
    same(fast, slow)
    assert fast.text().splitlines()[:3] == ["above", "", "  new"]
