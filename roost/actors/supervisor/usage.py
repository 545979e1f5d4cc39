"""A session's tokens and cost as its CLI reports them outside a turn's own output.

A pty session's CLI reports no usage on its screen, but keeps it in its files (codex's rollout,
Kimi Code's wire file, claude's transcript: ``adapter.usage``), and claude's statusline sends the
session's cost as a ``usage`` signal (``on_signal``). Each gives the session's totals so far;
the supervisor reports them (``node.session.usage``, through the outbox) when they changed, and
the state store keeps what is new since the last report. The files are read after each verdict
that is not ``busy`` (a turn ended, a question came up), once the provider session id is known,
and after each stream turn (kimi's headless output has no usage), each time again ``LATER_S``
later.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from roost.actors.runtime.process import logged_crash
from roost.actors.supervisor.host import Session
from roost.wire import usage as u
from roost.wire.errors import RoostError
from roost.wire.signals import Signal

log = structlog.get_logger("roost.usage")

CALL_TIMEOUT_S = 5.0
# After a read, the files are read again this much later: a CLI may draw its answer before it
# writes the request's figures (codex's token_count), and nothing else would ask again.
LATER_S = (2.0, 10.0)
DRAIN_S = 10.0  # a stream turn's lines (its provider session id) are delivered before a read


def signal_totals(signal: Signal) -> u.Usage | None:
    """The totals a ``usage`` signal carries: claude's statusline gives the session's cost so
    far (``cost_usd``); its token figures describe the context window, not the session, so the
    tokens come from the transcript instead."""
    if signal["kind"] != "usage":
        return None
    cost = signal["data"].get("cost_usd")
    if isinstance(cost, bool) or not isinstance(cost, int | float):
        return None
    return u.make(cost=cost)


class UsageWatch:
    def __init__(self, sup: Session) -> None:
        self.sup = sup
        self._sent: dict[str, u.Usage] = {}  # the last totals reported, by source
        self._task: asyncio.Task[None] | None = None
        self._again: str | bool | None = False  # another read is due (for this turn id)

    def _report(self, source: str, totals: u.Usage, turn: str | None = None) -> None:
        if self._sent.get(source) == totals:
            return
        self._sent[source] = totals
        body: dict[str, Any] = {"source": source, "totals": totals}
        if self.sup.identity is not None:
            body["provider_session"] = self.sup.identity
        if turn is not None:
            body["turn"] = turn
        self.sup.report("node.session.usage", body)

    def on_signal(self, signal: Signal) -> None:
        """A ``usage`` signal (claude's statusline): its cost, and a read of the files."""
        totals = signal_totals(signal)
        if totals is not None and signal["source"] == "statusline":
            self._report("statusline", totals)
        self.soon()

    def soon(self, turn: str | None = None) -> None:
        """Read the CLI's files once the current read (if any) is done."""
        if self._task is not None and not self._task.done():
            self._again = turn
            return
        self._task = asyncio.get_running_loop().create_task(self._reads(turn))
        self._task.add_done_callback(logged_crash)

    async def _reads(self, turn: str | None) -> None:
        for delay in (0.0, *LATER_S):
            await asyncio.sleep(delay)
            while True:
                await self.read(turn)
                if self._again is False:
                    break
                turn, self._again = (self._again if isinstance(self._again, str) else None), False

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def read(self, turn: str | None = None) -> None:
        """``adapter.usage`` for the provider session, reported when it changed."""
        sup = self.sup
        await sup.outbox.drained(DRAIN_S)
        if sup.identity is None:
            return
        spec = sup.spec
        body = {
            "provider_session": sup.identity,
            "mode": spec["mode"],
            "cwd": spec["cwd"],
            "env": spec["env"],
            "data_dir": spec["data_dir"],
        }
        try:
            found = await sup.peer.call(
                f"adapter/{sup.provider}", "adapter.usage", body, timeout=CALL_TIMEOUT_S
            )
        except RoostError as err:  # the next read has the totals so far all the same
            log.info("usage-read-failed", code=err.code)
            return
        totals = u.check(found.get("totals"))
        if totals is not None and isinstance(found.get("source"), str):
            self._report(found["source"], totals, turn)
