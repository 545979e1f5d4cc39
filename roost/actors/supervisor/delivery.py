"""Delivering outbox entries: events to the state store, stream lines through the adapter, the end
of a turn, and reports to the node. Used by a live supervisor and, for a dead supervisor's spool,
by the node. A turn ends ``completed`` only when its process exited 0 after a successful result;
a spool with no turn end is never completed by invention (the node marks the turn interrupted).

A turn's facts (its result, error, provider session id: what ``adapter.parse`` found in its lines)
are kept in ``turn-facts.bin`` beside the spool, written before a line counts as delivered and
dropped only once the turn's end is recorded: a retried end (the state store restarted) and the
node's salvage of a dead supervisor's spool find them, though the lines they came from were
delivered long before.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgpack

from roost.actors.runtime.caller import Caller
from roost.wire.errors import TRANSIENT, RoostError, write_refused
from roost.wire.messages import OutboxEntry

Entry = OutboxEntry
Facts = dict[str, Any]
FACTS = "turn-facts.bin"


def read_facts(directory: Path | None) -> dict[str, Facts]:
    """The facts of the turns whose end is not recorded yet, by turn id ({} when none)."""
    if directory is None:
        return {}
    try:
        data = msgpack.unpackb((directory / FACTS).read_bytes(), raw=False)
    except (OSError, ValueError, msgpack.UnpackException):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def finished(facts: Facts) -> bool:
    """The provider said the turn finished: a final result, or a completion marker for CLIs
    whose turns may end without assistant text."""
    return "result" in facts or bool(facts.get("completed"))


def outcome(entry: Entry, facts: Facts) -> tuple[str, dict[str, Any]]:
    """The state and result of a turn whose end is ``entry``: completed when the process exited 0
    and the provider said it finished with no error, failed otherwise."""
    ok = entry.get("exit") == 0 and finished(facts) and not facts.get("is_error")
    result = {
        "exit": entry.get("exit"),
        "result": facts.get("result"),
        "is_error": facts.get("is_error"),
        "provider_error": facts.get("error"),  # the provider's own words when it failed
        "reason": entry.get("reason"),
    }
    if facts.get("session_id"):
        result["provider_session"] = facts["session_id"]
    if facts.get("usage"):  # the provider's tokens and cost for the turn (roost.wire.usage)
        result["usage"] = facts["usage"]
    return ("completed" if ok else "failed"), result


def interrupted_result(reason: str, facts: Facts) -> dict[str, Any]:
    """``{reason}``, and what the provider said when its result line was recorded before roost
    lost the turn (its process's end was never seen, so the turn is not completed)."""
    result: dict[str, Any] = {"reason": reason}
    if finished(facts):
        result.update(result=facts.get("result"), is_error=facts.get("is_error"))
    if facts.get("usage"):
        result["usage"] = facts["usage"]
    if facts.get("session_id"):
        result["provider_session"] = facts["session_id"]
    return result


class Deliverer:
    """Turns outbox entries into calls; remembers each turn's facts across its lines (on disk
    when given the session's ``directory``)."""

    def __init__(
        self,
        peer: Caller,
        provider: str,
        instance: str,
        on_events: Any = None,
        on_identity: Any = None,
        directory: Path | None = None,
    ) -> None:
        self.peer, self.provider, self.instance = peer, provider, instance
        self.directory = directory
        self.facts: dict[str, Facts] = read_facts(directory)
        self.on_events = on_events
        self.on_identity = on_identity

    def _stamp(self, entry: Entry, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        instance = entry.get("i") or self.instance  # the spooling supervisor's, when it says
        return [
            {
                **e,
                "record": entry["record"],
                "generation": entry["generation"],
                "eid": f"{instance}:{entry['n']}:{i}",
            }
            for i, e in enumerate(events)
        ]

    async def __call__(self, entry: Entry) -> None:
        kind = entry.get("t")
        if kind == "events":
            await self._append(entry, entry["events"])
        elif kind == "line":
            await self._line(entry)
        elif kind == "turn-end":
            await self._turn_end(entry)
        elif kind == "report":
            await self.peer.call("node", entry["method"], entry["body"], timeout=10.0)

    async def _append(self, entry: Entry, events: list[dict[str, Any]]) -> None:
        if events:
            stamped = self._stamp(entry, events)
            await self.peer.call("state", "state.events.append", {"events": stamped})
            if self.on_events is not None:
                self.on_events(stamped)

    async def _line(self, entry: Entry) -> None:
        parsed = await self.peer.call(
            f"adapter/{self.provider}",
            "adapter.parse",
            {"line": entry["line"], "stream": entry.get("stream")},
        )
        facts = self.facts.setdefault(entry["turn"], {})
        if parsed.get("facts"):
            facts.update(parsed["facts"])
            self._save()  # before the line counts as delivered
        if facts.get("session_id") and self.on_identity is not None:
            self.on_identity(str(facts["session_id"]))
        events = [{**e, "data": {**e["data"], "turn": entry["turn"]}} for e in parsed["events"]]
        await self._append(entry, events)

    async def _turn_end(self, entry: Entry) -> None:
        turn = entry["turn"]
        state, result = outcome(entry, self.facts.get(turn, {}))
        try:
            await self.peer.call(
                "state", "state.turn.end", {"id": turn, "state": state, "result": result}
            )
        except RoostError as err:
            if err.code in TRANSIENT:  # retried: the facts stay for the next attempt
                raise
            self.forget(turn)
            raise
        self.forget(turn)

    def forget(self, turn: str) -> None:
        """The turn's end is recorded (or refused for good): its facts are no longer needed."""
        if self.facts.pop(turn, None) is not None:
            self._save()

    def _save(self) -> None:
        if self.directory is None:
            return
        path = self.directory / FACTS
        kept = {turn: facts for turn, facts in self.facts.items() if facts}
        if not kept:
            path.unlink(missing_ok=True)
            return
        tmp = self.directory / (FACTS + ".tmp")
        try:
            tmp.write_bytes(msgpack.packb(kept, use_bin_type=True))
            os.replace(tmp, path)
        except OSError as exc:  # a full disk: the line is not delivered yet, and is retried
            raise write_refused(
                exc, "the turn's facts could not be saved beside the spool"
            ) from None
