"""Escape sequences pyte does not know, removed before it reads them (supervisor.escapes), and
the screens of the real CLIs' raw output that showed stray characters.

The byte strings are cut from raw output of claude 2.1.332, codex 0.171.0 and Kimi Code 2.1.0
logged in a bare PTY (as a supervisor runs them, nobody answering their queries).
"""

from __future__ import annotations

import pyte
import pytest

from roost.actors.supervisor.escapes import EscapeFilter
from roost.actors.supervisor.terminal import Terminal

# claude at exit (the kitty keyboard pop "CSI < u" among the mode resets), then its resume hint
CLAUDE_EXIT = (
    b"\x1b[7C\x1b[22A\x1b[?1006l\x1b[?1003l\x1b[?1002l\x1b[?1000l\x1b[7D\x1b[22B\x1b[?1004l"
    b"\x1b[>4m\x1b[<u\x1b[?2031l\x1b[?2004l\x1b(B\x0f\x1b[?1016l\x1b[?1006l\x1b[?1003l"
    b"\x1b[?1002l\x1b[?1000l\x1b[?7h\x1b[?25h\x1b7\x1b[r\x1b8\x1b]0;\x07\x1b[2m\x1b[22m\r\n"
    b"\x1b[2mResume this session with:\x1b[22m\r\n"
    b"\x1b[2mclaude --resume f9e0d7d6-3951-4f5f-8ef4-0849a1dee84e\x1b[22m\r\n\x1b[2m\x1b[22m"
)
# codex leaving its TUI: two kitty pops "CSI < 1 u" and one "CSI < u" (pyte drew "1u1uu")
CODEX_EXIT = (
    b"\x1b[1;1H\x1b[J\x1b]0;\x07\x1b[?1006l\x1b[?1015l\x1b[?1003l\x1b[?1002l\x1b[?1000l"
    b"\x1b[<1u\x1b[?1007l\x1b[?1049l\x1b[<1u\x1b[<u\x1b[>4;0m\x1b[?2004l\x1b[?1004l\x1b[0 q"
    b"\x1b[?25h\x1b]7501;state=clear\x1b\\\x1b[0 q\x1b[?25hTo continue this session, run:\r\n"
    b"  \x1b[36mcodex resume 01a23154-813e-7310-bc54-a67eb6d7dedf\x1b[39m\r\n"
)
# kimi starting: kitty push "CSI > 7 u" and query "CSI ? u", its colour-scheme query
# "CSI ? 996 n" (pyte raised TypeError on it) and modifyOtherKeys "CSI > 4 ; 2 m"
KIMI_START = (
    b"\x1b]11;?\x07\x1b[?2026h \x1b[0m\x1b]8;;\x07\x1b[?2026l\x1b[?25l\x1b[?2004h\x1b[>7u"
    b"\x1b[?u\x1b[c\x1b[?25l\x1b[?1004h\x1b[?2031h\x1b]11;?\x07\x1b[?996n\x1b[>4;2m"
    b"\x1b[?2026h\r\r\n\x1b[2K \x1b[38;5;111m\xe2\x95\xad\xe2\x94\x80\xe2\x95\xae\x1b[39m"
)
# claude starting: XTVERSION, DECRQM queries, the kitty query and a kitty graphics query (APC)
CLAUDE_START = (
    b"\x1b[?2026$p\x1b[?1016$p\x1b[>0q\x1b[?u\x1b_Gi=31,s=1,v=1,a=q,t=d,f=24;AAAA\x1b\\"
    b"\x1b[c Claude Code v2.1.332"
)


def screen(data: bytes, *, rows: int = 6, cols: int = 60) -> str:
    term = Terminal(rows, cols)
    term.feed(data)
    return term.text()


def pyte_screen(data: bytes) -> str:
    """What pyte alone makes of the bytes (the screens the testers saw)."""
    scr = pyte.Screen(60, 6)
    pyte.ByteStream(scr).feed(data)
    return "\n".join(line.rstrip() for line in scr.display).strip("\n")


