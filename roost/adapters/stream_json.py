"""Claude-style stream-json lines (``claude -p --output-format stream-json --verbose``) as events.

One line in, a list of roost session events out (kind + data; the caller adds record, generation
and event ids). The echo agent's headless mode writes the same shape, so one parser serves both.
Shapes (claude 2.1.x): ``system/init`` carries ``session_id``; ``assistant`` messages carry
``text`` and ``tool_use`` blocks; ``user`` messages carry ``tool_result`` blocks; ``stream_event``
carries partial deltas; ``result`` ends the turn, where ``is_error`` (not ``subtype``) says whether
it failed, and its ``usage`` and ``total_cost_usd`` are the turn's tokens (summed over its API
calls) and cost (the fact ``usage``). Failures also give the fact ``error``, a message for
people: the text of an assistant message flagged ``error`` ("Not logged in · Please run
/login"), each ``system/api_retry`` (claude retries a failed API call up to ten times, minutes
in all, before its result), and a failed result.
"""

from __future__ import annotations

import json
from typing import Any

from roost.wire import usage

Event = dict[str, Any]


def parse_line(line: str) -> tuple[list[Event], dict[str, Any]]:
    """Events for one line, and facts for the turn (``session_id``, ``result``, ``is_error``,
    ``error``)."""
    try:
        obj = json.loads(line)
    except ValueError:
        return (
            [{"kind": "session.stderr", "data": {"line": line[:4096]}}] if line.strip() else []
        ), {}
    if not isinstance(obj, dict):
        return [], {}
    facts: dict[str, Any] = {}
    if isinstance(obj.get("session_id"), str):
        facts["session_id"] = obj["session_id"]
    kind = obj.get("type")
    if kind == "assistant":
        events = _assistant(obj)
        if obj.get("error"):
            facts["error"] = _error_text(events, str(obj["error"]))
        return events, facts
    if kind == "system" and obj.get("subtype") == "api_retry":
        facts["error"] = _retry_text(obj)
        return [], facts
    if kind == "user":
        return _tool_results(obj), facts
    if kind == "stream_event":
        return _delta(obj), facts
    if kind == "result":
        facts.update(
            result=obj.get("result"),
            is_error=bool(obj.get("is_error")),
            num_turns=obj.get("num_turns"),
        )
        used = usage.from_anthropic(obj.get("usage"), obj.get("total_cost_usd"))
        if used is not None and not usage.empty(used):
            facts["usage"] = used
        if facts["is_error"]:
            facts["error"] = _result_error(obj)
    return [], facts


def _error_text(events: list[Event], code: str) -> str:
    texts = [str(e["data"]["text"]) for e in events if e["kind"] == "session.output"]
    return " ".join(texts) or code


def _retry_text(obj: dict[str, Any]) -> str:
    status = obj.get("error_status")
    why = f"HTTP {status}" if status is not None else "a failed request"
    text = f"API retry {obj.get('attempt')}/{obj.get('max_retries')} after {why}"
    return f"{text} ({obj['error']})" if obj.get("error") else text


def _result_error(obj: dict[str, Any]) -> str:
    text = obj.get("result")
    message = text if isinstance(text, str) and text else str(obj.get("terminal_reason") or "")
    status = obj.get("api_error_status")
    if status is not None:
        message = f"{message} (HTTP {status})"
    return message or "the turn failed"


def _blocks(obj: dict[str, Any]) -> list[dict[str, Any]]:
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _assistant(obj: dict[str, Any]) -> list[Event]:
    events: list[Event] = []
    for block in _blocks(obj):
        if block.get("type") == "text":
            events.append({"kind": "session.output", "data": {"text": str(block.get("text"))}})
        elif block.get("type") == "tool_use":
            events.append(
                {
                    "kind": "session.tool_call",
                    "data": {
                        "id": block.get("id"),
                        "name": block.get("name"),
                        "input": block.get("input"),
                    },
                }
            )
    if obj.get("error"):
        for event in events:
            event["data"]["error"] = obj["error"]
    return events


def _tool_results(obj: dict[str, Any]) -> list[Event]:
    events: list[Event] = []
    for block in _blocks(obj):
        if block.get("type") == "tool_result":
            content = block.get("content")
            events.append(
                {
                    "kind": "session.tool_result",
                    "data": {
                        "id": block.get("tool_use_id"),
                        "is_error": bool(block.get("is_error")),
                        "content": content if isinstance(content, str) else json.dumps(content),
                    },
                }
            )
    return events


def _delta(obj: dict[str, Any]) -> list[Event]:
    event = obj.get("event")
    delta = event.get("delta") if isinstance(event, dict) else None
    if isinstance(delta, dict) and delta.get("type") == "text_delta":
        return [{"kind": "session.chunk", "data": {"text": str(delta.get("text"))}}]
    return []
