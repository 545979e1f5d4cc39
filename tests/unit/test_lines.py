"""Splitting a provider's output into lines with a cap (roost.actors.runtime.lines)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from roost.actors.runtime.lines import Lines


def test_lines_split_across_chunks_keep_their_newlines() -> None:
    lines = Lines()
    assert lines.feed(b'{"a": 1}\n{"b"') == [(b'{"a": 1}\n', False)]
    assert lines.feed(b": 2}\n\n") == [(b'{"b": 2}\n', False), (b"\n", False)]
    assert lines.feed(b"tail") == []
    assert lines.end() == [(b"tail", False)]
    assert lines.end() == []


def test_a_line_over_the_cap_is_cut_and_flagged_and_the_next_is_whole() -> None:
    lines = Lines(cap=10)
    assert lines.feed(b"0123456789ABCDEF") == []
    assert lines.feed(b"GHIJ\nnext\n") == [(b"0123456789\n", True), (b"next\n", False)]
    assert lines.feed(b"x" * 25) == []
    assert lines.end() == [(b"x" * 10, True)]


@given(st.lists(st.binary(max_size=40), max_size=20), st.integers(min_value=1, max_value=30))
def test_whole_lines_come_out_as_they_went_in_however_chunked(
    chunks: list[bytes], cap: int
) -> None:
    lines = Lines(cap=cap)
    out = [pair for chunk in chunks for pair in lines.feed(chunk)] + lines.end()
    data = b"".join(chunks)
    expected = [piece + b"\n" for piece in data.split(b"\n")]
    expected[-1] = expected[-1][:-1]
    if not expected[-1]:
        expected.pop()
    assert [cut for _, cut in out] == [len(e.rstrip(b"\n")) > cap for e in expected]
    assert [line for line, _ in out] == [
        e if len(e.rstrip(b"\n")) <= cap else e[:cap] + (b"\n" if e.endswith(b"\n") else b"")
        for e in expected
    ]
