"""``roost signal SOURCE``: what an agent CLI's hook reports, as one signal on its channel.

An agent CLI runs this as a hook command, with the hook's JSON document on stdin: claude's
per-record ``--settings`` hooks (``claude``) and its status line (``claude-statusline``), kimi's
hooks of ``roost integrate kimi`` (``kimi``). The channel's socket, record and generation come
from the environment the supervisor gave the agent (``roost.wire.signals.ENV_NAMES``); without
them this does nothing at all. With them it maps the provider's event to one ``Signal`` (or to
none: an event roost does not use), sends it as one datagram without waiting (a datagram that
cannot be sent at once is dropped) and exits 0.

A hook's answer is its exit code and its stdout: claude adds a hook's stdout to the
conversation for some events and blocks on exit code 2, kimi blocks on exit code 2 or a
``permissionDecision`` on stdout. So this prints nothing, always exits 0, whatever fails, and
never answers anything. The one exception is the status line, whose stdout claude shows in its
footer: ``claude-statusline`` prints one short line (the model and the cost so far).

``roost signal`` starts as fast as Python can: the entry point (``roost.cli.quick.main``) hands
it the command line before click or anything else is imported, and it imports only ``json``,
``_socket`` and the pure-Python msgpack encoder of ``roost ls``'s fast path. It writes the
datagram of ``roost.wire.signals`` itself (``encode``): that module's import (typing and msgpack)
would take as long again as the rest of this start, and a test holds the two byte for byte.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # not typing's (its import costs a hook's start ~4 ms); mypy reads this
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, NoReturn

    from roost.wire.signals import Signal, SignalKind, SignalSource

    Mapped = tuple[SignalKind, dict[str, Any]]  # a signal's kind and data

# roost.wire.signals' names and limits (tests/unit/test_hooks.py holds them equal)
ENV_SOCKET, ENV_RECORD, ENV_GENERATION = (
    "ROOST_SIGNAL_SOCKET",
    "ROOST_SIGNAL_RECORD",
    "ROOST_SIGNAL_GENERATION",
)
ENV_NAMES = (ENV_SOCKET, ENV_RECORD, ENV_GENERATION)
VERSION, MAX_DATAGRAM, MAX_TEXT = 1, 8192, 512
MAX_STDIN = 1 << 20  # a hook document larger than this is cut (and then is not JSON: dropped)

# ``roost signal``'s SOURCE: the signal's ``source``.
SOURCES: dict[str, SignalSource] = {
    "claude": "hook",
    "claude-statusline": "statusline",
    "kimi": "hook",
}

# claude's Notification types that mean a person is needed, as attention reasons. Its
# ``idle_prompt`` is an idle input box (ready, not attention) and is not sent.
CLAUDE_NOTICES = {"permission_prompt": "permission", "elicitation_dialog": "question"}


def _text(doc: Mapping[str, Any], key: str) -> str | None:
    value = doc.get(key)
    return value if isinstance(value, str) else None


def _tool(doc: Mapping[str, Any]) -> str:
    """A permission request's tool, with its command when it has one: "Bash: touch x"."""
    name = _text(doc, "tool_name") or "?"
    given = doc.get("tool_input")
    command = given.get("command") if isinstance(given, dict) else None
    return f"{name}: {command}" if isinstance(command, str) else name


def claude_signal(doc: Mapping[str, Any]) -> Mapped | None:
    """The signal of one claude hook document (``hook_event_name`` names the event)."""
    event = doc.get("hook_event_name")
    session = {"provider_session": _text(doc, "session_id")}
    if event == "SessionStart":
        return "session", {**session, "how": _text(doc, "source")}
    if event == "UserPromptSubmit":
        return "turn-start", session
    if event == "Stop":
        return "turn-end", {**session, "status": "ok"}
    if event == "StopFailure":  # an API error ends the turn here, not in Stop
        error = _text(doc, "last_assistant_message") or _text(doc, "error")
        return "turn-end", {**session, "status": "error", "error": error}
    if event == "PermissionRequest":
        return "attention", {**session, "reason": "permission", "message": _tool(doc)}
    if event == "Notification":
        reason = CLAUDE_NOTICES.get(str(doc.get("notification_type")))
        if reason is None:
            return None
        return "attention", {**session, "reason": reason, "message": _text(doc, "message")}
    if event == "SessionEnd":
        return "session-end", {**session, "how": _text(doc, "reason")}
    return None


def kimi_signal(doc: Mapping[str, Any]) -> Mapped | None:
    """The signal of one kimi hook document (``hook_event_name`` names the event)."""
    event = doc.get("hook_event_name")
    session = {"provider_session": _text(doc, "session_id")}
    if event == "SessionStart":
        return "session", {**session, "how": _text(doc, "source")}
    if event == "TurnStarted":
        return "turn-start", session
    if event == "Stop":
        return "turn-end", {**session, "status": "ok"}
    if event == "StopFailure":
        error = _text(doc, "error_message") or _text(doc, "error_type")
        return "turn-end", {**session, "status": "error", "error": error}
    if event == "Interrupt":  # kimi's turn ended by the user: no Stop follows
        return "turn-end", {**session, "status": "interrupted"}
    if event == "PermissionRequest":
        return "attention", {**session, "reason": "permission", "message": _tool(doc)}
    if event == "PermissionResult":  # the permission was answered: the wait is over
        answered = _text(doc, "decision") or "answered"
        return "attention", {**session, "reason": "permission", "answered": answered}
    if event == "SessionEnd":
        return "session-end", {**session, "how": _text(doc, "reason")}
    return None


