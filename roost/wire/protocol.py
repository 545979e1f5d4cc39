"""The wire protocol: frames, envelope headers, the msgpack codec with its limits, the catalogue.

A request travels as two frames, ``[header, body]``, each one msgpack map. The header is small and
holds everything the broker needs to route (kind, request id, method, target); the body is only
decoded by the actor that serves the method. docs/PROTOCOL.md is the normative description; the
catalogue below (``METHODS``, ``EVENT_KINDS``) is checked against it by tests.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

# The codec and its limits live in roost.wire.codec (light to import); they are the protocol's.
from roost.wire.codec import BODY_LIMIT as BODY_LIMIT
from roost.wire.codec import HARD_FRAME_LIMIT as HARD_FRAME_LIMIT
from roost.wire.codec import HEADER_LIMIT as HEADER_LIMIT
from roost.wire.codec import MAX_ARRAY as MAX_ARRAY
from roost.wire.codec import MAX_BIN as MAX_BIN
from roost.wire.codec import MAX_DEPTH as MAX_DEPTH
from roost.wire.codec import MAX_FRAMES as MAX_FRAMES
from roost.wire.codec import MAX_MAP as MAX_MAP
from roost.wire.codec import MAX_STR as MAX_STR
from roost.wire.codec import PROTOCOL_VERSION as PROTOCOL_VERSION
from roost.wire.codec import load as _load
from roost.wire.codec import pack as pack
from roost.wire.errors import RoostError

SUPPORTED_VERSIONS: tuple[int, ...] = (1,)

# The wire between the node and its session supervisors (docs/PROTOCOL.md section 9): the launch
# spec, the hello's ``meta``, the ``node.session.*`` reports and the outbox's entries, and the
# ``session.*`` requests the node sends a supervisor. A supervisor outlives an upgrade of the node
# (it is a detached process still running the code it started with), so the node serves this
# version and the one before it. Bump it when a supervisor of the previous release would be
# misread by this node, or would misread it: a report, entry or request field removed, renamed or
# given another type or meaning, a new field the node needs from every supervisor, a request a
# supervisor must serve. An optional field either side may ignore does not bump it. Version 1 is
# every supervisor that sends no version (all before this constant); 2 adds ``roost`` and ``wire``
# to the hello's meta and to ``node.session.attach``; 3: the node commits every input and turn
# (the supervisor serves ``session.type`` and ``session.run`` and no longer ``session.prompt``,
# ``session.input``, ``session.key`` or ``session.turn``), its gate says ``state``.
SUPERVISOR_WIRE = 3
SUPERVISOR_WIRES_SERVED: tuple[int, ...] = (SUPERVISOR_WIRE - 1, SUPERVISOR_WIRE)

# Message kinds.
REQUEST = "request"
RESPONSE = "response"
ERROR = "error"
EVENT = "event"
HELLO = "hello"
PING = "ping"
PONG = "pong"
PUBLISH = "publish"
NOTIFY = "notify"
KINDS = frozenset({REQUEST, RESPONSE, ERROR, EVENT, HELLO, PING, PONG, PUBLISH, NOTIFY})

OPERATOR, OBSERVER = "operator", "observer"
ANYONE = (OPERATOR, OBSERVER)

# Who answers a method: the broker itself, the node actor, a hub's actor, and (internal) the
# state store, a provider's adapter host (``adapter/<provider>``), a session's supervisor.
BROKER, NODE, HUB = "broker", "node", "hub"
STATE, ADAPTER, SUPERVISOR = "state", "adapter", "supervisor"


@dataclass(frozen=True, slots=True)
class Method:
    """One wire method and everything the code decides by its name. Each method is declared once,
    in ``METHODS``; every set of method names the broker, the node and the hub act on is derived
    from that table (``CLIENT_METHODS``, ``READ_METHODS``, ``MUTATING``, ``NODE_WIDE``, ...)."""

    name: str
    summary: str
    served_by: tuple[str, ...] = (NODE,)
    client: bool = True  # a client may call it; False: internal, between actors (section 9)
    roles: tuple[str, ...] = (OPERATOR,)  # the client roles allowed: an observer only reads
    # claims admit it first (the record's, or the node's when node-wide), then its operation id
    # is honoured: a repeat answers the first outcome
    mutating: bool = False
    node_wide: bool = False  # needs the node's controller lease's grant while that is live
    forwarded: bool = False  # executed by the live session's supervisor
    committed: str = ""  # the node commits it itself (the input's kind: prompt, input, key, turn)
    # what a scoped token (``roost token new --scope own``) may do with it: "record" (only for a
    # record of its own, named by the body's ``id``), "own" (answered with its own records'
    # only), "open" (as any operator), "" (forbidden)
    scoped: str = ""

    @property
    def claim(self) -> str:
        """Whose claim must admit it: ``"node"``, ``"record"`` (the record its body names), or
        ``""`` for none."""
        if self.node_wide:
            return NODE
        return "record" if self.mutating else ""

    @property
    def takes_op(self) -> bool:
        """Whether the node honours the header's operation id ``op``."""
        return self.mutating


