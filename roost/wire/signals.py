"""The signal channel: exact signals from an agent CLI, beside its screen.

Each live pty session's supervisor owns one channel: a Unix datagram socket it binds before it
launches the agent, named in the agent's environment (``ENV_SOCKET``, with the record and the
generation in ``ENV_RECORD`` and ``ENV_GENERATION``). Whatever observes the CLI sends one
datagram per signal: ``roost signal`` run by the CLI's hooks (claude's ``--settings``, kimi's
config), or the supervisor itself on what it reads in the PTY's bytes (codex's OSC 9). A sender
never waits: a datagram that cannot be sent at once is dropped, so a CLI is never held up by
roost, and the screen, which every verdict still reads, is the authority.

A datagram is one msgpack map (``Signal``). The receiver drops a signal of another record or
generation (a CLI of an earlier launch) and one whose ``seq`` is not above the last it took from
the same ``source`` (a late or repeated delivery). Hooks run as separate processes, so their
``seq`` is the sender's ``time.monotonic_ns()``, which one machine's processes share; the
supervisor's own sources number by the transcript offset.

Signals are evidence, never answers: nothing a signal says types a key into the agent.
"""

# No ``from __future__ import annotations``: see roost.wire.messages.
from typing import Any, Literal, NotRequired, TypedDict, cast, get_args

import msgpack

ENV_SOCKET = "ROOST_SIGNAL_SOCKET"  # the channel's socket path
ENV_RECORD = "ROOST_SIGNAL_RECORD"  # the record the agent belongs to
ENV_GENERATION = "ROOST_SIGNAL_GENERATION"  # and its launch's generation
ENV_NAMES = (ENV_SOCKET, ENV_RECORD, ENV_GENERATION)

VERSION = 1
MAX_DATAGRAM = 8192  # a sender trims its ``data`` to fit; the receiver refuses a larger one
MAX_TEXT = 512  # of any one string in ``data`` (a hook's message, a notification's body)

# Where a signal comes from (the record says which provider): a hook of the CLI, its status line
# command, an OSC 9 notification in its PTY bytes, or a pattern of a provider defined in the
# configuration.
SignalSource = Literal["hook", "statusline", "osc9", "pattern"]
# What it says, the same for every provider:
#   session     the CLI's session started or was resumed (``provider_session``, ``how``:
#               startup | resume | clear | compact)
#   turn-start  a prompt was submitted
#   turn-end    the turn ended (``status``: ok | error | interrupted; ``error``: a message)
#   attention   the CLI waits for a person (``reason``: one of the adapters' attention
#               reasons; ``message``)
#               ``answered`` set (how): that wait is over (kimi's PermissionResult)
#   usage       tokens and cost so far (``input_tokens``, ``output_tokens``,
#               ``cache_read_tokens``, ``cache_write_tokens``, ``cost_usd``; each optional)
#   session-end the CLI's session ended (``how``)
SignalKind = Literal["session", "turn-start", "turn-end", "attention", "usage", "session-end"]
SOURCES: tuple[SignalSource, ...] = get_args(SignalSource)
KINDS: tuple[SignalKind, ...] = get_args(SignalKind)


class Signal(TypedDict):
    v: int
    record: str
    generation: int
    seq: int
    source: SignalSource
    kind: SignalKind
    at: float  # the sender's wall clock, epoch seconds
    data: dict[str, Any]
    event: NotRequired[str]  # the provider's own name for it (a hook event, an OSC 9 text)


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
    """One datagram; ``data`` trimmed (strings to ``MAX_TEXT``), and dropped when still too big."""
    sig = {**signal, "data": _trim(signal["data"])}
    if "event" in sig:
        sig["event"] = str(sig["event"])[:64]
    raw: bytes = msgpack.packb(sig, use_bin_type=True)
    if len(raw) > MAX_DATAGRAM:
        raw = msgpack.packb({**sig, "data": {}}, use_bin_type=True)
    return raw


def decode(raw: bytes) -> Signal:
    """A received datagram as a ``Signal``; ``ValueError`` says what is wrong with it."""
    if len(raw) > MAX_DATAGRAM:
        raise ValueError(f"a signal of {len(raw)} bytes (at most {MAX_DATAGRAM})")
    try:
        sig = msgpack.unpackb(raw, raw=False, strict_map_key=True)
    except Exception as err:  # msgpack raises several kinds; all mean the same here
        raise ValueError(f"not msgpack: {type(err).__name__}") from None
    if not isinstance(sig, dict):
        raise ValueError("a signal is a map")
    if sig.get("v") != VERSION:
        raise ValueError(f"signal version {sig.get('v')!r} (this roost reads {VERSION})")
    for key, kind in (
        ("record", str),
        ("generation", int),
        ("seq", int),
        ("source", str),
        ("kind", str),
        ("at", (int, float)),
        ("data", dict),
    ):
        value = sig.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"field {key!r} is missing or of the wrong type")
    if sig["source"] not in SOURCES:
        raise ValueError(f"unknown source {sig['source']!r}")
    if sig["kind"] not in KINDS:
        raise ValueError(f"unknown kind {sig['kind']!r}")
    if "event" in sig and not isinstance(sig["event"], str):
        raise ValueError("field 'event' is not a string")
    return cast(Signal, sig)  # checked field by field above
