"""The session's screen and its append-only transcript (roost.actors.supervisor.terminal)."""

from __future__ import annotations

from pathlib import Path

from roost.actors.supervisor.terminal import Terminal, Transcript, session_dir, write_private
from tests.unit.captures import capture_bytes


def test_text_shows_what_was_fed() -> None:
    term = Terminal(rows=5, cols=20)
    term.feed(b"hello\r\nworld")
    assert term.text() == "hello\nworld"
    assert term.cursor() == {"row": 1, "col": 5}


def test_text_of_a_blank_screen_is_empty() -> None:
    assert Terminal(rows=3, cols=10).text() == ""


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
    """Issue 11, rough edge 6: pyte cut rows from the top, so a screen with its text at the top
    went blank and the cursor stayed where no row was left."""
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