def _internal(name: str, summary: str, server: str = NODE) -> Method:
    """A method between the node's actors, never a client's (docs/PROTOCOL.md section 9)."""
    return Method(name, summary, served_by=(server,), client=False)


# Every wire method: those a client may call (target ``node`` unless stated), then the internal
# ones the node's actors call each other with (docs/PROTOCOL.md sections 4 and 9). A name served
# by more than one actor is one entry: ``session.stop`` is a client's method that the node serves
# and the node's call on a supervisor.
METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            "initialize",
            "negotiate the protocol version and authenticate (served by the broker)",
            served_by=(BROKER,),
            roles=ANYONE,
        ),
        Method(
            "node.status",
            "node id, incarnation, pid, endpoints, actors and their health",
            roles=ANYONE,
            scoped="open",
        ),
        Method("node.shutdown", "stop the node daemon; live sessions keep running", node_wide=True),
        Method(
            "node.doctor",
            "check each provider CLI in the node's environment: found, version, login",
        ),
        Method(
            "node.backup", "copy the state database to a new file while the node serves (operator)"
        ),
        Method("workspace.add", "register a directory as a workspace", node_wide=True),
        Method("workspace.list", "list the registered workspaces", roles=ANYONE, scoped="open"),
        Method(
            "session.spawn",
            "create a record and launch a fresh session of a provider",
            mutating=True,
            node_wide=True,
            scoped="open",
        ),
        Method(
            "session.list", "list the records", served_by=(NODE, HUB), roles=ANYONE, scoped="own"
        ),
        Method(
            "session.show",
            "one record, optionally with the current screen",
            roles=ANYONE,
            scoped="record",
        ),
        Method(
            "session.prompt",
            "type text into the session and submit it",
            mutating=True,
            forwarded=True,
            committed="prompt",
            scoped="record",
        ),
        Method(
            "session.input",
            "type raw text into the session, no submit",
            mutating=True,
            forwarded=True,
            committed="input",
            scoped="record",
        ),
        Method(
            "session.key",
            "press named keys (enter, escape, interrupt, arrows, ...)",
            mutating=True,
            forwarded=True,
            committed="key",
            scoped="record",
        ),
        Method(
            "session.resize",
            "resize the session's terminal",
            served_by=(NODE, SUPERVISOR),
            mutating=True,
            forwarded=True,
            scoped="record",
        ),
        Method("session.rename", "change a record's display name", mutating=True, scoped="record"),
        Method(
            "session.stop",
            "stop the live session; the record becomes dormant",
            served_by=(NODE, SUPERVISOR),
            mutating=True,
            scoped="record",
        ),
        Method(
            "session.resume",
            "cold-resume a dormant record by its provider session id",
            mutating=True,
            scoped="record",
        ),
        Method(
            "session.fork",
            "create a record whose conversation begins as a copy of another record's, by the "
            "provider CLI's own fork, and launch it",
            mutating=True,
            node_wide=True,
            scoped="record",
        ),
        Method(
            "session.forget", "delete a record that is not live", mutating=True, scoped="record"
        ),
        Method(
            "session.restore",
            "cold-resume, one at a time, every dormant record whose policy is resume",
            mutating=True,
            node_wide=True,
        ),
        Method(
            "session.transcript",
            "read the session's raw terminal output by byte offset",
            served_by=(NODE, SUPERVISOR),
            roles=ANYONE,
            scoped="record",
        ),
        Method(
            "session.diff",
            "what a session in a worktree changed against its base (spawn worktree)",
            roles=ANYONE,
            scoped="record",
        ),
        Method(
            "session.turn",
            "start a stream-mode turn: a headless provider run in the same conversation",
            mutating=True,
            forwarded=True,
            committed="turn",
            scoped="record",
        ),
        Method(
            "session.turn.wait",
            "wait for a turn (default the latest) to end",
            roles=ANYONE,
            scoped="record",
        ),
        Method(
            "session.claim",
            "claim a session for control; returns a grant with a lease",
            scoped="record",
        ),
        Method("session.release", "release a claim", scoped="record"),
        Method(
            "node.claim",
            "take the node's controller lease: node-wide mutations then need its grant",
        ),
        Method("node.release", "release the node's controller lease"),
        Method(
            "operation.lookup",
            "an operation id's outcome: accepted, terminal, interrupted or unknown",
            roles=ANYONE,
        ),
        Method(
            "events.since", "durable events after a sequence number", roles=ANYONE, scoped="own"
        ),
        Method(
            "node.usage",
            "tokens and cost the providers reported, summed by session, provider and day",
            roles=ANYONE,
        ),
        Method(
            "hub.status",
            "a hub's incarnation, pid, uptime and linked nodes (served by a hub)",
            served_by=(HUB,),
            roles=ANYONE,
        ),
        Method(
            "hub.nodes",
            "the nodes linked to a hub now (served by a hub)",
            served_by=(HUB,),
            roles=ANYONE,
        ),
        Method(
            "hub.fleet",
            "every node with its link, roost version, providers and their login, sessions and "
            "load (served by a hub)",
            served_by=(HUB,),
            roles=ANYONE,
        ),
        Method(
            "hub.place",
            "the node a new session of a provider goes to, and why each node is or is not a "
            "candidate (served by a hub)",
            served_by=(HUB,),
            roles=ANYONE,
        ),
        Method(
            "hub.shutdown",
            "stop the hub; nodes and their sessions run on (served by a hub)",
            served_by=(HUB,),
        ),
        _internal(
            "state.open",
            "the store's node id, schema, seq range, retention and storage health",
            STATE,
        ),
        _internal("state.workspace.add", "register a workspace", STATE),
        _internal("state.workspace.list", "list the workspaces", STATE),
        _internal("state.workspace.find", "a workspace by id, name or path", STATE),
        _internal("state.record.create", "insert a record with its events", STATE),
        _internal("state.record.update", "compare-and-set a record's fields, with events", STATE),
        _internal("state.record.get", "one record by id", STATE),
        _internal("state.record.find", "one record by id or name", STATE),
        _internal("state.record.list", "every record", STATE),
        _internal("state.record.delete", "compare-and-set delete of a record, with events", STATE),
        _internal("state.events.append", "append events, optionally with an operation", STATE),
        _internal(
            "state.events.append_each", "several appends in one transaction, each alone", STATE
        ),
        _internal("state.events.since", "durable events after a sequence number", STATE),
        _internal("state.backup", "copy the database from a read snapshot", STATE),
        _internal("state.op.get", "an operation by id", STATE),
        _internal("state.op.put", "store an operation's state and result", STATE),
        _internal(
            "state.turn.begin", "a running turn, its operation and input event, at once", STATE
        ),
        _internal("state.turn.end", "end a running turn once", STATE),
        _internal("state.turn.interrupt", "end a record's running turns as interrupted", STATE),
        _internal("state.turn.orphans", "running turns whose record is not active", STATE),
        _internal("state.turn.get", "a turn by id", STATE),
        _internal("state.turn.latest", "a record's latest turn", STATE),
        _internal("state.usage.add", "a session's running usage totals, as reported", STATE),
        _internal("state.usage.sum", "usage since a time, by session, provider and day", STATE),
        _internal("state.usage.totals", "each record's usage so far", STATE),
        _internal("adapter.launch", "the command of a fresh or resumed launch", ADAPTER),
        _internal("adapter.classify", "classify a screen", ADAPTER),
        _internal("adapter.identity", "the provider session id, when it can be known", ADAPTER),
        _internal("adapter.verify_resume", "the verdict on a resumed screen", ADAPTER),
        _internal("adapter.turn", "the command of one headless turn", ADAPTER),
        _internal("adapter.parse", "the events and facts of one output line of a turn", ADAPTER),
        _internal("adapter.doctor", "one provider's doctor report", ADAPTER),
        _internal("adapter.usage", "a provider session's usage so far, from its files", ADAPTER),
        _internal("node.session.attach", "a supervisor (re-)registers"),
        _internal("node.session.exited", "the agent process ended"),
        _internal("node.session.failed", "the launch failed"),
        _internal("node.session.classified", "the screen's classification changed"),
        _internal("node.session.identity", "the provider session id became known"),
        _internal("node.session.resume", "the verdict on a cold resume"),
        _internal("node.session.usage", "the provider session's usage so far"),
        _internal("session.type", "type an input the node committed", SUPERVISOR),
        _internal("session.run", "run a stream-mode turn the node began", SUPERVISOR),
        _internal("session.screen", "the live screen, cursor and state", SUPERVISOR),
    )
}

