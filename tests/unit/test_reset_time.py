"""Reading a usage limit's reset time off a screen (roost.adapters.limits)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from roost.adapters.limits import reset_time, screen_digest, zone

NOW = datetime(2026, 12, 3, 18, 29, 25, tzinfo=UTC).timestamp()


def utc(year: int, month: int, day: int, hour: int, minute: int) -> float:
    return datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the end of the minute shown: the seconds were cut off
        ("6:30 PM.", utc(2026, 12, 3, 18, 31)),
        ("6:34pm (UTC)", utc(2026, 12, 3, 18, 35)),
        ("7pm", utc(2026, 12, 3, 19, 1)),
        ("12:05 AM", utc(2026, 12, 4, 0, 6)),  # after midnight: tomorrow
        ("12:10 PM", utc(2026, 12, 3, 12, 11)),  # earlier today: a reset just passed
        ("6:29 AM", utc(2026, 12, 4, 6, 30)),  # twelve hours back: tomorrow's
        ("Dec 5, 6pm (UTC)", utc(2026, 12, 5, 18, 1)),
        ("Jan 2, 2027 6:30 PM", utc(2027, 1, 2, 18, 31)),
        ("Jan 2, 9am", utc(2027, 1, 2, 9, 1)),  # a date without a year, seen in December
        ("at6:30PM.", utc(2026, 12, 3, 18, 31)),  # a wrapped cell joined without its space
    ],
)
def test_a_shown_time_is_the_end_of_its_minute(text: str, expected: float) -> None:
    assert reset_time(text, NOW, UTC) == expected


def test_a_zone_named_beside_the_time_wins() -> None:
    assert reset_time("6:34pm (Asia/Tokyo)", NOW, UTC) == utc(2026, 12, 4, 9, 35)
    # a zone the system does not know: the CLI's zone
    assert reset_time("6:34pm (Mars/Olympus)", NOW, UTC) == utc(2026, 12, 3, 18, 35)


@pytest.mark.parametrize("text", ["later", "13:30 PM", "6:75 pm", "Feb 30, 6pm", "in 70s"])
def test_no_time_or_an_impossible_one_is_none(text: str) -> None:
    assert reset_time(text, NOW, UTC) is None


def test_zones_and_digests() -> None:
    assert zone("Europe/Paris") == ZoneInfo("Europe/Paris")
    assert zone(":UTC") == ZoneInfo("UTC")  # a TZ value may start with ":"
    assert zone("") is None and zone("no/such") is None
    assert screen_digest("a") == screen_digest("a") != screen_digest("b")
