"""What ``roost ls`` prints, click-free: the records table, the JSON document, the hub's
"did not answer" lines. The click command (``roost.cli.sessions``) and the fast path that
answers ``roost ls`` without click or pyzmq (``roost.cli.quick``) both print with it, so the
two are the same bytes.
"""

from __future__ import annotations

from roost.cli.table import Column, render

TYPE_CHECKING = False  # not typing's: its import costs the fast path ~4 ms (mypy reads this)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

# What gives way to a narrow terminal, what a person needs least first (roost.cli.table): the
# generation, the mode, a long name down to 24 cells, then the provider session id (left out
# whole: `show` and `--json` have it); names and the state with its reason are cut last.
RECORD_COLUMNS = (
    Column("ID"),
    Column("NAME", shrink=True, floor=7, soft=24, give=3),
    Column("PROVIDER"),
    Column("MODE", drop=2),
    Column("STATE", shrink=True, floor=10),
    Column("GEN", drop=1),
    Column("PROVIDER SESSION", drop=4),
)


def records_table(records: Iterable[dict[str, Any]], width: int | None = None) -> str:
    """One row a record; through a hub, led by the node that holds it. Columns give way to
    ``width`` as ``RECORD_COLUMNS`` says; ids and provider session ids are never cut."""
    records = list(records)
    nodes = any("node" in rec for rec in records)
    columns = (Column("NODE"), *RECORD_COLUMNS) if nodes else RECORD_COLUMNS
    rows = []
    for rec in records:
        state = rec["state"] + (f" ({rec['attention']})" if rec.get("attention") else "")
        rows.append(
            [
                *([rec.get("node") or "-"] if nodes else []),
                rec["id"],
                printable(rec.get("name") or "-"),
                rec["provider"],
                rec["mode"],
                state,
                str(rec["generation"]),
                rec.get("provider_session") or "-",
            ]
        )
    return render(columns, rows, width)


def printable(text: str) -> str:
    """A value shown on one line: control characters as ``?``."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def _default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(type(value).__name__)


def json_text(doc: Any) -> str:
    """One JSON document as ``--json`` prints it (keys sorted, bytes as text)."""
    return dumps(doc, ensure_ascii=True)


def compact(value: Any) -> str:
    """Structured data on one line, as JSON (event data, operation results)."""
    return dumps(value, ensure_ascii=False)


def dumps(value: Any, ensure_ascii: bool) -> str:
    """``json.dumps(value, default=..., ensure_ascii=..., sort_keys=True)``, by the same C
    encoder json's own ``dumps`` calls, without json's import: that imports its decoder, and
    with it re and enum (~11 ms of a fast-path start; ``test_quick`` compares the two)."""
    try:
        from _json import encode_basestring, encode_basestring_ascii, make_encoder
    except ImportError:  # an interpreter without json's accelerator
        import json

        return json.dumps(value, default=_default, ensure_ascii=ensure_ascii, sort_keys=True)
    string = encode_basestring_ascii if ensure_ascii else encode_basestring
    if isinstance(value, str):
        return str(string(value))
    encode = make_encoder({}, _default, string, None, ": ", ", ", True, False, True)
    return "".join(encode(value, 0))


def ls_text(doc: dict[str, Any], width: int | None) -> tuple[str, list[str]]:
    """``session.list``'s reply as ``roost ls`` prints it: what goes to stdout (without the
    last newline) and the lines for stderr (nodes behind a hub that did not answer)."""
    out = records_table(doc["records"], width) if doc["records"] else "no records"
    unanswered = sorted((doc.get("unanswered") or {}).items())
    return out, [f"node {node} did not answer: {code}" for node, code in unanswered]