CLIENT_METHODS: dict[str, str] = {n: m.summary for n, m in METHODS.items() if m.client}
# What an observer may call: reading, listing, events; never a change.
READ_METHODS = frozenset(n for n, m in METHODS.items() if m.client and OBSERVER in m.roles)
# Claims admit them and their operation ids are honoured (docs/PROTOCOL.md section 2).
MUTATING = frozenset(n for n, m in METHODS.items() if m.mutating)
# Node-wide: while another client holds the node's controller lease they need its grant.
NODE_WIDE = frozenset(n for n, m in METHODS.items() if m.node_wide)
# Runtime requests the node hands to the live session's supervisor.
FORWARDED = frozenset(n for n, m in METHODS.items() if m.forwarded)
# Input and turns: checked and committed by the node, executed by the supervisor.
COMMITTED_HERE = frozenset(n for n, m in METHODS.items() if m.committed)
# The typed input's methods and their kind (a turn is not typed).
TYPED_METHODS = {n: m.committed for n, m in METHODS.items() if m.committed not in ("", "turn")}


def served_by(server: str) -> frozenset[str]:
    """The methods ``server`` (``node``, ``hub``) must have a handler for, and no others."""
    return frozenset(n for n, m in METHODS.items() if server in m.served_by)


def check_served(server: str, handlers: Collection[str]) -> None:
    """Raise ``ValueError`` unless ``handlers`` names exactly the methods ``server`` serves:
    every method the table gives it has a handler, and no handler is for a method it does not."""
    expected, named = served_by(server), frozenset(handlers)
    if named != expected:
        raise ValueError(
            f"the {server}'s handlers do not match the table of methods: "
            f"no handler for {sorted(expected - named)}, undeclared {sorted(named - expected)}"
        )


