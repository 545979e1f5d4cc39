"""The supervisors' input gates, as the node knows them: whether input for a live session may be
committed now, and if not, how long to wait for it and what to answer when the wait is over.

A supervisor says what holds its input back with a ``node.session.gate`` notification whenever
that changes: ``open`` (``withhold``: a login or API-key screen, whose typed text the log keeps as
its length only), ``hold`` (``why``: ``catch-up`` after a re-registration, ``resume`` while a
cold resume's verdict is awaited, ``delivery`` while a stream session's last turn is delivered),
``full`` (its agent has not read what it was given), ``busy`` (``turn``: a stream turn runs),
``refused`` (``code``, ``message``, ``detail``: a stream session's next turn cannot run) or
``closed`` (the agent exited, or the session is stopping). A gate counts only for the record's
live generation and instance; until its supervisor has said anything (a launch, a node restart),
a session's gate is ``hold``.

An open gate may carry ``line_max``: the agent's terminal is in canonical mode and cuts a line
past that many bytes, so a typed text with a longer line is refused (``line-too-long``) before
it is committed.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from roost.wire.errors import RoostError
from roost.wire.limits import INPUT_PENDING_MAX
from roost.wire.messages import Active

HOLD_WAIT_S = 6.0  # input waits this long for a held gate (a verdict, a catch-up) to open
FULL_WAIT_S = 5.0  # and this long for an agent to read what it was given
STATES = frozenset({"open", "hold", "full", "busy", "refused", "closed"})


@dataclass(frozen=True)
class Gate:
    generation: int
    instance: str
    state: str
    why: str = ""  # hold: catch-up, resume, delivery
    withhold: str = ""  # open: the credential screen shown (login, api-key)
    line_max: int = 0  # open: the longest line the agent's terminal takes (0: any)
    turn: str = ""  # busy: the turn running
    code: str = ""  # refused: the error a turn is refused with (its message, detail)
    message: str = ""
    detail: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def parse(cls, body: dict[str, Any]) -> Gate | None:
        """A ``node.session.gate`` body; one of a supervisor that says no ``state`` (an earlier
        release) is open or closed by its ``gate``."""
        generation, instance = body.get("generation"), body.get("instance")
        if not isinstance(generation, int) or not isinstance(instance, str):
            return None
        state = body.get("state")
        if not isinstance(state, str) or state not in STATES:
            state = "open" if body.get("gate") is True else "hold"
        return cls(
            generation,
            instance,
            str(state),
            why=_str(body.get("why")),
            withhold=_str(body.get("withhold")),
            line_max=limit if isinstance(limit := body.get("line_max"), int) and limit > 0 else 0,
            turn=_str(body.get("turn")),
            code=_str(body.get("code")),
            message=_str(body.get("message")),
            detail=tuple(sorted(d.items())) if isinstance(d := body.get("detail"), dict) else (),
        )


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def longest_line(text: str) -> int:
    """The bytes of ``text``'s longest line (CR, LF and CRLF end one)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return max(len(line.encode()) for line in lines)


def line_refusal(gate: Gate, text: str, record_id: str) -> RoostError | None:
    """What a typed text is refused with when its gate says the agent's terminal cuts a line
    shorter than the text's longest (canonical mode), or None."""
    if not gate.line_max or (longest := longest_line(text)) <= gate.line_max:
        return None
    return RoostError(
        "line-too-long",
        f"the agent reads its terminal a line at a time and takes {gate.line_max} bytes of a line"
        f" at most; this text has a line of {longest} bytes. Nothing was accepted: send shorter"
        " lines, or put the text in a file and ask the agent to read it",
        {"record": record_id, "limit": gate.line_max, "longest": longest},
    )


def refusal(gate: Gate | None, record_id: str) -> RoostError:
    """What input is answered when its gate did not open in time (or never will)."""
    detail: dict[str, Any] = {"record": record_id}
    if gate is None or gate.state == "hold":
        if gate is not None and gate.why == "resume":
            return RoostError(
                "resume-pending",
                "the resumed session is not verified yet; nothing was accepted, retry shortly",
                detail,
            )
        return RoostError(
            "unavailable",
            "the session's supervisor is not ready for input; nothing was accepted, retry shortly",
            {**detail, "why": gate.why if gate else "not-attached"},
        )
    if gate.state == "full":
        return RoostError(
            "agent-not-reading",
            "input given before still waits for the agent to read it; nothing was accepted",
            {**detail, "limit": INPUT_PENDING_MAX},
        )
    if gate.state == "busy":
        return RoostError(
            "busy",
            "a turn is already running in this session",
            {**detail, "turn": gate.turn or None, "accepting": False},
        )
    if gate.state == "refused" and gate.code:  # a code this node may not know: as it came
        error = {
            "code": gate.code,
            "message": gate.message,
            "detail": {**detail, **dict(gate.detail)},
        }
        return RoostError.from_body(error)
    return RoostError("session-not-live", "the session is ending", detail)


class Gates:
    """Each live record's last gate, and waits for one to change."""

    def __init__(self) -> None:
        self._gates: dict[str, Gate] = {}
        self._changed: dict[str, asyncio.Event] = {}

    def __len__(self) -> int:
        return sum(g.state == "open" for g in self._gates.values())

    def get(self, record_id: str, active: Active) -> Gate | None:
        """The record's gate, if it is its live supervisor's."""
        gate = self._gates.get(record_id)
        if gate is None:
            return None
        if (gate.generation, gate.instance) != (active.get("generation"), active.get("instance")):
            return None  # an earlier supervisor's
        return gate

    def get_any(self, record_id: str) -> Gate | None:
        """The record's last gate, whichever supervisor said it."""
        return self._gates.get(record_id)

    def put(self, record_id: str, gate: Gate | None) -> None:
        if gate is None:
            self._gates.pop(record_id, None)
        else:
            self._gates[record_id] = gate
        if (changed := self._changed.pop(record_id, None)) is not None:
            changed.set()

    def wake(self, record_id: str) -> None:
        """Whatever waits for the record's gate looks again (room was made for input)."""
        if (changed := self._changed.pop(record_id, None)) is not None:
            changed.set()

    def clear(self) -> None:
        for record_id in list(self._gates):
            self.put(record_id, None)

    async def changed(self, record_id: str, limit: float) -> None:
        """Until the record's gate changes, at most ``limit`` seconds."""
        event = self._changed.setdefault(record_id, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), limit)