def test_claude_exit_leaves_no_stray_u() -> None:
    assert "u" in pyte_screen(CLAUDE_EXIT).splitlines()  # the fault, as pyte shows it
    assert [line for line in screen(CLAUDE_EXIT, rows=10).splitlines() if line] == [
        "Resume this session with:",
        "claude --resume f9e0d7d6-3951-4f5f-8ef4-0849a1dee84e",
    ]


def test_codex_exit_leaves_no_1u1uu() -> None:
    assert "1u1uu" in pyte_screen(CODEX_EXIT)
    assert screen(CODEX_EXIT).splitlines() == [
        "To continue this session, run:",
        "  codex resume 01a23154-813e-7310-bc54-a67eb6d7dedf",
    ]


def test_kimi_start_neither_raises_nor_underlines() -> None:
    with pytest.raises(TypeError):
        pyte_screen(KIMI_START)
    term = Terminal(4, 20)
    term.feed(KIMI_START)
    term.feed(b"text")
    assert term.text() == "\n ╭─╮text"
    assert not term.screen.buffer[1][5].underscore  # "CSI > 4 ; 2 m" is not SGR 4


def test_claude_start_shows_no_graphics_query() -> None:
    assert "Gi=31" in pyte_screen(CLAUDE_START)
    assert screen(CLAUDE_START) == " Claude Code v2.1.332"


@pytest.mark.parametrize(
    "seq",
    [
        b"\x1b[<u",
        b"\x1b[<1u",
        b"\x1b[>1u",
        b"\x1b[>7u",
        b"\x1b[?u",
        b"\x1b[=5;1u",
        b"\x1b[>4;0m",
        b"\x1b[>4m",
        b"\x1b[>0q",
        b"\x1b[?996n",
        b"\x1b[?6n",
        b"\x1b[?4m",
        b"\x1b[0 q",
        b"\x1b[?2026$p",
        b"\x1b[4:3m",
        b"\x1b[38:2::255:0:0m",
        b"\x1bP>|xterm(1)\x1b\\",
        b"\x1b_Gi=31;AAAA\x1b\\",
        b"\x1b^private\x07",
        b"\x1bXstring\x1b\\",
    ],
)
def test_unknown_sequences_show_nothing(seq: bytes) -> None:
    assert screen(b"a" + seq + b"b") == "ab"
    assert EscapeFilter().feed(b"a" + seq + b"b") == b"ab"


@pytest.mark.parametrize(
    "seq",
    [
        b"\x1b[31m",
        b"\x1b[38;5;246m",
        b"\x1b[2J",
        b"\x1b[?25l",
        b"\x1b[?2004h",
        b"\x1b[?1049l",
        b"\x1b[2K",
        b"\x1b[12G",
        b"\x1b[c",
        b"\x1b]0;title\x07",
        b"\x1b]8;;https://example.org\x1b\\",
        b"\x1b7",
    ],
)
def test_sequences_pyte_knows_pass_through(seq: bytes) -> None:
    assert EscapeFilter().feed(b"a" + seq + b"b") == b"a" + seq + b"b"


@pytest.mark.parametrize("cut", range(1, 12))
def test_a_sequence_split_across_reads_is_still_removed(cut: int) -> None:
    data = b"x\x1b[<1u\x1b_Ga=q\x1b\\y"
    filt = EscapeFilter()
    assert filt.feed(data[:cut]) + filt.feed(data[cut:]) == b"xy"


def test_an_unterminated_string_is_held_then_dropped_whole() -> None:
    filt = EscapeFilter()
    assert filt.feed(b"a\x1bPdata") == b"a"
    assert filt.feed(b" more") == b""
    assert filt.feed(b"\x1b\\b") == b"b"


def test_a_string_control_ends_where_the_next_sequence_begins() -> None:
    """A stray opener swallows only up to the next ESC, as in a terminal's parser."""
    assert EscapeFilter().feed(b"a\x1b_oops\x1b[31mb\x1bPx\x18c") == b"a\x1b[31mbc"
    assert screen(b"a\x1b_oops\x1b[31mb") == "ab"


def test_a_refused_control_costs_only_itself() -> None:
    """A CSI whose parameters a pyte screen method refuses (too many) changes nothing."""
    assert screen(b"ab\x1b[1;2;3Acd") == "abcd"