EVENT_KINDS: dict[str, str] = {
    "node.started": "a node incarnation began serving",
    "node.stopping": "the node daemon is shutting down",
    "workspace.added": "a workspace was registered",
    "workspace.renamed": "a registered workspace was given another name",
    "record.created": "a record was created by spawn",
    "record.state": "a record changed state",
    "record.renamed": "a record's display name changed",
    "record.forgotten": "a record was deleted",
    "session.identity": "the provider session id of a record became known",
    "session.input": "input was accepted for a session (prompt, raw input or keys)",
    "session.classified": "the adapter's classification of the screen changed",
    "session.resume": "the verdict on a cold resume: resumed, attention_required, retry_fresh "
    "or resume_failed",
    "session.limit-continued": "the node typed the continue prompt after a usage limit's reset "
    "(on_limit continue)",
    "session.exited": "the agent process ended",
    "session.lost": "a supervisor vanished; the record was made dormant",
    "session.supervisor": "a supervisor attached whose wire version this node does not serve",
    "record.restored": "a restore's outcome for one record: resumed, attention, resume_failed "
    "or skipped",
    "session.turn": "a stream-mode turn ended: completed, failed or interrupted",
    "session.chunk": "a partial piece of assistant text (streaming)",
    "session.output": "assistant text of a turn",
    "session.tool_call": "the agent called a tool",
    "session.tool_result": "a tool call's result",
    "session.stderr": "a line the provider's headless mode wrote to stderr",
    "session.usage": "tokens and cost a provider reported for a session (its new part)",
}

# The key names ``session.key`` takes (the bytes they stand for are the adapters' business).
KEY_NAMES = (
    "enter",
    "escape",
    "interrupt",
    "eof",
    "tab",
    "backspace",
    "up",
    "down",
    "right",
    "left",
    "home",
    "end",
    "pageup",
    "pagedown",
    "delete",
    "space",
    "shift-tab",
)


class Packed(bytes):
    """A body that is already one encoded msgpack map: a handler may return it, and it goes on
    the wire as it is (a reply built from stored bytes, or one relayed without decoding)."""


def _shape_ok(obj: Any, depth: int) -> bool:
    """Nesting within MAX_DEPTH, and every map key a string (msgpack also allows bin keys).
    Only containers are walked into (``type`` is exact: unpacked values are never subclasses),
    so a long list of small maps costs one call per map. A value inside a container counts one
    level deeper than it, scalars too."""
    if depth > MAX_DEPTH or (obj and depth + 1 > MAX_DEPTH):
        return False
    if type(obj) is dict:
        for key, value in obj.items():
            if type(key) is not str:
                return False
            kind = type(value)
            if (kind is dict or kind is list) and not _shape_ok(value, depth + 1):
                return False
    elif type(obj) is list:
        for value in obj:
            kind = type(value)
            if (kind is dict or kind is list) and not _shape_ok(value, depth + 1):
                return False
    return True


