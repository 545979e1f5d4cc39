"""Typing into a pty session what the node committed, and the input gate that tells the node when
it may commit.

The node is the only process that commits input: it checks a request, commits its
``session.input`` event (and its operation), answers ``accepted``, and hands the input over here
(``session.type``, with its seq). This supervisor types each seq once, in the order handed over,
and learns from the log what it missed: after every re-registration but the first, a catch-up
reads this generation's inputs since the last one and types those not typed yet (a node that
died between its commit and its hand-over), before any other input.

The gate is what the node must know to commit for this session, sent as ``node.session.gate``
whenever it changes: ``open`` (with ``withhold`` on a login or API-key screen, where the log keeps
a typed text's length only; with ``line_max`` while the agent's terminal is in canonical mode and
cuts a line past that many bytes, so that the node refuses a text with a longer line), ``hold``
(wait: not caught up yet, or a resume's verdict awaited, ``why``), ``full`` (the agent has not
read what it was given), ``busy`` (a turn runs, stream mode), ``refused`` (a stream session's
next turn cannot run: the error, e.g. no provider session to resume) or ``closed`` (the agent
exited, or the session is stopping). A prompt's submit key goes
apart from its text where the provider asks for it (``submit_delay_s``): some TUIs take a burst
for a paste, so the key waits until the screen shows the typed text's end.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from roost.actors.runtime.process import logged_crash
from roost.actors.supervisor.host import Session
from roost.actors.supervisor.pty_agent import PtyAgent
from roost.adapters.base import KEYS, key_names
from roost.wire import fields as f
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.limits import INPUT_PENDING_MAX

log = structlog.get_logger("roost.keyboard")

ECHO_TAIL, ECHO_WAIT_S, ECHO_POLL_S = 8, 3.0, 0.02  # the typed text shown before its submit
READ_WAIT_S = 10.0  # a read of the log unanswered this long is tried again
CATCH_UP_RETRY_S = 0.5
TYPED_KEPT = 4096  # seqs remembered as typed past the floor
# Screens that ask for a credential: what is typed there is logged as its length only.
SECRET_SCREENS = ("login", "api-key")


def withheld(classification: dict[str, Any]) -> str | None:
    """The credential screen shown now (``login``, ``api-key``), whose typed text the log must
    not keep, or None."""
    reason = classification.get("reason")
    if classification.get("state") == "attention" and reason in SECRET_SCREENS:
        return str(reason)
    return None


class Keyboard:
    def __init__(self, sup: Session) -> None:
        self.sup = sup
        self.submit: bytes = sup.spec.get("submit", b"\r")
        self.submit_delay: float = sup.spec.get("submit_delay_s") or 0.0
        self._lock = asyncio.Lock()
        self.typing = False  # an input is being typed now (session.screen's accepting)
        # The gate: what the node was last told, and whether a catch-up is needed first.
        self.gate: dict[str, Any] | None = None
        self.floor: int | None = None  # inputs up to this seq are typed (None: gate never opened)
        self.typed: set[int] = set()  # seqs past the floor typed by this supervisor
        self.caught_up = asyncio.Event()
        self.caught_up.set()  # nothing to catch up on before the gate first opens
        self._flooring: asyncio.Task[None] | None = None  # reading the floor (first opening)
        self._verdict: asyncio.Task[None] | None = None  # waiting for a resume's verdict

    def handlers(self) -> dict[str, Any]:
        return {"session.type": self.on_type}

    async def _write(self, agent: PtyAgent, data: bytes, then: bytes) -> None:
        agent.write(data)
        if then:  # the submit key apart from the text: some TUIs take a burst for a paste
            await self._echoed(data.decode("utf-8", "replace"))
            agent.write(then)

    def _keystrokes(self, data: dict[str, Any]) -> tuple[bytes, bytes] | None:
        """What a committed input's data types (text, then the submit key where it goes apart),
        or None for one that cannot be typed (its text withheld from the log)."""
        kind = data.get("input")
        if kind == "key" and isinstance(data.get("keys"), list):
            keys = key_names({"keys": data["keys"]})
            return b"".join(self.submit if k == "enter" else KEYS[k] for k in keys), b""
        text = data.get("text")
        if not isinstance(text, str):
            return None
        if kind == "prompt":
            if self.submit_delay:
                return text.encode(), self.submit
            return text.encode() + self.submit, b""
        return (text.encode(), b"") if kind == "input" else None

    async def on_type(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """An input the node committed (its ``seq`` and what to type, ``data``): typed once, in
        the order handed over; one typed before (a repeat after a lost answer) is not typed
        again. Without ``data`` (an operation repeated: the node has only its seq) the event is
        read from the log, and typed if it is this record's and generation's and never was."""
        if header.sender != "node":
            raise RoostError("forbidden", "only the node hands over committed input")
        seq = f.req_int(body, "seq", lo=1)
        data = body.get("data")
        if data is not None and not isinstance(data, dict):
            raise RoostError("bad-request", "data must be a map", {"field": "data"})
        sup = self.sup
        agent = sup.pty(header)
        if sup.checks.pending:  # committed already: it waits for the verdict, however long
            await sup.checks.settled_verdict()
        async with self._lock:
            if self._was_typed(seq):
                return {"typed": True, "repeated": True}
            if data is None:
                return {"typed": await self._type_logged(seq)}
            keys = self._keystrokes(data)
            if keys is None:
                raise RoostError("bad-request", "this input cannot be typed", {"field": "data"})
            self._typed(seq)
            self.typing = True
            try:
                await self._write(agent, *keys)
            finally:
                self.typing = False
            if data.get("input") == "prompt":
                sup.prompted()
        self.update_gate()
        return {"typed": True}

    async def _type_logged(self, seq: int) -> bool:
        """Type the logged input ``seq`` unless it was typed: an input whose commit was answered
        too late for anyone to hand it over (a stalled store, its node dead), learnt of when its
        operation is repeated. Only this record's and generation's. Under the input lock."""
        sup = self.sup
        if self.floor is None or self._was_typed(seq) or sup.agent is None:
            return False
        page = await sup.peer.call(
            "state",
            "state.events.since",
            {"after": seq - 1, "limit": 1, "record": sup.record_id},
            timeout=READ_WAIT_S,
        )
        event = (page["events"] or [None])[0]
        if (
            event is None
            or event["seq"] != seq
            or event["kind"] != "session.input"
            or event.get("record") != sup.record_id
            or event.get("generation") != sup.generation
        ):
            return False
        keys = self._keystrokes(event.get("data") or {})
        if keys is None:
            return False
        log.info("input-caught-up", seq=seq)
        self._typed(seq)
        await self._write(sup.agent, *keys)
        return True

    def _was_typed(self, seq: int) -> bool:
        return seq in self.typed or (self.floor is not None and seq <= self.floor)

    def _typed(self, seq: int) -> None:
        """Remember ``seq`` as typed; past ``TYPED_KEPT`` seqs, the older half is folded into the
        floor (a repeat so late that thousands of inputs came after it is not typed again)."""
        self.typed.add(seq)
        if len(self.typed) > TYPED_KEPT and self.floor is not None:
            kept = sorted(self.typed)
            self.floor = max(self.floor, kept[len(kept) // 2])
            self.typed = {s for s in kept if s > self.floor}

    # -- the gate ------------------------------------------------------------------------------

    def gate_state(self) -> dict[str, Any]:
        """What the node must know now to commit input (or begin a turn) for this session."""
        sup = self.sup
        if sup.exit is not None:
            return {"state": "closed"}
        agent = sup.agent
        if agent is not None and sup.checks.pending:
            return {"state": "hold", "why": "resume"}
        if not sup.peer.registered.is_set() or not self.caught_up.is_set() or self.floor is None:
            return {"state": "hold", "why": "catch-up"}
        if agent is None:  # stream mode: the node may begin the next turn when none runs
            turns = sup.turns
            if turns is None or turns.closing:
                return {"state": "closed"}
            if turns.running is not None:
                return {"state": "busy", "turn": turns.running}
            if not turns.idle:  # the last turn's entries not delivered yet
                return {"state": "hold", "why": "delivery"}
            if turns.refusal is not None:  # what asking for the next turn's command answered
                return {"state": "refused", **turns.refusal.to_body()}
            return {"state": "open"}
        if agent.pending >= INPUT_PENDING_MAX:
            return {"state": "full"}
        state: dict[str, Any] = {"state": "open"}
        if secret := withheld(sup.classification):
            state["withhold"] = secret
        if line_max := agent.line_max():  # the terminal cuts longer lines: the node refuses them
            state["line_max"] = line_max
        return state

    def update_gate(self) -> None:
        """Tell the node when the gate changes (a notification; nothing waits on it). ``gate``
        is true only while input may be committed with its text (what a node that knows no
        ``state`` reads)."""
        sup = self.sup
        if sup.checks.pending:
            self._wake_on_verdict()
        if self.floor is None and sup.agent is None:
            self.floor = 0  # stream mode: a catch-up asks for the latest turn, not the log
        registered = sup.peer.registered.is_set()
        if self.floor is None and sup.exit is None and registered and self._flooring is None:
            # the first opening: where a catch-up would start
            self._flooring = asyncio.get_running_loop().create_task(self._first_open())
            self._flooring.add_done_callback(logged_crash)
        state = self.gate_state()
        if state == self.gate or not sup.peer.registered.is_set():
            return
        self.gate = state
        sup.peer.notify(
            "node",
            {
                "gate": state.get("state") == "open" and "withhold" not in state,
                **state,
                "record": sup.record_id,
                "generation": sup.generation,
                "instance": sup.instance_id,
            },
        )

    def _wake_on_verdict(self) -> None:
        if self._verdict is None:
            self._verdict = asyncio.get_running_loop().create_task(self._after_verdict())
            self._verdict.add_done_callback(logged_crash)

    async def _after_verdict(self) -> None:
        try:
            await self.sup.checks.settled_verdict()
        finally:
            self._verdict = None
        self.update_gate()

    async def _first_open(self) -> None:
        """Before the gate first opens: the log's last seq, past which any input the node
        commits for this supervisor will be (a catch-up starts there)."""
        try:
            while self.floor is None and self.sup.exit is None:
                try:
                    page = await self.sup.peer.call(
                        "state",
                        "state.events.since",
                        {"after": 0, "limit": 1, "record": self.sup.record_id},
                        timeout=READ_WAIT_S,
                    )
                    self.floor = int(page["last_seq"])
                except RoostError:
                    await asyncio.sleep(CATCH_UP_RETRY_S)
        finally:
            self._flooring = None
        self.update_gate()

    def registration_lost(self) -> None:
        """Called as a (re)registration begins: the node forgot the gate; input the node had
        committed may not have been handed over, so nothing is typed before the catch-up."""
        self.gate = None
        if self.floor is not None:
            self.caught_up.clear()

    async def catch_up(self) -> None:
        """Type this generation's inputs the node committed and did not hand over (it died
        first), in their order, before any other input; then open the gate again."""
        sup = self.sup
        while not self.caught_up.is_set() and sup.exit is None:
            try:
                async with self._lock:
                    await self._catch_up()
                self.caught_up.set()
            except RoostError as err:
                log.warning("input-catch-up-failed", code=err.code)
                await asyncio.sleep(CATCH_UP_RETRY_S)
        self.caught_up.set()
        self.update_gate()

    async def _catch_up(self) -> None:
        sup = self.sup
        if sup.agent is None:
            if sup.turns is not None:
                await sup.turns.catch_up(sup.generation)
            return
        assert self.floor is not None
        after, last = self.floor, self.floor
        while True:
            page = await sup.peer.call(
                "state",
                "state.events.since",
                {"after": after, "limit": 1000, "record": sup.record_id},
                timeout=READ_WAIT_S,
            )
            last = max(last, int(page["last_seq"]))
            for event in page["events"]:
                after = event["seq"]
                if (
                    event["kind"] != "session.input"
                    or event.get("generation") != sup.generation
                    or self._was_typed(after)
                ):
                    continue
                keys = self._keystrokes(event.get("data") or {})
                if keys is None or sup.agent is None:
                    log.warning("input-not-typed", seq=after, reason="cannot be typed again")
                    continue
                log.info("input-caught-up", seq=after)
                self._typed(after)
                await self._write(sup.agent, *keys)
            if not page["more"]:
                break
        self.floor = max(last, after)
        self.typed = {s for s in self.typed if s > self.floor}

    async def _echoed(self, text: str) -> None:
        """Wait before the submit key: ``submit_delay_s``, then until the screen shows the typed
        text's end (the TUI has read it, so the key comes in a read of its own, even when the
        CLI is slow to read under load), at most ``ECHO_WAIT_S`` more."""
        await asyncio.sleep(self.submit_delay)
        tail = "".join(text.split())[-ECHO_TAIL:]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ECHO_WAIT_S
        while tail and tail not in "".join(self.sup.term.text().split()):
            if self.sup.exit is not None or loop.time() > deadline:
                return
            await asyncio.sleep(ECHO_POLL_S)
