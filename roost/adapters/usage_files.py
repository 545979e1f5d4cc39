"""A provider session's tokens so far, read from the files its CLI writes (pty sessions).

* codex 0.171.0: each request adds an ``event_msg`` ``token_count`` to the thread's rollout,
  whose ``info.total_token_usage`` is the thread's total so far (``input_tokens`` counting the
  cached ones in, ``cached_input_tokens``, ``output_tokens``); the last one holds.
* Kimi Code 2.1.0: each request adds a ``usage.record`` line to the agent's
  ``agents/<agent>/wire.jsonl`` in the session's folder (``inputOther``, ``output``,
  ``inputCacheRead``, ``inputCacheCreation``); the session's total is their sum, over every agent.
* claude 2.1.332: each model answer is written to the transcript
  ``projects/<cwd as a slug>/<session id>.jsonl`` under its config folder, one line per content
  block, each carrying the whole answer's ``message.usage``: the total is the sum over the
  distinct ``message.id``. Requests outside the conversation (a title, a quota check) are not
  in it; claude's cost, which counts them, comes from its statusline.

None of these CLIs writes a cost. Lines that do not parse (one being written) are skipped; a
file that cannot be read gives None.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from roost.wire import usage as u

TAIL_BYTES = 256 * 1024  # codex: the last token_count is near the end


def _lines(path: Path, marker: str, tail: int | None = None) -> Iterator[dict[str, object]]:
    """The JSON objects of the lines of ``path`` that contain ``marker`` (raises OSError)."""
    with path.open("rb") as fh:
        if tail is not None:
            fh.seek(max(0, path.stat().st_size - tail))
        data = fh.read().decode("utf-8", "replace")
    for line in data.splitlines():
        if marker in line:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                yield obj


def codex_totals(rollout: Path) -> u.Usage | None:
    """The thread's total in the rollout's last ``token_count`` (None before the first)."""
    try:
        found = None
        for obj in _lines(rollout, '"token_count"', TAIL_BYTES):
            payload = obj.get("payload")
            info = payload.get("info") if isinstance(payload, dict) else None
            if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
                found = info["total_token_usage"]
    except OSError:
        return None
    return u.from_openai(found)


def kimi_totals(session_dir: Path) -> u.Usage | None:
    """The sum of every ``usage.record`` of the session's agents (None: no wire file)."""
    total, seen = u.zero(), False
    for wire in sorted(session_dir.glob("agents/*/wire.jsonl")):
        try:
            for obj in _lines(wire, '"usage.record"'):
                if obj.get("type") == "usage.record" and (got := u.from_kimi(obj.get("usage"))):
                    total, seen = u.add(total, got), True
        except OSError:
            continue
    return total if seen else None


def claude_totals(transcript: Path) -> u.Usage | None:
    """The sum of the usage of each distinct assistant message of the transcript."""
    answers: dict[str, u.Usage] = {}
    try:
        for obj in _lines(transcript, '"usage"'):
            message = obj.get("message")
            if obj.get("type") != "assistant" or not isinstance(message, dict):
                continue
            got = u.from_anthropic(message.get("usage"))
            if got is not None:
                answers[str(message.get("id") or len(answers))] = got
    except OSError:
        return None
    total = u.zero()
    for got in answers.values():
        total = u.add(total, got)
    return total if answers else None
