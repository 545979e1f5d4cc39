"""Typing into a pty session: ``session.prompt``, ``session.input`` and ``session.key``.

Each input's event (and its operation) is committed by the state store before a byte is typed,
so ``accepted`` means durable, and an input whose event is committed is typed: a commit that got
no answer in time (the store stalled, or the node died with the answer) is repeated with the same
event id until the store says it holds it. Input waits for a resume's verdict first (never typed
into a CLI still loading the conversation) and types one request at a time. A prompt's submit key
goes apart from its text where the provider asks for it (``submit_delay_s``): some TUIs take a
burst for a paste, so the key waits until the screen shows the typed text's end.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import structlog

from roost.actors.supervisor.host import Session
from roost.actors.supervisor.outbox import TRANSIENT
from roost.adapters.base import KEYS, key_names
from roost.broker import fields as f
from roost.broker import protocol as p
from roost.broker.errors import RoostError

log = structlog.get_logger("roost.keyboard")

ECHO_TAIL, ECHO_WAIT_S, ECHO_POLL_S = 8, 3.0, 0.02  # the typed text shown before its submit
COMMIT_WAIT_S = 10.0  # an input commit unanswered this long may still have been committed
COMMIT_RETRY_S = 0.5
MAX_UNTYPED = 1 << 20  # bytes accepted but not yet read by the agent, past which input is refused
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


class Keyboard:
    def __init__(self, sup: Session) -> None:
        self.sup = sup
        self.submit: bytes = sup.spec.get("submit", b"\r")
        self.submit_delay: float = sup.spec.get("submit_delay_s") or 0.0
        self._lock = asyncio.Lock()
        self._inputs = itertools.count(1)
        self.committing = False  # an input's event is being committed now (session.screen)

    def handlers(self) -> dict[str, Any]:
        return {
            "session.input": self.on_input,
            "session.prompt": self.on_prompt,
            "session.key": self.on_key,
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
                committed = await self._commit(body)
            finally:
                self.committing = False
            if committed.get("duplicate"):  # the op as first stored: the node answers with it
                return {
                    "accepted": True,
                    "duplicate": True,
                    "seq": (committed["seqs"] or [None])[0],
                    "op": committed.get("op"),
                }
            agent.write(data)
            if then:  # the submit key apart from the text: some TUIs take a burst for a paste
                await self._echoed(data.decode("utf-8", "replace"))
                agent.write(then)
        return {"accepted": True, "seq": committed["seqs"][0]}

    async def _commit(self, body: dict[str, Any]) -> dict[str, Any]:
        """``state.events.append``. An answer refusing it (the store away, its disk full) means
        nothing was committed. An attempt with no answer by its deadline may have been: it is
        repeated, same event id, until the store answers, which it does once with the event
        appended (``repeated`` when the lost attempt had appended it)."""
        loop, attempts = asyncio.get_running_loop(), 0
        while True:
            attempts, started = attempts + 1, loop.time()
            try:
                return await self.sup.peer.call(
                    "state", "state.events.append", body, timeout=COMMIT_WAIT_S
                )
            except RoostError as err:
                unanswered = loop.time() - started >= COMMIT_WAIT_S
                if err.code not in TRANSIENT or (attempts == 1 and not unanswered):
                    raise
                if attempts == 1:
                    log.warning("input-commit-unanswered", code=err.code)
            await asyncio.sleep(COMMIT_RETRY_S)

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
