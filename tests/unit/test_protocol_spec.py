"""docs/PROTOCOL.md and the code list the same client methods, event kinds and error codes.

The spec is split at its ``## `` headings; methods and event kinds are the ``### `name` ``
headings of the "Client methods" and "Events" sections, error codes the backticked first column
of the table headed ``| code | ...`` in the "Error codes" section.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgpack

from roost.wire.errors import CODES
from roost.wire.protocol import CLIENT_METHODS, EVENT_KINDS

SPEC = Path(__file__).resolve().parents[2] / "docs" / "PROTOCOL.md"
NAME_HEADING = re.compile(r"^### `([^`]+)`\s*$", re.MULTILINE)
CODE_TABLE = re.compile(r"^\| code \|.*\n\|[-| ]+\|\n((?:\|.*\n)+)", re.MULTILINE)
CODE_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|", re.MULTILINE)
HEX_BLOCK = re.compile(r"as msgpack \(hex\):\n\n```text\n([0-9a-f\n]+)```")


def sections() -> dict[str, str]:
    """Section title (without its number) -> section text, for every ``## `` heading."""
    out: dict[str, str] = {}
    title = ""
    for line in SPEC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            title = re.sub(r"^\d+\.\s*", "", line[3:]).strip()
            if title in out:
                raise AssertionError(f"two sections titled {title!r}")
            out[title] = ""
        elif title:
            out[title] += line + "\n"
    return out


def names(pattern: re.Pattern[str], text: str) -> list[str]:
    found = pattern.findall(text)
    assert len(found) == len(set(found)), f"duplicates: {sorted(found)}"
    return found


def test_methods_match_code() -> None:
    assert set(names(NAME_HEADING, sections()["Client methods"])) == set(CLIENT_METHODS)


def test_event_kinds_match_code() -> None:
    assert set(names(NAME_HEADING, sections()["Events"])) == set(EVENT_KINDS)


def test_error_codes_match_code() -> None:
    tables = CODE_TABLE.findall(sections()["Error codes"])
    assert len(tables) == 1, "the Error codes section needs exactly one '| code | ...' table"
    assert set(names(CODE_ROW, tables[0])) == set(CODES)


def test_every_method_has_a_msgpack_example() -> None:
    parts = NAME_HEADING.split(sections()["Client methods"])[1:]
    for method, text in zip(parts[::2], parts[1::2], strict=True):
        blocks = HEX_BLOCK.findall(text)
        assert blocks, f"{method} has no msgpack example"
        for block in blocks:
            decoded = msgpack.unpackb(bytes.fromhex(block.replace("\n", "")), raw=False)
            assert isinstance(decoded, dict), method
