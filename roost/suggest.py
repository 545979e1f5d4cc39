"""``did you mean ...``: the close matches of a mistyped id, name or provider among the known ones.

Shared by the node (providers) and the CLI (record ids and names); plain functions of strings.
"""

from __future__ import annotations

from collections.abc import Iterable

CUTOFF = 0.6  # difflib's similarity ratio a candidate needs to be suggested


def close_matches(word: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The candidates nearest ``word``, best first: same text in another case, then those that
    start with it or it with them (a cut-off id), then difflib's close matches."""
    known = sorted({c for c in candidates if c and c != word})
    lowered = word.lower()
    first = [c for c in known if c.lower() == lowered]
    prefix = [c for c in known if len(word) >= 3 and c.lower().startswith(lowered)]
    prefix += [c for c in known if len(c) >= 3 and lowered.startswith(c.lower())]
    import difflib  # only when a name was mistyped: not on every command's start

    fuzzy = difflib.get_close_matches(word, known, n=n, cutoff=CUTOFF)
    fuzzy += difflib.get_close_matches(lowered, [c.lower() for c in known], n=n, cutoff=CUTOFF)
    by_lower = {c.lower(): c for c in known}
    out: list[str] = []
    for c in [*first, *prefix, *fuzzy]:
        c = c if c in known else by_lower.get(c, c)
        if c not in out:
            out.append(c)
    return out[:n]


def did_you_mean(matches: list[str]) -> str:
    """``did you mean 'a'?`` / ``did you mean 'a' or 'b'?``; empty without matches."""
    if not matches:
        return ""
    quoted = [repr(m) for m in matches]
    said = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"did you mean {said}?"
