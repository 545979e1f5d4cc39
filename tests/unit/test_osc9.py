"""OSC 9 notifications in a PTY's bytes (supervisor.osc9), and codex's rules for them."""

from __future__ import annotations

from roost.actors.supervisor.osc9 import MAX_TEXT, Osc9Scanner, meaning, rules
from roost.actors.supervisor.terminal import Terminal
from roost.adapters.codex import CodexAdapter


def feed_all(chunks: list[bytes]) -> list[tuple[str, int]]:
    scanner = Osc9Scanner()
    return [found for chunk in chunks for found in scanner.feed(chunk)]


def test_bel_and_st_end_a_notification_and_the_offset_is_just_past_it() -> None:
    data = b"a\x1b]9;Hello\x07b\x1b]9;Approval requested: ls\x1b\\c"
    assert feed_all([data]) == [
        ("Hello", data.index(b"b")),
        ("Approval requested: ls", data.index(b"c")),
    ]


def test_a_notification_split_across_reads_is_found_once_wherever_it_is_cut() -> None:
    data = b"\x1b[2Jdone\x1b]0;title\x07\x1b]9;Hello from the mock.\x07\x1b[?2026h more"
    whole = feed_all([data])
    assert whole == [("Hello from the mock.", data.index(b"\x1b[?2026h"))]
    for cut in range(1, len(data)):
        assert feed_all([data[:cut], data[cut:]]) == whole, cut
    assert feed_all([bytes([b]) for b in data]) == whole  # a byte a read


def test_other_sequences_and_garbage_are_not_notifications() -> None:
    assert feed_all([b"\x1b]0;title\x07\x1b]7501;state=done:app=codex\x1b\\plain text"]) == []
    assert feed_all([b"\x1b]99;x\x07\x1b]9x\x07\x1b9;x\x07"]) == []
    # an opener whose end never comes is dropped past MAX_TEXT, and scanning goes on
    scanner = Osc9Scanner()
    assert scanner.feed(b"\x1b]9;" + b"x" * (MAX_TEXT + 10)) == []
    assert scanner.feed(b"\x07\x1b]9;next\x07") == [("next", 4 + MAX_TEXT + 10 + 1 + 9)]
    # an escape sequence inside its text ends nothing: the text is refused whole
    assert feed_all([b"\x1b]9;bad\x1b[31m red\x07\x1b]9;ok\x07"]) == [("ok", 24)]


def test_a_read_without_an_opener_costs_nothing_held() -> None:
    scanner = Osc9Scanner()
    assert scanner.feed(b"x" * 100_000) == [] and scanner._held == b""
    assert scanner.feed(b"tail\x1b") == [] and scanner._held == b"\x1b"
    assert scanner.feed(b"[0m") == [] and scanner._held == b""
    assert scanner.fed == 100_008


def test_codex_rules_read_approvals_and_turn_ends() -> None:
    table = rules(CodexAdapter().osc9_rules())
    assert meaning("Approval requested: touch ../outside_by_mock.txt", table) == (
        "attention",
        {"reason": "permission", "message": "Approval requested: touch ../outside_by_mock.txt"},
    )
    assert meaning("Codex wants to edit main.py", table) == (
        "attention",
        {"reason": "permission", "message": "Codex wants to edit main.py"},
    )
    assert meaning("Hello from the mock.", table) == (
        "turn-end",
        {"status": "ok", "message": "Hello from the mock."},
    )
    assert meaning("4;1;50", table) is None  # a terminal progress report, not a turn's end


def test_rules_that_are_not_well_formed_are_left_out() -> None:
    table = rules([["^x", "turn-end", {}], ["^y", "no-such-kind", {}], "junk", ["^z", "attention"]])
    assert [kind for _, kind, _ in table] == ["turn-end"]
    assert rules(None) == []


def test_the_screen_never_shows_a_notification_s_text() -> None:
    term = Terminal(5, 40)
    term.feed(b"abc\x1b]9;Hello from the mock.\x07def\x1b]9;Approval requested: x\x1b\\ghi")
    assert term.text().splitlines()[0] == "abcdefghi"
