"""Typing into a pty session: ``session.prompt``, ``session.input`` and ``session.key``.

Each input's event (and its operation) is committed by the state store before a byte is typed,
so ``accepted`` means durable, and an input whose event is committed is typed: a commit that got
no answer in time (the store stalled, or the node died with the answer) is repeated with the same
event id until the store says it holds it. Input waits for a resume's verdict first (never typed
into a CLI still loading the conversation) and types one request at a time. A prompt's submit key
goes apart from its text where the provider asks for it (``submit_delay_s``): some TUIs take a
burst for a paste, so the key waits until the screen shows the typed text's end.

Two ways in. While nothing holds input back (the gate is open: no resume's verdict awaited, no
login or API-key screen, the agent reading, nothing missed to catch up on), the node commits an
input itself and hands it here to be typed (``session.type``, with its seq): the accepted
prompt's path then has no supervisor on it. Otherwise the node forwards the request, and it is
committed here as above. The supervisor tells the node when the gate opens and closes
(``node.session.gate``, a notification). An input the node committed is typed once: by its
``session.type``, or, when the node died before it was handed over, by the catch-up that follows
every re-registration, which reads this generation's inputs from the log since the last one and
types those not typed yet, before any other input.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from roost.actors.runtime.peer import Peer
from roost.actors.supervisor.host import Session
from roost.actors.supervisor.outbox import TRANSIENT
from roost.actors.supervisor.pty_agent import PtyAgent
from roost.adapters.base import KEYS, key_names
from roost.broker import fields as f
from roost.broker import protocol as p
from roost.broker.errors import RoostError

log = structlog.get_logger("roost.keyboard")

ECHO_TAIL, ECHO_WAIT_S, ECHO_POLL_S = 8, 3.0, 0.02  # the typed text shown before its submit
COMMIT_WAIT_S = 10.0  # an input commit unanswered this long may still have been committed
COMMIT_RETRY_S = 0.5
MAX_UNTYPED = 1 << 20  # bytes accepted but not yet read by the agent, past which input is refused
GATE_PENDING = 256 << 10  # the node commits input itself only while less than this waits
CATCH_UP_RETRY_S = 0.5
TYPED_KEPT = 4096  # seqs remembered as typed past the floor
# Screens that ask for a credential: what is typed there is logged as its length only.
SECRET_SCREENS = ("login", "api-key")


def logged_text(text: str, classification: dict[str, Any]) -> dict[str, Any]:
    """What a ``session.input`` event keeps of typed ``text``: the text, or, while the screen is
    classified ``attention`` for a login or an API key (a token pasted there), only its length
    and why (``withheld``), so no secret reaches the event log, ``state.db`` or ``roost events``."""
    reason = classification.get("reason")
    if classification.get("state") == "attention" and reason in SECRET_SCREENS:
        return {"length": len(text), "withheld": reason}
    return {"text": text}


async def commit_input(peer: Peer, body: dict[str, Any]) -> dict[str, Any]:
    """``state.events.append`` of an input (by this supervisor, or by the node: ``inputs``). An
    answer refusing it (the store away, its disk full) means nothing was committed. An attempt
    with no answer by its deadline may have been: it is repeated, same event id, until the store
    answers, which it does once with the event appended (``repeated`` when the lost attempt had
    appended it)."""

    async def attempt() -> dict[str, Any]:
        reply: dict[str, Any] = await peer.call(
            "state", "state.events.append", body, timeout=COMMIT_WAIT_S
        )
        return reply

    return await until_answered(attempt)


async def until_answered(attempt: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    """``attempt()`` until it is answered: a refusal at once (nothing was committed) is raised;
    a transient failure after ``COMMIT_WAIT_S`` without an answer (it may have been) tries
    again, as does any transient failure after that first try."""
    loop, attempts = asyncio.get_running_loop(), 0
    while True:
        attempts, started = attempts + 1, loop.time()
        try:
            return await attempt()
        except RoostError as err:
            unanswered = loop.time() - started >= COMMIT_WAIT_S
            if err.code not in TRANSIENT or (attempts == 1 and not unanswered):
                raise
            if attempts == 1:
                log.warning("input-commit-unanswered", code=err.code)
        await asyncio.sleep(COMMIT_RETRY_S)


class Keyboard:
    def __init__(self, sup: Session) -> None:
        self.sup = sup
        self.submit: bytes = sup.spec.get("submit", b"\r")
        self.submit_delay: float = sup.spec.get("submit_delay_s") or 0.0
        self._lock = asyncio.Lock()
        self._inputs = itertools.count(1)
        self.committing = False  # an input's event is being committed now (session.screen)
        # The gate: what the node was last told, and whether a catch-up is needed first.
        self.gate = False
        self.floor: int | None = None  # inputs up to this seq are typed (None: gate never opened)
        self.typed: set[int] = set()  # seqs past the floor typed by this supervisor
        self.caught_up = asyncio.Event()
        self.caught_up.set()  # nothing to catch up on before the gate first opens
        self._gating: asyncio.Task[None] | None = None

    def handlers(self) -> dict[str, Any]:
        return {
            "session.input": self.on_input,
            "session.prompt": self.on_prompt,
            "session.key": self.on_key,
            "session.type": self.on_type,
        }

    async def on_prompt(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        text = f.text(body, "text")
        shown = logged_text(text, self.sup.classification)
        if self.submit_delay:
            return await self._type(header, "prompt", text.encode(), shown, then=self.submit)
        return await self._type(header, "prompt", text.encode() + self.submit, shown)

    async def on_input(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        text = f.text(body, "text")
        return await self._type(
            header, "input", text.encode(), logged_text(text, self.sup.classification)
        )

    async def on_key(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        keys = key_names(body)
        data = b"".join(self.submit if k == "enter" else KEYS[k] for k in keys)
        return await self._type(header, "key", data, {"keys": keys})

    async def _type(
        self,
        header: p.Header,
        kind: str,
        data: bytes,
        shown: dict[str, Any],
        then: bytes = b"",
    ) -> dict[str, Any]:
        """Commit the input event (and its operation), then type it: accepted means durable."""
        sup = self.sup
        sup.pty(header)
        await sup.checks.hold_input()  # a resume's verdict first: never typed into a void
        await self.until_caught_up()
        agent = sup.pty(header)
        async with self._lock:
            if not await sup.outbox.drained(5.0):
                raise sup.outbox.undelivered()
            if agent.pending + len(data) + len(then) > MAX_UNTYPED:
                raise RoostError(
                    "agent-not-reading",
                    f"{agent.pending} bytes typed before still wait for the agent to read them",
                    {"pending": agent.pending, "limit": MAX_UNTYPED},
                )
            body: dict[str, Any] = {
                "events": [
                    {
                        "kind": "session.input",
                        "record": sup.record_id,
                        "generation": sup.generation,
                        "data": {"input": kind, **shown},
                        "eid": f"{sup.instance_id}:input:{next(self._inputs)}",
                    }
                ]
            }
            if header.op:
                body["op"] = {"id": header.op, "method": header.method, "record": sup.record_id}
            self.committing = True
            try:
                committed = await commit_input(sup.peer, body)
            finally:
                self.committing = False
            if committed.get("duplicate"):  # the op as first stored: the node answers with it
                first = (committed["seqs"] or [None])[0]
                if isinstance(first, int):
                    await self._type_logged(first)  # a node's, committed late, never handed over
                return {
                    "accepted": True,
                    "duplicate": True,
                    "seq": first,
                    "op": committed.get("op"),
                }
            seq = committed["seqs"][0]
            self._typed(seq)
            await self._write(agent, data, then)
        self.update_gate()
        return {"accepted": True, "seq": seq}

    async def _write(self, agent: PtyAgent, data: bytes, then: bytes) -> None:
        agent.write(data)
        if then:  # the submit key apart from the text: some TUIs take a burst for a paste
            await self._echoed(data.decode("utf-8", "replace"))
            agent.write(then)

    def _keystrokes(self, data: dict[str, Any]) -> tuple[bytes, bytes] | None:
        """What a committed ``session.input`` event's data types (text, then the submit key
        where it goes apart), or None for one that cannot be typed again (text withheld)."""
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
        """An input the node committed (its ``seq`` and event ``data``): typed once, in the
        order handed over; one typed before (a repeat after a lost answer) is not typed again.
        Without ``data`` (an operation repeated: the node has only its seq) the event is read
        from the log, and typed if it is this generation's and was never typed."""
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
            await self._write(agent, *keys)
        self.update_gate()
        return {"typed": True}

    async def _type_logged(self, seq: int) -> bool:
        """Type the logged input ``seq`` unless it was typed: an input a node committed whose
        commit was answered too late for anyone to hand it over (a stalled store, its node
        dead), learnt of when its operation is repeated. Under the input lock."""
        sup = self.sup
        if self.floor is None or self._was_typed(seq) or sup.agent is None:
            return False
        page = await sup.peer.call(
            "state",
            "state.events.since",
            {"after": seq - 1, "limit": 1, "record": sup.record_id},
            timeout=COMMIT_WAIT_S,
        )
        event = (page["events"] or [None])[0]
        if (
            event is None
            or event["seq"] != seq
            or event["kind"] != "session.input"
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

    def _may_open(self) -> bool:
        sup = self.sup
        agent = sup.agent
        if sup.exit is not None or not sup.peer.registered.is_set() or not self.caught_up.is_set():
            return False
        if agent is None:  # stream mode: the node may begin the next turn when none runs
            return sup.turns is not None and sup.turns.idle
        return (
            not sup.checks.pending
            and not logged_text("", sup.classification).get("withheld")
            and agent.pending < GATE_PENDING
        )

    def update_gate(self) -> None:
        """Tell the node when the gate opens or closes (a notification; nothing waits on it)."""
        sup = self.sup
        want = self._may_open()
        if sup.checks.pending:
            self._wake_on_verdict()
        if want == self.gate:
            return
        if want and self.floor is None and sup.agent is None:
            self.floor = 0  # stream mode: a catch-up asks for the latest turn, not the log
        if want and self.floor is None:  # the first opening: where a catch-up would start
            if self._gating is None:
                self._gating = asyncio.get_running_loop().create_task(self._first_open())
            return
        self.gate = want
        sup.peer.notify(
            "node",
            {
                "gate": want,
                "record": sup.record_id,
                "generation": sup.generation,
                "instance": sup.instance_id,
            },
        )

    def _wake_on_verdict(self) -> None:
        if self._gating is None:
            self._gating = asyncio.get_running_loop().create_task(self._after_verdict())

    async def _after_verdict(self) -> None:
        try:
            await self.sup.checks.settled_verdict()
        finally:
            self._gating = None
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
                        timeout=COMMIT_WAIT_S,
                    )
                    self.floor = int(page["last_seq"])
                except RoostError:
                    await asyncio.sleep(CATCH_UP_RETRY_S)
        finally:
            self._gating = None
        self.update_gate()

    def registration_lost(self) -> None:
        """Called as a (re)registration begins: the node forgot the gate; input the node had
        committed may not have been handed over, so nothing is typed before the catch-up."""
        self.gate = False
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
                timeout=COMMIT_WAIT_S,
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

    async def until_caught_up(self) -> None:
        """Until the catch-up after a re-registration is done (``unavailable`` after 10 s)."""
        if self.caught_up.is_set():
            return
        try:
            await asyncio.wait_for(self.caught_up.wait(), COMMIT_WAIT_S)
        except TimeoutError:
            raise RoostError(
                "unavailable",
                "input committed before the node restarted is still being typed; retry shortly",
                {"record": self.sup.record_id},
            ) from None

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
