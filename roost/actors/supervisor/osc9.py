"""OSC 9 in a PTY's bytes: the desktop notifications a CLI sends its terminal, as signals.

OSC 9 is ``ESC ] 9 ; text`` ended by BEL or ST (``ESC \\``). codex sends one when a turn ends and
when it asks for an approval, when launched to (its adapter's launch does). ``Osc9Scanner`` finds
them in the output as it is read, a sequence split across reads included; it costs one
``bytes.find`` per read without one. It only reads: the terminal emulator gets every byte as
before (pyte ignores an OSC it does not know).

What a notification's text means is the provider's knowledge: its adapter's ``osc9`` rules, carried
in the launch spec, map the text to a signal kind (``rules``), the first matching rule winning.
"""

from __future__ import annotations

import re
from typing import Any

from roost.wire import signals as ws

OPEN = b"\x1b]9;"
END = re.compile(rb"\x07|\x1b\\")
MAX_TEXT = 4096  # an OSC 9 whose end does not come within this many bytes is dropped
# A partial opener at a read's end: ESC, ESC ], ESC ] 9.
_PARTIAL = (b"\x1b", b"\x1b]", b"\x1b]9")


class Osc9Scanner:
    """Stateful: ``feed`` returns the texts of the OSC 9 sequences completed by ``data``, each
    with the offset (in the bytes fed so far) just past its end."""

    def __init__(self) -> None:
        self._held = b""  # an unfinished sequence (or a partial opener) at the last read's end
        self.fed = 0  # bytes fed so far

    def feed(self, data: bytes) -> list[tuple[str, int]]:
        base = self.fed - len(self._held)
        self.fed += len(data)
        if self._held:
            data, self._held = self._held + data, b""
        elif OPEN not in data and not data.endswith(_PARTIAL):
            return []
        found: list[tuple[str, int]] = []
        start = data.find(OPEN)
        while start >= 0:
            end = END.search(data, start + len(OPEN))
            if end is None:
                if len(data) - start <= MAX_TEXT:
                    self._held = data[start:]
                return found
            body = data[start + len(OPEN) : end.start()]
            if len(body) <= MAX_TEXT and b"\x1b" not in body:
                found.append((body.decode("utf-8", "replace"), base + end.end()))
            start = data.find(OPEN, end.end())
        for partial in _PARTIAL:
            if data.endswith(partial):
                self._held = partial
                break
        return found


Rule = tuple["re.Pattern[str]", ws.SignalKind, dict[str, Any]]


def rules(raw: object) -> list[Rule]:
    """A launch spec's ``osc9`` rules (a list of ``[pattern, kind, data]``) compiled; a rule
    that is not well formed is left out (the spec comes from this roost's own adapter)."""
    out: list[Rule] = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, list | tuple) or len(item) != 3:
            continue
        pattern, kind, data = item
        if isinstance(pattern, str) and kind in ws.KINDS and isinstance(data, dict):
            out.append((re.compile(pattern), kind, data))
    return out


def meaning(text: str, table: list[Rule]) -> tuple[ws.SignalKind, dict[str, Any]] | None:
    """The kind and data of the first rule that matches ``text`` (None: no rule does)."""
    for pattern, kind, data in table:
        if pattern.search(text):
            return kind, {**data, "message": text}
    return None
