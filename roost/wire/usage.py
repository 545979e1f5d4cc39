"""Token and cost figures of a turn or a session, one shape for every provider.

``Usage`` counts the tokens one turn (or a session so far) sent and received: ``input`` the
prompt tokens not read from a cache, ``cache_read`` those read from the provider's prompt cache,
``cache_write`` those written to it, ``output`` the tokens the model wrote; and ``cost_usd`` the
cost in US dollars when the CLI reports one (claude does; codex and kimi do not, and roost never
estimates one). So ``input + cache_read + cache_write`` is every prompt token, whichever
convention the vendor's API counts in (Anthropic's ``input_tokens`` leaves the cache out, the
OpenAI APIs' ``input_tokens`` and ``prompt_tokens`` count it in).

A provider reports either a turn's own figures (a headless turn's result) or its session's
figures so far (codex's rollout, kimi's wire file, claude's statusline); ``since`` turns two
reports of the second kind into the figures between them.
"""

# No ``from __future__ import annotations``: see roost.wire.messages.
from typing import Any, NotRequired, TypedDict

from roost.wire.errors import RoostError

MAX_TOKENS = 10**15  # far above any session's; a figure beyond it is refused as nonsense


class Usage(TypedDict):
    input: int
    output: int
    cache_read: int
    cache_write: int
    cost_usd: NotRequired[float]


def zero() -> Usage:
    return {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return 0
    return int(min(max(value, 0), MAX_TOKENS))


def _cost(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(min(max(value, 0.0), 1e9))


def make(
    input: Any = 0, output: Any = 0, cache_read: Any = 0, cache_write: Any = 0, cost: Any = None
) -> Usage:
    """A ``Usage`` from raw figures: missing, negative or non-numeric counts are 0, a cost that
    is not a number is left out."""
    usage: Usage = {
        "input": _count(input),
        "output": _count(output),
        "cache_read": _count(cache_read),
        "cache_write": _count(cache_write),
    }
    if (usd := _cost(cost)) is not None:
        usage["cost_usd"] = usd
    return usage


def check(raw: Any) -> Usage | None:
    """A ``Usage`` map from the wire (None when ``raw`` is not a map)."""
    if not isinstance(raw, dict):
        return None
    g = raw.get
    return make(g("input"), g("output"), g("cache_read"), g("cache_write"), g("cost_usd"))


def counts(usage: Usage) -> tuple[int, int, int, int]:
    """The token counts in ``TOKENS`` order."""
    return usage["input"], usage["output"], usage["cache_read"], usage["cache_write"]


def add(a: Usage, b: Usage) -> Usage:
    """The sum; its cost is known when either one's is."""
    total = make(*(x + y for x, y in zip(counts(a), counts(b), strict=True)))
    if "cost_usd" in a or "cost_usd" in b:
        total["cost_usd"] = a.get("cost_usd", 0.0) + b.get("cost_usd", 0.0)
    return total


def since(now: Usage, before: Usage | None) -> Usage:
    """The figures between two reports of a session's usage so far. A figure that went down
    means the provider started counting again (a new session behind the same id): all of
    ``now`` is new then."""
    if before is None:
        return now
    pairs = list(zip(counts(now), counts(before), strict=True))
    if any(x < y for x, y in pairs):
        return now
    if "cost_usd" in now and now["cost_usd"] < before.get("cost_usd", 0.0):
        return now
    delta = make(*(x - y for x, y in pairs))
    if "cost_usd" in now:
        delta["cost_usd"] = max(0.0, now["cost_usd"] - before.get("cost_usd", 0.0))
    return delta


def empty(usage: Usage) -> bool:
    return not any(counts(usage)) and not usage.get("cost_usd")


# -- each vendor's shapes ---------------------------------------------------------------------


def from_anthropic(raw: Any, cost: Any = None) -> Usage | None:
    """Anthropic's ``usage`` (claude's stream-json result, its transcript, its statusline's
    ``current_usage``): ``input_tokens`` leaves the cache out."""
    if not isinstance(raw, dict):
        return None
    return make(
        raw.get("input_tokens"),
        raw.get("output_tokens"),
        raw.get("cache_read_input_tokens"),
        raw.get("cache_creation_input_tokens"),
        cost,
    )


def from_openai(raw: Any) -> Usage | None:
    """codex's usage (``codex exec --json``'s ``turn.completed``, the rollout's ``token_count``):
    ``input_tokens`` counts the cached ones in (``cached_input_tokens``)."""
    if not isinstance(raw, dict):
        return None
    cached = _count(raw.get("cached_input_tokens"))
    return make(
        _count(raw.get("input_tokens")) - cached,
        raw.get("output_tokens"),
        cached,
        raw.get("cache_write_input_tokens"),
    )


def from_kimi(raw: Any) -> Usage | None:
    """Kimi Code's ``usage.record`` in its wire file: ``inputOther`` is the uncached input."""
    if not isinstance(raw, dict):
        return None
    return make(
        raw.get("inputOther"),
        raw.get("output"),
        raw.get("inputCacheRead"),
        raw.get("inputCacheCreation"),
    )


_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(when: str, now: float) -> float:
    """``WHEN`` as epoch seconds: a span back from ``now`` (``90m``, ``12h``, ``7d``, ``2w``) or
    an ISO date or date-time (UTC unless it names its offset); else ``bad-request``."""
    import datetime as dt  # here: the CLI's texts import this module, and only this needs it
    import re

    text = when.strip()
    if span := re.match(r"^(\d{1,6})([smhdw])$", text):
        return now - int(span.group(1)) * _UNIT_S[span.group(2)]
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise RoostError(
            "bad-request",
            f"--since {when[:40]!r} is neither a span (7d, 12h, 30m, 2w) nor an ISO date "
            "(2026-12-01 or 2026-12-01T08:00)",
            {"field": "since"},
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()
