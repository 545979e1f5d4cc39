"""The escape sequences of the provider CLIs that pyte 0.8 does not know, removed before it reads.

pyte reads a CSI it does not know up to the first byte it cannot place and prints the rest, and it
prints the body of string controls it does not parse. The raw output of claude 2.1.332, codex
0.171.0 and Kimi Code 2.1.0, logged in a bare PTY as a supervisor runs them (nobody answering their
queries), holds these:

* kitty keyboard protocol: push ``CSI > 7 u`` (codex, kimi), query ``CSI ? u`` (all three), pop
  ``CSI < u`` (claude and kimi at exit; pyte printed ``u``) and ``CSI < 1 u`` (codex, twice, then
  ``CSI < u``: pyte printed ``1u1uu``); ``CSI = ... u`` (set) is removed too;
* other private-marker CSIs: modifyOtherKeys ``CSI > 4 ; 0 m``, ``CSI > 4 ; 2 m``, ``CSI > 4 m``
  (pyte took them for SGR 4, underline) and XTVERSION ``CSI > 0 q`` (claude);
* a private query pyte has no private form for: ``CSI ? 996 n`` (kimi's colour-scheme query; pyte
  raised TypeError, losing the rest of that read); ``CSI ? 6 n`` and the like go the same way;
* CSIs with intermediate bytes: DECRQM ``CSI ? 2026 $ p`` (claude, codex), cursor style
  ``CSI 0 SP q`` (codex); and with ``:`` sub-parameters (``CSI 4:3 m``), whose tail pyte drew;
* string controls: APC ``ESC _ G ... ESC \\`` (claude's kitty graphics query; pyte printed its
  body), and likewise DCS ``ESC P``, PM ``ESC ^``, SOS ``ESC X``, up to ST (``ESC \\``), BEL,
  CAN, SUB or the next escape sequence.

What pyte handles (SGR, cursor motion, erases, ``CSI ? n h/l`` modes, OSC titles and hyperlinks)
passes through untouched. A sequence split across two reads is held back until it is complete.
"""

from __future__ import annotations

import re

# A CSI that may be one pyte does not know: a marker (``<=>?``) or ``:`` among its parameters, or
# intermediate bytes. Plain ones (SGR, cursor motion: most of the output) and the private modes
# pyte knows (``CSI ? 25 l``, ``CSI ? 2026 h``: a TUI sets them around every repaint) never reach
# the callback.
CSI = re.compile(
    rb"\x1b\[(?!\?[0-9;]*[hlJKc])(?=[\x30-\x3f]*[:<=>?\x20-\x2f])"
    rb"([\x30-\x3f]*)([\x20-\x2f]*)([\x40-\x7e])"
)
# A string control ends at ST (ESC \), BEL, CAN or SUB, or where another escape sequence begins
# (as in a terminal's parser), so a stray opener costs the bytes up to the next ESC, not the rest.
STRING = re.compile(rb"\x1b[P_^X][^\x1b\x07\x18\x1a]*(?:\x1b\\|[\x07\x18\x1a]|(?=\x1b[^\\]))")
# The start of a sequence that may still be incomplete at the end of a read.
OPEN_STRING = re.compile(rb"\x1b[P_^X]")
OPEN_CSI = re.compile(rb"\x1b(?:\[[\x30-\x3f]*[\x20-\x2f]*)?\Z")
# Finals pyte implements in private form (modes, selective erases, device attributes).
PRIVATE_FINALS = b"hlJKc"
HOLD_LIMIT = 1 << 20  # an unterminated string control longer than this is dropped unread


def pyte_knows(params: bytes, intermediates: bytes, final: bytes) -> bool:
    """Whether pyte parses this CSI as a terminal would (else it prints part of it, or raises)."""
    if intermediates or b":" in params or params[:1] in (b"<", b"=", b">"):
        return False
    if params[:1] == b"?":
        return final in PRIVATE_FINALS and b"?" not in params[1:]
    return b"?" not in params


def _keep_known(match: re.Match[bytes]) -> bytes:
    return match.group(0) if pyte_knows(*match.groups()) else b""


class EscapeFilter:
    """Stateful: ``feed`` returns what pyte may see of the bytes so far."""

    def __init__(self) -> None:
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        data = STRING.sub(b"", self._held + data)
        self._held = b""
        cut = _open_tail(data)
        if cut is not None:
            self._held, data = data[cut:], data[:cut]
            if len(self._held) > HOLD_LIMIT:
                self._held = b""
        return CSI.sub(_keep_known, data)


def _open_tail(data: bytes) -> int | None:
    """Where an unfinished sequence begins at the end of ``data`` (None: nothing is unfinished)."""
    opened = OPEN_STRING.search(data)  # complete strings are gone: this one has no end yet
    if opened is not None:
        return opened.start()
    last = data.rfind(b"\x1b")
    if last >= 0 and OPEN_CSI.match(data, last):
        return last
    return None
