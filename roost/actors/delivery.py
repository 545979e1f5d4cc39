"""Delivering outbox entries: events to the state store, stream lines through the adapter, the end
of a turn, and reports to the node. Used by a live supervisor and, for a dead supervisor's spool,
by the node. A turn ends ``completed`` only when its process exited 0 after a successful result;
a spool with no turn end is never completed by invention (the node marks the turn interrupted).
"""

from __future__ import annotations

from typing import Any

from roost.actors.peer import Peer

Entry = dict[str, Any]


class Deliverer:
    """Turns outbox entries into calls; remembers each turn's facts across its lines."""

    def __init__(
        self,
        peer: Peer,
        provider: str,
        instance: str,
        on_events: Any = None,
        on_identity: Any = None,
    ) -> None:
        self.peer, self.provider, self.instance = peer, provider, instance
        self.facts: dict[str, dict[str, Any]] = {}
        self.on_events = on_events
        self.on_identity = on_identity

    def _stamp(self, entry: Entry, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {
                **e,
                "record": entry["record"],
                "generation": entry["generation"],
                "eid": f"{self.instance}:{entry['n']}:{i}",
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
        facts.update(parsed.get("facts") or {})
        if facts.get("session_id") and self.on_identity is not None:
            self.on_identity(str(facts["session_id"]))
        events = [{**e, "data": {**e["data"], "turn": entry["turn"]}} for e in parsed["events"]]
        await self._append(entry, events)

    async def _turn_end(self, entry: Entry) -> None:
        facts = self.facts.pop(entry["turn"], {})
        # completed: the process exited 0 and the provider said it finished (a final result, or a
        # completion marker for CLIs whose turns may end without assistant text), with no error
        finished = "result" in facts or bool(facts.get("completed"))
        ok = entry.get("exit") == 0 and finished and not facts.get("is_error")
        result = {
            "exit": entry.get("exit"),
            "result": facts.get("result"),
            "is_error": facts.get("is_error"),
            "provider_error": facts.get("error"),  # the provider's own words when it failed
            "reason": entry.get("reason"),
        }
        if facts.get("session_id"):
            result["provider_session"] = facts["session_id"]
        await self.peer.call(
            "state",
            "state.turn.end",
            {"id": entry["turn"], "state": "completed" if ok else "failed", "result": result},
        )
