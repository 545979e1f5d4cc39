"""What of a run of scrolling text can still be on the screen (roost.actors.supervisor.scrolling):
runs, the cut and the styles the skipped text leaves."""

from __future__ import annotations

import pyte
import pytest

from roost.actors.supervisor import scrolling


def lines(n: int, width: int = 30, end: bytes = b"\r\n") -> bytes:
    return b"".join(b"%05d " % i + b"x" * (width - 6) + end for i in range(n))


def test_a_run_is_text_styles_and_row_erases_only() -> None:
    flood = lines(200)
    data = b"\x1b[H" + flood + b"\x1b[31m" + flood + b"\x1b[2K\x1b[1;5r" + flood
    # a run ends at the ESC of a sequence that is not SGR or EL (here CSI r, a region); the
    # rest of that sequence is printable and begins the next run, which is why the terminal
    # feeds a run's first row before asking whether pyte is between sequences
    assert scrolling.runs(data) == [
        (1, len(data) - len(flood) - 6),
        (len(data) - len(flood) - 5, len(data)),
    ]
    # a C1 control in UTF-8 (U+009B, CSI) ends a run; other UTF-8 does not
    assert scrolling.runs(flood + "é中".encode() + flood) == [(0, 2 * len(flood) + 5)]
    assert [len(flood)] == [end for _, end in scrolling.runs(flood + b"\xc2\x9b" + flood)][:1]
    assert scrolling.runs(b"short\r\n" * 10) == []  # under MIN_SKIP: not worth a cut


def test_the_cut_leaves_height_line_feeds_after_it_and_needs_height_minus_one_before() -> None:
    data = lines(300)
    point = scrolling.cut(data, 0, len(data), 50)
    assert point is not None and data[point - 2 : point] == b"\r\n"
    assert data.count(b"\n", point) == 50
    assert scrolling.cut(data, 0, len(data), 200) is None  # 100 before it: too few
    assert scrolling.cut(data, 0, len(data), 1) is None  # a one-row region: never
    assert scrolling.cut(lines(300, end=b"\n"), 0, 9000, 10) is None  # no CR: column unknown


def test_the_cut_lands_after_a_cr_lf_even_among_bare_line_feeds() -> None:
    data = lines(100) + lines(20, end=b"\n")
    point = scrolling.cut(data, 0, len(data), 10)
    assert point == len(lines(100))


def test_styles_keeps_each_sgr_at_its_last_place() -> None:
    data = b"\x1b[1ma\x1b[31mb\x1b[1mc\x1b[0md\x1b[31m\x1b[44me\x1b[0m\x1b[31m"
    assert scrolling.styles(data, 0, len(data)) == b"\x1b[1m\x1b[44m\x1b[0m\x1b[31m"


@pytest.mark.parametrize(
    "sgrs",
    [
        [b"1", b"31", b"1", b"0", b"31", b"44", b"0", b"31"],
        [b"7", b"38;5;111", b"27", b"", b"4", b"38;5;111", b"24"],
        [b"0;1", b"32", b";4", b"1", b"22", b"32"],
        [b"38;2;1;2;3", b"39", b"38;2;1;2;3", b"48;5;9", b"49", b"1;31;44", b"0;7"],
    ],
)
def test_the_kept_styles_leave_pyte_where_all_of_them_do(sgrs: list[bytes]) -> None:
    data = b"".join(b"\x1b[" + sgr + b"m" for sgr in sgrs)
    every, kept = pyte.Screen(10, 2), pyte.Screen(10, 2)
    pyte.ByteStream(every).feed(data)
    pyte.ByteStream(kept).feed(scrolling.styles(data, 0, len(data)))
    assert kept.cursor.attrs == every.cursor.attrs