def unpack(
    data: bytes | memoryview,
    *,
    limit: int = BODY_LIMIT,
    what: str = "body",
    shape: bool = True,
) -> dict[str, Any]:
    """Decode one frame into a map, enforcing every limit; raise RoostError on bad input.
    ``shape=False`` leaves out the walk that checks nesting and map keys (the rest still holds):
    for a client reading its node's replies, which the node built."""
    obj = _load(data, limit, what)
    if shape and not _shape_ok(obj, 0):
        raise _misshapen(what)
    return obj


def _misshapen(what: str) -> RoostError:
    return RoostError(
        "bad-request",
        f"{what} nests deeper than {MAX_DEPTH} or has a map key that is not a string",
    )


@dataclass(slots=True)
class Header:
    """The routing frame. Short keys on the wire: v k id m t f s g op topic."""

    kind: str
    rid: str = ""
    method: str = ""
    target: str = ""
    sender: str = ""
    version: int = PROTOCOL_VERSION
    session: dict[str, Any] | None = None
    grant: str = ""
    op: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"v": self.version, "k": self.kind}
        if self.rid:  # string keys that are empty are left out
            wire["id"] = self.rid
        if self.method:
            wire["m"] = self.method
        if self.target:
            wire["t"] = self.target
        if self.sender:
            wire["f"] = self.sender
        if self.grant:
            wire["g"] = self.grant
        if self.op:
            wire["op"] = self.op
        if self.session is not None:
            wire["s"] = self.session
        if self.extra:
            wire.update(self.extra)
        return wire

    def encode(self) -> bytes:
        return pack(self.to_wire())

    @classmethod
    def decode(cls, data: bytes) -> Header:
        """The header in ``data``; a field of the wrong type raises ``HeaderError`` naming it
        (and carrying the header's ``id`` when that is readable). A nil field counts as absent.

        One pass over its few keys checks the shape (as ``unpack`` does), the string fields and
        collects the keys beyond the known ones; the refusals come in the order they always
        did: the shape, then ``k``, ``v``, the string fields (id m t f g op), ``s``."""
        raw = _load(data, HEADER_LIMIT, "header")
        extra: dict[str, Any] = {}
        strings_ok = True
        for key, value in raw.items():
            if type(key) is not str:
                raise _misshapen("header")
            if key not in HEADER_KEYS:
                extra[key] = value
            elif value is not None and key in _STRING_KEYS and type(value) is not str:
                strings_ok = False
            if (type(value) is dict or type(value) is list) and not _shape_ok(value, 1):
                raise _misshapen("header")
        get = raw.get
        rid = get("id")
        readable = rid if type(rid) is str else ""
        kind = get("k")
        if type(kind) is not str or kind not in KINDS:
            raise HeaderError("k", "a known message kind", readable)
        version = get("v")
        if version is None:
            version = PROTOCOL_VERSION
        elif type(version) is not int:  # a bool is no version
            raise HeaderError("v", "an integer", readable)
        if not strings_ok:
            for key in _STRING_ORDER:
                if get(key) is not None and type(get(key)) is not str:
                    raise HeaderError(key, "a string", "" if key == "id" else readable)
        return cls(
            kind,
            readable,
            get("m") or "",
            get("t") or "",
            get("f") or "",
            version,
            _header_session(get("s"), readable),
            get("g") or "",
            get("op") or "",
            extra,
        )


_STRING_ORDER = ("id", "m", "t", "f", "g", "op")
_STRING_KEYS = frozenset(_STRING_ORDER)
HEADER_KEYS = frozenset({"v", "k", "id", "m", "t", "f", "s", "g", "op"})


class HeaderError(RoostError):
    """A header that is a readable map but breaks a rule of its fields: ``bad-request`` with
    ``detail.field``, and ``rid`` the header's own ``id`` when that is a string (else "")."""

    def __init__(self, key: str, expected: str, rid: str) -> None:
        super().__init__("bad-request", f"header field {key!r} must be {expected}", {"field": key})
        self.rid = rid


def _header_session(session: Any, rid: str) -> dict[str, Any] | None:
    """The header's ``s``: a map, or None; a nil ``s.generation`` is left out (absent)."""
    if session is None:
        return None
    if not isinstance(session, dict):
        raise HeaderError("s", "a map", rid)
    generation = session.get("generation")
    if generation is None:
        return {k: v for k, v in session.items() if k != "generation"}
    if not isinstance(generation, int) or isinstance(generation, bool):
        raise HeaderError("s.generation", "an integer", rid)
    return session


def reply_header(request: Header, *, error: bool = False) -> Header:
    """The header of the answer to ``request``, addressed back to its sender."""
    return Header(kind=ERROR if error else RESPONSE, rid=request.rid, target=request.sender)