def _number(doc: Any, *path: str) -> Any:
    for key in path:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc if isinstance(doc, int | float) and not isinstance(doc, bool) else None


def statusline_usage(doc: Mapping[str, Any]) -> Mapped:
    """claude's status line document as ``usage``: the session's cost so far
    (``cost.total_cost_usd``), the input and output tokens of its context window
    (``context_window.total_*``: they grow with the context, they are not a sum of the turns)
    and the cache tokens of its latest request (``context_window.current_usage``)."""
    data = {
        "provider_session": _text(doc, "session_id"),
        "input_tokens": _number(doc, "context_window", "total_input_tokens"),
        "output_tokens": _number(doc, "context_window", "total_output_tokens"),
        "cache_read_tokens": _number(
            doc, "context_window", "current_usage", "cache_read_input_tokens"
        ),
        "cache_write_tokens": _number(
            doc, "context_window", "current_usage", "cache_creation_input_tokens"
        ),
        "cost_usd": _number(doc, "cost", "total_cost_usd"),
    }
    return "usage", {k: v for k, v in data.items() if v is not None}


def status_text(doc: Mapping[str, Any]) -> str:
    """The status line claude shows: the model and the cost so far, on one line."""
    model = doc.get("model")
    name = model.get("display_name") or model.get("id") if isinstance(model, dict) else None
    cost = _number(doc, "cost", "total_cost_usd")
    parts = [str(name) if name else "", f"${cost:.2f}" if cost is not None else ""]
    return " · ".join(p for p in parts if p).replace("\n", " ")[:80]


MAPPERS = {"claude": claude_signal, "kimi": kimi_signal, "claude-statusline": statusline_usage}


def signal_of(
    source: str, doc: Mapping[str, Any], env: Mapping[str, str], seq: int
) -> Signal | None:
    """The signal a hook document gives, addressed from ``env``; None when ``env`` names no
    channel, or the event is not one roost uses."""
    record, generation = env.get(ENV_RECORD), env.get(ENV_GENERATION) or ""
    if not env.get(ENV_SOCKET) or not record or not generation.isdecimal():
        return None
    mapped = MAPPERS[source](doc)
    if mapped is None:
        return None
    kind, data = mapped
    signal: Signal = {
        "v": VERSION,
        "record": record,
        "generation": int(generation),
        "seq": seq,
        "source": SOURCES[source],
        "kind": kind,
        "at": time.time(),
        "data": {k: v for k, v in data.items() if v is not None},
    }
    event = doc.get("hook_event_name")
    if isinstance(event, str):
        signal["event"] = event
    elif source == "claude-statusline":
        signal["event"] = "statusLine"
    return signal


def _trim(value: Any) -> Any:
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if isinstance(value, dict):
        return {str(k)[:64]: _trim(v) for k, v in list(value.items())[:32]}
    if isinstance(value, list | tuple):
        return [_trim(v) for v in list(value)[:32]]
    if value is None or isinstance(value, bool | int | float):
        return value
    return str(value)[:MAX_TEXT]


def encode(signal: Signal) -> bytes:
    """``roost.wire.signals.encode``'s datagram, byte for byte, without msgpack's import."""
    from roost.client.fast.tinypack import packb

    sig: dict[str, Any] = {**signal, "data": _trim(signal["data"])}
    if "event" in sig:
        sig["event"] = str(sig["event"])[:64]
    raw = packb(sig)
    return packb({**sig, "data": {}}) if len(raw) > MAX_DATAGRAM else raw


def send(path: str, raw: bytes) -> bool:
    """One datagram to ``path``, never waiting: False when it could not go at once (no socket
    there, nobody bound to it, its queue full)."""
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
    try:
        sock.setblocking(False)
        sock.sendto(raw, path)
        return True
    except OSError:
        return False
    finally:
        sock.close()


def run(source: str, stdin: bytes, env: Mapping[str, str]) -> tuple[Signal | None, str]:
    """What one hook run sends, and what it prints (the status line only): nothing unless
    ``env`` names a channel; raises nothing it can catch."""
    if source not in SOURCES or not all(env.get(name) for name in ENV_NAMES):
        return None, ""
    seq = time.monotonic_ns()
    try:
        import json

        doc = json.loads(stdin)
        if not isinstance(doc, dict):
            return None, ""
        signal = signal_of(source, doc, env, seq)
        if signal is not None:
            send(env[ENV_SOCKET], encode(signal))
        return signal, status_text(doc) if source == "claude-statusline" else ""
    except Exception:  # a hook never fails the CLI that runs it: garbage in, nothing out
        return None, ""


def main(argv: list[str]) -> NoReturn:
    """``roost signal SOURCE`` run by a hook: exits 0 whatever happens."""
    try:
        # read even when nothing is sent: the CLI writes the whole document (never a terminal's)
        stdin = b"" if sys.stdin.isatty() else sys.stdin.buffer.read(MAX_STDIN)
        _, text = run(argv[0] if len(argv) == 1 else "", stdin, os.environ)
        if text:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
    except BaseException:  # a hook's exit code is an answer (2 blocks): it is always 0
        pass
    os._exit(0)
