"""Reading the reset time off a usage-limit screen.

The CLIs print the time a usage limit resets as a wall-clock time, to the minute, in the time zone
of the CLI's process: claude "resets 6:34pm (UTC)" (a date first, "Dec 4, 6pm", when it is more
than a day away), codex "try again at 6:30 PM." (or "Dec 4, 2026 6:30 PM"). A shown minute is the
minute the reset falls in, its seconds cut off, so the reset read is the end of that minute: a
continue typed then never comes before the limit has lifted.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# "Dec 4, 2026 6:30 PM", "Dec 4, 6pm", "6:34pm", "6 PM", then an optional "(Zone/Name)"
CLOCK = re.compile(
    r"(?:(?P<month>[A-Z][a-z]{2}) (?P<day>\d{1,2})(?:st|nd|rd|th)?,? (?:(?P<year>\d{4}),? )?)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))? ?(?P<half>[AaPp][Mm])\b"
    r"(?: \((?P<zone>[A-Za-z_+\-/0-9]+)\))?"
)
HALF_DAY = timedelta(hours=12)


def zone(name: str | None) -> tzinfo | None:
    """The time zone an IANA name (a ``TZ`` value, or claude's "(UTC)") names; None: unknown."""
    if not name:
        return None
    try:
        return ZoneInfo(name.lstrip(":"))
    except (ZoneInfoNotFoundError, ValueError):
        return None


def reset_time(text: str, now: float, tz: tzinfo | None = None) -> float | None:
    """The epoch second a usage limit shown as ``text`` resets (the first clock time in it), or
    None when it shows none. ``tz`` is the CLI's time zone (None: this process's local one), a
    zone named beside the time wins. A time without a date is today's, or tomorrow's when today's
    is more than half a day past: so up to a day ahead, and a screen still up a little after its
    reset shows a time just passed."""
    found = CLOCK.search(text)
    if found is None:
        return None
    hour, minute = int(found["hour"]), int(found["minute"] or 0)
    if not 1 <= hour <= 12 or minute > 59:
        return None
    hour = hour % 12 + (12 if found["half"].lower() == "pm" else 0)
    where = zone(found["zone"]) or tz
    here = datetime.fromtimestamp(now, where) if where else datetime.fromtimestamp(now).astimezone()
    shown = here.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if found["month"]:
        month = found["month"].lower()
        if month not in MONTHS:
            return None
        year = int(found["year"]) if found["year"] else here.year
        try:
            shown = shown.replace(year=year, month=MONTHS.index(month) + 1, day=int(found["day"]))
        except ValueError:
            return None
        if not found["year"] and shown < here - HALF_DAY:  # "Jan 2" seen in late December
            shown = shown.replace(year=year + 1)
    elif shown < here - HALF_DAY:
        shown += timedelta(days=1)
    return (shown + timedelta(minutes=1)).timestamp()


def screen_digest(screen: str) -> str:
    """What a supervisor reports of the screen it classified (``node.session.classified``'s
    ``screen``), and what the node's usage-limit policy compares with the live screen's."""
    return hashlib.sha256(screen.encode("utf-8", "replace")).hexdigest()[:32]
