"""pyte as the supervisor runs it (roost.actors.supervisor.emulator): the plain-ASCII draw that
replaces pyte's per-character one gives pyte's cells exactly, a character pyte's draw stopped at
costs only itself, and the text of a screen is pyte's ``display`` (without its IndexError)."""

from __future__ import annotations

import random
from typing import Any

import pyte
import pytest
from pyte import modes

from roost.actors.supervisor.emulator import Emulator, Tolerant, placeable


def cells(screen: pyte.Screen) -> dict[int, dict[int, Any]]:
    return {y: dict(screen.buffer[y]) for y in range(screen.lines) if screen.buffer[y]}


def state(screen: pyte.Screen) -> tuple[Any, ...]:
    c = screen.cursor
    return cells(screen), (c.x, c.y, c.attrs), set(screen.dirty) >= {c.y}


def pyte_display(screen: pyte.Screen) -> str:
    return "\n".join(line.rstrip() for line in screen.display).rstrip("\n")


@pytest.mark.parametrize("seed", range(40))
def test_plain_draw_gives_pytes_cells(seed: int) -> None:
    rng = random.Random(seed)
    cols, rows = rng.randint(1, 12), rng.randint(1, 6)
    mine, theirs = pyte.Screen(cols, rows), pyte.Screen(cols, rows)
    tolerant = Tolerant(mine)
    for screen in (mine, theirs):
        if seed % 4 == 1:
            screen.set_margins(1, max(1, rows - 1))
        if seed % 4 == 2:
            screen.reset_mode(modes.DECAWM >> 5, private=True)  # no wrap: pyte's own draw
        if seed % 4 == 3:
            screen.set_mode(modes.IRM)  # insert: pyte's own draw
    for _ in range(30):
        text = "".join(rng.choice("abcXYZ 0~") for _ in range(rng.randint(0, 3 * cols)))
        attrs = rng.choice([(), (1,), (31, 44), (0,), (7,)])
        x, y = rng.randint(0, cols), rng.randint(0, rows - 1)
        for screen in (mine, theirs):
            screen.select_graphic_rendition(*attrs)
            screen.cursor.x, screen.cursor.y = x, y
        tolerant.draw(text)
        theirs.draw(text)
        assert state(mine) == state(theirs)


def test_a_character_pyte_stops_at_costs_only_itself() -> None:
    """pyte's draw dropped the rest of the text after U+FE0F (an emoji's variation selector),
    U+200D (emoji sequences), or a C0 control it does not know, up to the next control."""
    theirs = pyte.Screen(30, 2)
    pyte.ByteStream(theirs).feed("ok \u2714\ufe0f done".encode())
    assert pyte_display(theirs) == "ok \u2714"
    emulator = Emulator(2, 30)
    emulator.feed("ok \u2714\ufe0f done, a\u200db\x01c e\u0301".encode())
    assert emulator.text() == "ok \u2714 done, abc \u00e9"
    assert placeable("a\ufe0fb\x01") == ["a", "b"]


def test_text_is_pytes_display() -> None:
    emulator = Emulator(4, 12)
    emulator.feed("plain\r\n中文 wide\r\ne\u0301 combined\r\n\x1b[31mred\x1b[0m".encode())
    assert emulator.text() == pyte_display(emulator.screen)
    assert emulator.text() == "plain\n中文 wide\né combined\nred"


@pytest.mark.parametrize("seed", range(20))
def test_text_reads_a_row_by_the_cells_it_holds_as_pyte_does_by_column(seed: int) -> None:
    """Short rows on a wide screen, erased and reversed (DECSCNM) ones, wide characters: the
    text read from the cells a row holds is the text read column by column."""
    rng = random.Random(seed)
    emulator = Emulator(rng.randint(2, 8), rng.randint(4, 60))
    pieces = ["ab", "中", "e\u0301", "\r\n", "\x1b[2K", "\x1b[5G", "\x1b[?5h", "\x1b[?5l", " "]
    emulator.feed("".join(rng.choice(pieces) for _ in range(200)).encode())
    screen = emulator.screen
    assert emulator.text() == pyte_display(screen)
    by_column = [
        "".join(screen.buffer[y][x].data for x in range(screen.columns)).rstrip()
        for y in range(screen.lines)
    ]
    if all(row.isascii() for row in by_column):
        assert emulator.text() == "\n".join(by_column).rstrip("\n")


def test_a_wide_characters_stub_left_alone_shows_blank() -> None:
    """Overwriting the first half of a wide character leaves its stub: pyte's ``display`` then
    raised IndexError (so did the classifier's screen read)."""
    emulator = Emulator(2, 10)
    emulator.feed("中x\ra".encode())
    with pytest.raises(IndexError):
        pyte_display(emulator.screen)
    assert emulator.text() == "a x"


def test_a_parser_error_ends_only_that_feed() -> None:
    """pyte takes ``²`` for a digit of a CSI parameter and raises; the emulator goes on."""
    emulator = Emulator(2, 20)
    emulator.feed("a\x1b[²mb".encode())
    emulator.feed(b"c")
    assert emulator.text().endswith("c")


def test_an_erase_pyte_cannot_do_is_ignored() -> None:
    emulator = Emulator(2, 20)
    emulator.feed(b"abc\x1b[3Kdef")  # pyte's erase_in_line(3) read an unset local
    assert emulator.text() == "abcdef"


def test_resting_needs_the_parser_between_sequences_and_whole_characters() -> None:
    emulator = Emulator(5, 20)
    emulator.feed(b"x\r\n")
    assert emulator.resting() == (0, 4)
    emulator.feed(b"\x1b]0;tit")  # inside an OSC
    assert emulator.resting() is None
    emulator.feed(b"le\x07\xe4")  # half a UTF-8 character
    assert emulator.resting() is None
    emulator.feed(b"\xb8\xad\x1b[2;4r\x1b[3;1H")  # a region, the cursor inside it
    assert emulator.resting() == (1, 3)
    emulator.feed(b"\x1b[2;1H")  # on the region's top row: not yet
    assert emulator.resting() is None


@pytest.mark.parametrize("cut", [None, 1, 2, 3, 4])
def test_a_character_set_switch_applies_from_the_next_byte(cut: int | None) -> None:
    """pyte decoded a whole feed before parsing it, so what followed ``ESC % @`` in the same
    feed was still read as UTF-8: the screen depended on where the reads were cut."""
    data = b"\x1b%@\xe9\x1b%G\xc3\xa9"
    theirs = pyte.Screen(10, 1)
    pyte.ByteStream(theirs).feed(data)
    assert pyte_display(theirs) == "\ufffdé"
    emulator = Emulator(1, 10)
    for piece in [data] if cut is None else [data[:cut], data[cut:]]:
        emulator.feed(piece)
    assert emulator.text() == "éé"
