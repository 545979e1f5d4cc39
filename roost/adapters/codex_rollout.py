"""codex's rollout files as evidence: who a session is, whether it exists, whether a turn runs.

codex 0.171.0 writes each thread to ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<uuid>
.jsonl`` (folders by local time). The first line is a ``session_meta`` naming the id and the cwd;
every turn adds an ``event_msg`` ``task_started`` and, when it ends, ``task_complete`` (or
``turn_aborted`` when interrupted). A resume needs the file: without it codex gives up ("no
rollout found for thread id").
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
ROLLOUT_NAME = re.compile(rf"^rollout-.+-({UUID})\.jsonl$")
TAIL_BYTES = 256 * 1024  # the end of a rollout holds the latest turn's events
TURN_STARTED = "task_started"
TURN_ENDED = frozenset({"task_complete", "turn_aborted"})


def uuid7_time(ident: str) -> float | None:
    """The creation time (epoch seconds) in a UUIDv7, None for another version."""
    digits = ident.replace("-", "")
    if len(digits) != 32 or digits[12] != "7":
        return None
    return int(digits[:12], 16) / 1000


def rollouts(sessions: Path, since: float) -> Iterator[Path]:
    """Rollout files in the day folders that can hold a thread started since ``since`` (folders
    are named by codex's local time, so the day before is read as well)."""
    start = dt.date.fromtimestamp(since) - dt.timedelta(days=1)
    for year in _numbered(sessions, start.year):
        for month in _numbered(year, 1):
            for day in _numbered(month, 1):
                named = (int(year.name), int(month.name), int(day.name))
                if named >= (start.year, start.month, start.day):
                    yield from day.glob("rollout-*.jsonl")


def _numbered(folder: Path, least: int) -> Iterator[Path]:
    """Sub-folders named by a number at least ``least``."""
    if folder.is_dir():
        yield from (p for p in folder.iterdir() if p.name.isdigit() and int(p.name) >= least)


def find_rollout(sessions: Path, ident: str) -> Path | None:
    """The rollout file of thread ``ident``: looked for from the day its UUIDv7 was made (any day
    for another id), None when there is none."""
    if re.fullmatch(UUID, ident) is None:
        return None
    made = uuid7_time(ident)
    for path in rollouts(sessions, made if made is not None else 0.0):
        if path.name.endswith(f"-{ident}.jsonl"):
            return path
    return None


def first_thread(sessions: Path, since: float, cwd: str, *, pty: bool) -> str | None:
    """The oldest thread started since the launch in this cwd: with two sessions launched in
    one cwd, the later launch never sees the earlier one's thread (it predates ``since``)."""
    found: list[tuple[float, str]] = []
    for path in rollouts(sessions, since):
        match = ROLLOUT_NAME.match(path.name)
        if match is None:
            continue
        ident = match.group(1)
        started = uuid7_time(ident)
        if started is None or started < since - 0.05:  # ms resolution of the id
            continue
        if meta_matches(path, ident, cwd, pty=pty):
            found.append((started, ident))
    return min(found)[1] if found else None


def meta_matches(path: Path, ident: str, cwd: str, *, pty: bool) -> bool:
    """The file's ``session_meta`` names ``ident`` in ``cwd`` (for a pty session, a TUI thread:
    never an exec turn or a sub-agent, whose source is a map)."""
    try:
        with path.open(encoding="utf-8") as fh:
            meta = json.loads(fh.readline())
    except (OSError, ValueError, UnicodeDecodeError):
        return False  # still being written, or not codex's
    payload = meta.get("payload") if isinstance(meta, dict) else None
    if not isinstance(payload, dict) or meta.get("type") != "session_meta":
        return False
    if payload.get("id", ident) != ident or not isinstance(payload.get("cwd"), str):
        return False
    source = payload.get("source", "cli")
    if pty and (not isinstance(source, str) or source == "exec"):
        return False
    return bool(os.path.realpath(payload["cwd"]) == os.path.realpath(cwd))


def turn_open(path: Path, since: float) -> bool:
    """The rollout's latest turn event is a ``task_started`` stamped at or after ``since`` (a
    turn left open by an earlier process, killed mid-turn, does not count)."""
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - TAIL_BYTES))
            tail = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return False
    for line in reversed(tail):
        kind, stamp = _turn_event(line)
        if kind == TURN_STARTED:
            return stamp is not None and stamp >= since
        if kind in TURN_ENDED:
            return False
    return False


def _turn_event(line: str) -> tuple[str | None, float | None]:
    """A turn event's type and time, else (None, None); other lines are not parsed."""
    if '"event_msg"' not in line or not any(k in line for k in (TURN_STARTED, *TURN_ENDED)):
        return None, None
    try:
        obj = json.loads(line)
    except ValueError:
        return None, None  # the cut first line of the tail, or a line being written
    payload = obj.get("payload") if isinstance(obj, dict) else None
    if obj.get("type") != "event_msg" or not isinstance(payload, dict):
        return None, None
    kind = payload.get("type")
    return (str(kind) if isinstance(kind, str) else None), _stamp(obj.get("timestamp"))


def _stamp(raw: object) -> float | None:
    if not isinstance(raw, str):
        return None
    try:
        return dt.datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
