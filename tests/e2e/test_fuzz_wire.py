"""A raw-socket fuzzer against a live node: bad input never hurts the node.

One node is fuzzed once for the whole module (about 10 s), then each test checks one consequence.
Every message is generated from a fixed seed (``SEED``), so a failure is reproduced by running the
module again; the fuzzer records what it threw (``Outcome.sent``) and, for a refused or wrong
reply, the message that caused it.

Phase A throws, from DEALER sockets that never initialized and from ones that did: wrong frame
counts, random bytes, msgpack of the wrong types, unknown and internal kinds and methods, random
bodies for every client method, maps just under and over ``MAX_MAP``, nesting around
``MAX_DEPTH``, bodies over ``BODY_LIMIT`` (and one frame over ``HARD_FRAME_LIMIT``, which libzmq
drops with a disconnect), wrong versions, forbidden targets, random grants, operation ids and
generations, and byte-level mutations of valid requests. It paces itself like a pipelining client
(at most ``WINDOW`` requests outstanding), and every reply is checked against a model of the
broker's rules in docs/PROTOCOL.md section 2. Phase B is a flood: a few thousand requests sent
as fast as the sockets take them. Meanwhile a thread opens fresh sockets (ping, initialize) and
a well-behaved client keeps calling ``session.list``.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import psutil
import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from roost.client.client import Client
from roost.client.locate import read_node_info, read_token
from roost.wire import protocol as p
from roost.wire.errors import CODES, RoostError
from tests.e2e.conftest import Node, wait_for

SEED = 0x5EED_F022
PHASE_A_S = 7.0  # the time phase A may take; it stops early at this bound
PHASE_A_MESSAGES = 12_000  # the messages phase A throws (the seed fixes which)
FLOODERS = 3
FLOOD = 1500  # requests per flooding socket in phase B
FLOOD_S = 4.0  # the bound on the time phase B may send
HARD_AT = 200  # when phase A sends the frames at and over HARD_FRAME_LIMIT
WINDOW = 150  # routed requests phase A lets be outstanding before it waits for answers
SETTLE_S = 5.0  # how long the fuzzer waits for the last answers of a phase
BYSTANDER_S = 15.0  # how long a bystander's request may take during the flood
FLOOD_SETTLE_S = 30.0  # ... of the flood (it returns as soon as all are in)
PROBE_EVERY_S = 0.4
PROBE_DEADLINE_S = 2.0

# Codes that mean the node failed rather than refused a request: a crash inside a handler, and
# the node (or the actor it called) not answering in time or not registered.
BROKEN = frozenset({"internal"})
DEGRADED = frozenset({"unreachable", "unavailable", "timeout"})
# Methods the node serves, besides the client methods (supervisor reports: forbidden to clients),
# and every internal method, from the one table of methods; "hello" and "" are no method at all.
REPORTS = tuple(n for n, m in p.METHODS.items() if not m.client and p.NODE in m.served_by)
INTERNAL_METHODS = (*(n for n, m in p.METHODS.items() if not m.client), "hello", "")
FIELDS = (
    "id",
    "text",
    "provider",
    "cwd",
    "name",
    "mode",
    "env",
    "rows",
    "cols",
    "after",
    "limit",
    "grace_ms",
    "keys",
    "op",
    "grant",
    "renew",
    "lease_ms",
    "take_over",
    "stop_sessions",
    "path",
    "offset",
    "turn",
    "timeout_ms",
    "screen",
    "versions",
    "token",
    "record",
    "generation",
    "address",
    "incarnation",
)
TARGETS = ("state", "adapter/echo", "broker", "session/r0123456789", "client/0123", "node/", "*")
SAFE_TEMPLATES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("session.list", {}),
    ("workspace.list", {}),
    ("node.status", {}),
    ("events.since", {"after": 0, "limit": 3}),
    ("session.show", {"id": "no-such-record", "screen": True}),
    ("operation.lookup", {"op": "op-fuzz"}),
    ("session.prompt", {"id": "no-such-record", "text": "hi"}),
)


# -- what was thrown, what came back ---------------------------------------------------------


@dataclass
class Expect:
    """The broker's answer a message must get (docs/PROTOCOL.md section 2)."""

    reply: str  # "id": an error or response with the request id; "noid"; "pong"; "none"
    rid: str = ""
    codes: frozenset[str] | None = None  # the error codes allowed; None: any but BROKEN, DEGRADED
    ok: bool = False  # a response (success) is allowed
    what: str = ""
    routed: bool = False  # a request the broker routes to the node
    authed: bool | None = None  # the connection's registration after it (None: unchanged)


@dataclass
class Outcome:
    sent: Counter[str] = field(default_factory=Counter)
    codes: Counter[str] = field(default_factory=Counter)
    replies: int = 0
    wrong: list[str] = field(default_factory=list)  # replies that break the model or the format
    degraded: list[str] = field(default_factory=list)  # requests the node failed to serve
    unanswered: dict[str, list[str]] = field(default_factory=dict)  # phase -> what got no answer
    late: int = 0  # answers that came after the fuzzer gave up waiting
    flood_sent: int = 0
    flood_codes: Counter[str] = field(default_factory=Counter)
    probes: list[tuple[str, float, float, float]] = field(default_factory=list)
    probe_failures: list[str] = field(default_factory=list)
    bystander: list[tuple[str, float, str]] = field(default_factory=list)  # phase, seconds, code
    recovery_s: float = 0.0
    routing_ids: list[bytes] = field(default_factory=list)
    disconnects: dict[str, int] = field(default_factory=dict)  # socket -> connections lost
    log: list[dict[str, Any]] = field(default_factory=list)  # node.log after the fuzz
    log_a: list[dict[str, Any]] = field(default_factory=list)  # node.log after phase A
    phase: str = "A"
    elapsed: dict[str, float] = field(default_factory=dict)


class FuzzSocket:
    """A DEALER with a known routing id, what it sent, and what it still awaits."""

    def __init__(self, ctx: zmq.Context[Any], endpoint: str, name: str) -> None:
        self.name = name
        self.routing_id = f"fuzz-{name}".encode()
        self.sock: zmq.Socket[Any] = ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.ROUTING_ID, self.routing_id)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDTIMEO, 1000)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        self.monitor: zmq.Socket[Any] = self.sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        self.sock.connect(endpoint)
        self.authed = False
        self.pending: dict[str, list[Expect]] = {}
        self.given_up: set[str] = set()  # requests no longer awaited (a late answer is fine)
        self.noid: list[Expect] = []
        self.pongs = 0

    def outstanding(self) -> int:
        return sum(len(v) for v in self.pending.values()) + len(self.noid) + self.pongs

    def send(self, frames: list[bytes], expect: Expect) -> bool:
        try:
            self.sock.send_multipart(frames)
        except zmq.Again:
            return False
        if expect.authed is False and self.authed:
            self.lose_registration()
        if expect.authed is not None:  # an initialize: it registers, or ends the registration
            self.authed = expect.authed
        if expect.reply == "id" and not expect.rid:
            expect.reply = "noid"  # a refusal or an answer to a request without an id
        if expect.reply == "id":
            self.pending.setdefault(expect.rid, []).append(expect)
        elif expect.reply == "noid":
            self.noid.append(expect)
        elif expect.reply == "pong":
            self.pongs += 1
        return True

    def lose_registration(self) -> None:
        """A failed initialize ends the registration: the replies the node still owes the
        connection are dropped with it (a reply that was on its way already may still come)."""
        for rid, waiting in list(self.pending.items()):
            kept = [e for e in waiting if not e.routed]
            if len(kept) < len(waiting):
                self.given_up.add(rid)
            if kept:
                self.pending[rid] = kept
            else:
                del self.pending[rid]

    def disconnects(self) -> int:
        """How often the node dropped this socket's connection so far."""
        count = 0
        while self.monitor.poll(0):
            count += recv_monitor_message(self.monitor)["event"] == zmq.EVENT_DISCONNECTED
        return count

    def close(self) -> None:
        self.sock.disable_monitor()
        self.monitor.close(0)
        self.sock.close(0)

    def unanswered(self) -> list[str]:
        left = [f"{self.name} {e.rid}: {e.what}" for v in self.pending.values() for e in v]
        left += [f"{self.name} (no id): {e.what}" for e in self.noid]
        left += [f"{self.name}: a pong"] * self.pongs
        return left

    def forget(self) -> None:
        self.given_up.update(self.pending)
        self.pending.clear()
        self.noid.clear()
        self.pongs = 0


def short(frames: list[bytes]) -> str:
    shown = []
    for frame in frames[:4]:
        try:
            shown.append(repr(msgpack.unpackb(frame, raw=False, strict_map_key=False))[:80])
        except Exception:
            shown.append(f"<{len(frame)} bytes {frame[:16].hex()}>")
    return f"{len(frames)} frames " + " | ".join(shown)


def model(frames: list[bytes], authed: bool, token: str) -> Expect:
    """The answer the broker (and node) owe this message, by the order of checks in section 2."""
    what = short(frames)
    if len(frames) != 2:
        return Expect("noid", codes=frozenset({"bad-request"}), what=what)
    try:
        header = p.Header.decode(frames[0])
    except p.HeaderError as err:  # read, with a field of the wrong type: a readable id is kept
        return Expect("id", err.rid, frozenset({err.code}), what=what)
    except RoostError as err:
        return Expect("noid", codes=frozenset({err.code}), what=what)
    answered = header.kind in (p.REQUEST, p.HELLO, p.NOTIFY, p.PUBLISH)

    def refused(*codes: str) -> Expect:
        return Expect("id" if answered else "none", header.rid, frozenset(codes), what=what)

    if header.kind == p.REQUEST and header.method == "initialize":
        return model_initialize(frames[1], refused, token)
    if len(frames[1]) > p.BODY_LIMIT:
        return refused("frame-too-large")
    if header.kind == p.HELLO:
        return refused("bad-request", "unauthorized")
    if header.kind == p.PING:
        return Expect("pong", what=what)
    if not authed:
        return refused("not-initialized")
    if header.version not in p.SUPPORTED_VERSIONS:
        return refused("unsupported-version")
    if header.kind == p.PUBLISH:
        return refused("bad-request")
    if header.kind not in (p.REQUEST, p.NOTIFY):
        return Expect("none", what=what)  # a client's response, error, event or pong: dropped
    if header.target not in ("", "node"):
        return refused("forbidden")
    if header.kind == p.NOTIFY:
        return Expect("none", what=what)  # routed to the node, which ignores it
    try:
        p.unpack(frames[1], limit=p.HARD_FRAME_LIMIT)
    except RoostError:
        return Expect("id", header.rid, frozenset({"bad-request"}), what=what, routed=True)
    if header.method in p.CLIENT_METHODS:
        return Expect("id", header.rid, None, ok=True, what=what, routed=True)
    codes = frozenset({"forbidden" if header.method in REPORTS else "unknown-method"})
    return Expect("id", header.rid, codes, what=what, routed=True)


def model_initialize(body: bytes, refused: Callable[..., Expect], token: str) -> Expect:
    """An initialize registers the connection when it succeeds, and ends its registration when
    it fails, whatever it had before (section 3)."""
    if len(body) > p.BODY_LIMIT:
        expect = refused("frame-too-large")
    else:
        expect = refused("bad-request", "unsupported-version", "unauthorized")
        try:
            doc = p.unpack(body)
        except RoostError:
            doc = {}
        listed = doc.get("versions")
        listed = listed if isinstance(listed, list) else []
        good = all(isinstance(v, int) and not isinstance(v, bool) for v in listed)
        expect.ok = good and p.PROTOCOL_VERSION in listed and doc.get("token") == token
    expect.authed = expect.ok
    return expect


def check_reply(fs: FuzzSocket, frames: list[bytes], out: Outcome) -> None:
    out.replies += 1
    try:
        assert len(frames) == 2, "a reply is two frames"
        header = p.Header.decode(frames[0])
        body = p.unpack(frames[1], limit=p.HARD_FRAME_LIMIT)
        code = ""
        if header.kind == p.ERROR:
            code = body.get("code", "")
            assert code in CODES, f"unknown code {code!r}"
            message = body.get("message")
            assert isinstance(message, str) and "Traceback" not in message, message
            assert 'File "' not in message, message
            assert isinstance(body.get("detail"), dict), "detail is a map"
            out.codes[code] += 1
        elif header.kind == p.PONG:
            assert isinstance(body.get("registered"), bool), body
            assert fs.pongs > 0, "a pong nobody asked for"
            fs.pongs -= 1
            return
        else:
            assert header.kind == p.RESPONSE, f"a {header.kind!r} message to a client"
            out.codes["ok"] += 1
        if out.phase == "B" and header.rid.startswith("flood:"):
            out.flood_codes[code or "ok"] += 1
        if not header.rid:
            assert fs.noid, f"an answer without id nobody awaits: {code} {body}"
            expect = _without_id(fs.noid, header.kind == p.RESPONSE, code)
        else:
            waiting = fs.pending.get(header.rid)
            if not waiting and header.rid in fs.given_up:
                out.late += 1
                return
            assert waiting, f"an answer to {header.rid!r}, which nobody awaits: {code}"
            expect = waiting.pop(0)
            if not waiting:
                del fs.pending[header.rid]
        if header.kind == p.RESPONSE:
            assert expect.ok, f"success for {expect.what}"
        elif expect.routed and code in DEGRADED:  # not served; checked apart, per phase
            out.degraded.append(f"phase {out.phase}, {fs.name}: {code} for {expect.what}")
        elif expect.codes is None:
            assert code not in BROKEN, f"{code}: {body.get('message')} for {expect.what}"
        else:
            assert code in expect.codes, f"{code} (wanted {sorted(expect.codes)}) {expect.what}"
    except (AssertionError, RoostError) as err:
        out.wrong.append(f"phase {out.phase}, {fs.name}: {err}")


def _without_id(noid: list[Expect], ok: bool, code: str) -> Expect:
    """The expectation an answer without a request id meets. Such answers come in the order
    they are made, not sent: a request routed to the node (``operation.lookup``, answered once
    the state store has) is overtaken by the refusal the broker makes at once of a later
    message. So a success meets the first expectation that may succeed, a refusal the first
    that names its code, else the first that admits any; failing those, the oldest, which the
    checks then judge."""
    ranked = (
        [e for e in noid if e.ok]
        if ok
        else [e for e in noid if e.codes is not None and code in e.codes]
        or [e for e in noid if e.codes is None]
    )
    expect = ranked[0] if ranked else noid[0]
    noid.remove(expect)
    return expect


def drain(sockets: list[FuzzSocket], out: Outcome) -> None:
    for fs in sockets:
        while fs.sock.poll(0):
            check_reply(fs, fs.sock.recv_multipart(), out)


def settle(sockets: list[FuzzSocket], out: Outcome, timeout: float, below: int = 0) -> None:
    """Drain until at most ``below`` answers are outstanding, or ``timeout`` passed."""
    deadline = time.monotonic() + timeout
    poller = zmq.Poller()
    for fs in sockets:
        poller.register(fs.sock, zmq.POLLIN)
    while sum(fs.outstanding() for fs in sockets) > below and time.monotonic() < deadline:
        poller.poll(50)
        drain(sockets, out)


# -- generators --------------------------------------------------------------------------------


class Gen:
    """Random frames and bodies; all randomness comes from one seeded ``random.Random``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.n = 0

    def rid(self, tag: str) -> str:
        self.n += 1
        return f"{tag}:{self.n}"

    def text(self, most: int = 24) -> str:
        alphabet = "abcxyz019 ./-_:\n\t\x00é€😀\u200b\x7f"
        return "".join(self.rng.choice(alphabet) for _ in range(self.rng.randint(0, most)))

    def scalar(self) -> Any:
        rng = self.rng
        makers: list[Callable[[], Any]] = [
            lambda: None,
            lambda: rng.random() < 0.5,
            lambda: rng.choice([0, 1, -1, 2, 127, 255, 65536, 2**31, 2**53 + 1, 2**63 - 1]),
            lambda: rng.choice([-(2**63), 2**64 - 1, -129]),
            lambda: rng.choice([0.0, -1.5, 1e308, float("inf"), float("nan")]),
            lambda: self.text(),
            lambda: rng.randbytes(rng.randint(0, 16)),
            lambda: msgpack.ExtType(rng.randint(0, 127), rng.randbytes(rng.randint(0, 3))),
        ]
        return rng.choice(makers)()

    def value(self, depth: int = 0) -> Any:
        roll = self.rng.random()
        if depth > 3 or roll < 0.6:
            return self.scalar()
        if roll < 0.8:
            return [self.value(depth + 1) for _ in range(self.rng.randint(0, 4))]
        keys: list[Any] = [
            self.rng.choice([self.text(6), self.rng.choice(FIELDS)]) for _ in range(4)
        ]
        if self.rng.random() < 0.1:
            keys.append(self.rng.choice([7, b"bin-key", None]))  # keys of the wrong type
        return {k: self.value(depth + 1) for k in keys[: self.rng.randint(0, 4)]}

    def plausible(self, key: str) -> Any:
        """A value of about the right kind for ``key``, often at or past a limit."""
        rng = self.rng
        choices: list[Callable[[], Any]] = [
            self.scalar,
            lambda: self.value(),
            lambda: "x" * rng.choice([0, 1, 64, 128, 129, 4096, 4097, 262_144, 262_145]),
            lambda: rng.choice([-1, 0, 1, 2, 1000, 1001, 5000, 5001, 600_000, 2**53, 2**53 + 1]),
            lambda: [self.text(8) for _ in range(rng.randint(0, 300))],
            lambda: {self.text(6): self.text(6) for _ in range(rng.randint(0, 300))},
        ]
        if key in ("id", "name", "cwd", "path", "record", "turn"):
            choices.append(lambda: rng.choice(["/", "/tmp", "~", ".", "..", "no-such", "r0"]))
        if key == "keys":
            choices.append(lambda: rng.choices(["enter", "escape", "up", "nope", ""], k=3))
        return rng.choice(choices)()

    def body(self) -> dict[Any, Any]:
        keys = self.rng.sample(FIELDS, self.rng.randint(0, 5))
        body: dict[Any, Any] = {k: self.plausible(k) for k in keys}
        if self.rng.random() < 0.2:
            body[self.text(8)] = self.value()  # unknown keys are ignored
        return body

    def pack(self, obj: Any) -> bytes:
        data: bytes = msgpack.packb(obj, use_bin_type=True)
        return data

    def header(self, kind: str, method: str, **extra: Any) -> dict[str, Any]:
        wire: dict[str, Any] = {"v": 1, "k": kind, "id": self.rid(method or kind), "m": method}
        if self.rng.random() < 0.5:
            wire["t"] = "node"
        wire.update(extra)
        return wire


def safe_body(gen: Gen, method: str) -> dict[Any, Any]:
    """A random body that cannot stop the node, start an agent nor take the node's lease."""
    body = gen.body()
    if method == "node.claim":
        body["lease_ms"] = "fuzz-" + gen.text(4)  # always refused: a lease would lock others out
    if method == "node.shutdown":
        body["stop_sessions"] = gen.rng.choice(["yes", 1, None, [], {}])  # always refused
    if method == "session.spawn":
        body["provider"] = gen.rng.choice(["fuzz-" + gen.text(6), 7, None, "", "x" * 65])
    return body


PROVIDERS = frozenset({"echo", "claude", "codex", "kimi"})
GUARDED = ("node.shutdown", "session.spawn", "node.claim")


def harmful(frames: list[bytes]) -> bool:
    """Whether a message could stop the node, start an agent or take the node's controller lease
    (the fuzzer never sends one)."""
    if len(frames) != 2:
        return False
    try:
        header = p.Header.decode(frames[0])
        body = p.unpack(frames[1], limit=p.HARD_FRAME_LIMIT)
    except RoostError:
        return False
    if header.kind != p.REQUEST or header.method not in GUARDED:
        return False
    if header.method == "node.shutdown":
        return isinstance(body.get("stop_sessions", False), bool)
    if header.method == "node.claim":
        return not isinstance(body.get("lease_ms"), str)
    return body.get("provider") in PROVIDERS


def gen_message(gen: Gen, authed: bool, token: str) -> tuple[str, list[bytes]]:
    """One message of a random category; never a harmful one."""
    while True:
        category, frames = gen_any(gen, authed, token)
        if not harmful(frames):
            return category, frames


def gen_any(gen: Gen, authed: bool, token: str) -> tuple[str, list[bytes]]:
    rng = gen.rng
    category = rng.choices(
        [
            "frames",
            "garbage",
            "wrong-types",
            "kinds",
            "methods",
            "internal",
            "huge-map",
            "deep",
            "oversized",
            "versions",
            "targets",
            "grants",
            "initialize",
            "hello",
            "mutation",
        ],
        weights=[5, 5, 6, 6, 20, 4, 2, 3, 1, 4, 4, 8, 4, 2, 20],
    )[0]
    method = rng.choice([m for m in p.CLIENT_METHODS if m != "initialize"])
    if category == "frames":
        pool = [gen.pack(gen.header(p.REQUEST, method)), gen.pack({}), rng.randbytes(8), b""]
        count = rng.choice([1, 3, 4, 5, 9])
        return category, [rng.choice(pool) for _ in range(count)]
    if category == "garbage":
        return category, [rng.randbytes(rng.randint(0, 64)), rng.randbytes(rng.randint(0, 64))]
    if category == "wrong-types":
        wrong = [[1, 2], 7, "request", None, b"\x01", 1.5, True, {1: 2}, {b"k": "request"}]
        header = rng.choice([*wrong, gen.header(p.REQUEST, method)])
        if isinstance(header, dict) and "k" in header:
            key = rng.choice(["v", "k", "id", "m", "t", "f", "s", "g", "op"])
            header[key] = rng.choice([gen.scalar(), [1], {"a": 1}])
        body = rng.choice([*wrong, gen.value(), {}])
        return category, [gen.pack(header), gen.pack(body)]
    if category == "kinds":
        kind = rng.choice([*sorted(p.KINDS), "", "REQUEST", gen.text(6)])
        if kind == p.REQUEST:
            kind = p.NOTIFY
        header = gen.header(kind, rng.choice([method, ""]))
        if kind == p.PUBLISH:
            header["topic"] = rng.choice(["e/x", "", 7])
        return category, [gen.pack(header), gen.pack(safe_body(gen, method))]
    if category == "methods":
        method = rng.choice([method, method, "fuzz." + gen.text(8), gen.text(12), method + "."])
        return category, [gen.pack(gen.header(p.REQUEST, method)), gen.pack(safe_body(gen, method))]
    if category == "internal":
        method = rng.choice(INTERNAL_METHODS)
        return category, [gen.pack(gen.header(p.REQUEST, method)), gen.pack(gen.body())]
    if category == "huge-map":
        size = rng.choice([p.MAX_MAP - 1, p.MAX_MAP, p.MAX_MAP + 1])
        big = {f"k{i}": i for i in range(size)}
        if rng.random() < 0.3:  # a header that big is over HEADER_LIMIT
            return category, [gen.pack({**big, **gen.header(p.REQUEST, method)}), gen.pack({})]
        body = {**big, **safe_body(gen, method)} if rng.random() < 0.5 else {"id": "x", "env": big}
        return category, [gen.pack(gen.header(p.REQUEST, method)), gen.pack(body)]
    if category == "deep":
        levels = rng.choice([p.MAX_DEPTH - 1, p.MAX_DEPTH, p.MAX_DEPTH + 1, 100, 5000])
        if levels > 200:
            raw = b"\x81\xa2id" + b"\x91" * levels + b"\x01"
        else:
            value: Any = 1
            for _ in range(levels):
                value = [value] if rng.random() < 0.5 else {"id": value}
            raw = gen.pack({"id": value})
        if rng.random() < 0.3:
            header = gen.header(p.REQUEST, method)
            return category, [gen.pack(header)[:-1] + b"\x00", raw]  # a broken header too
        return category, [gen.pack(gen.header(p.REQUEST, method)), raw]
    if category == "oversized":
        size = rng.choice([p.BODY_LIMIT + 1, p.BODY_LIMIT + rng.randint(2, 1 << 20)])
        body_bytes = gen.pack({"id": "x", "text": "a" * size})
        return category, [gen.pack(gen.header(p.REQUEST, "session.prompt")), body_bytes]
    if category == "versions":
        version = rng.choice([0, 2, -1, 99, 2**63 - 1, -(2**63), 2**64 - 1, "1", True, 1.0, None])
        kind = rng.choice([p.REQUEST, p.REQUEST, p.PING, p.NOTIFY])
        header = gen.header(kind, rng.choice(["session.list", method]), v=version)
        return category, [gen.pack(header), gen.pack({})]
    if category == "targets":
        target = rng.choice([*TARGETS, gen.text(10)])
        kind = rng.choice([p.REQUEST, p.REQUEST, p.NOTIFY])
        header = gen.header(kind, rng.choice(["session.list", "state.record.list", method]))
        header["t"] = target
        return category, [gen.pack(header), gen.pack(safe_body(gen, method))]
    if category == "grants":
        mutating = ["session.prompt", "session.stop", "session.forget", "session.rename"]
        method = rng.choice([*mutating, "session.key", "session.turn", "session.spawn"])
        header = gen.header(p.REQUEST, method)
        header["g"] = rng.choice(["g" + rng.randbytes(8).hex(), "", gen.text(10), "g" * 200])
        header["op"] = rng.choice(["op-" + gen.text(8), "o" * 128, "o" * 129, "x" * 5000, ""])
        header["s"] = rng.choice([{"generation": gen.scalar()}, {}, {"x": 1}, {"generation": 1}])
        body = safe_body(gen, method)
        body["id"] = rng.choice(["no-such-record", "r" + rng.randbytes(5).hex(), gen.scalar()])
        return category, [gen.pack(header), gen.pack(body)]
    if category == "initialize":
        body = {
            "versions": rng.choice([[1], [99], [], [True], ["1"], 1, None, [1, 2**64 - 1]]),
            "token": rng.choice(["wrong", "", None, 7, token + "x", token[:-1]]),
        }
        if rng.random() < 0.3:
            body = gen.body()
        return category, [gen.pack(gen.header(p.REQUEST, "initialize")), gen.pack(body)]
    if category == "hello":
        body = {"address": rng.choice(["node", "client/x", "", 5]), "token": gen.text(20)}
        return category, [gen.pack(gen.header(p.HELLO, "")), gen.pack(body)]
    # mutation: a valid request (or ping), its header or body changed at the byte level
    method, template = rng.choice(SAFE_TEMPLATES)
    kind = p.PING if rng.random() < 0.1 else p.REQUEST
    frames = [gen.pack(gen.header(kind, method)), gen.pack(template)]
    which = rng.randrange(2)
    data = bytearray(frames[which])
    for _ in range(rng.randint(1, 3)):
        action = rng.randrange(4)
        spot = rng.randrange(len(data) + 1)
        if action == 0 and data:
            data[min(spot, len(data) - 1)] = rng.randrange(256)
        elif action == 1:
            data[spot:spot] = rng.randbytes(rng.randint(1, 4))
        elif action == 2:
            del data[spot : spot + rng.randint(1, 4)]
        else:
            data = data[:spot]
    frames[which] = bytes(data)
    return category, frames


# -- the run -------------------------------------------------------------------------------------


class Watch(threading.Thread):
    """Fresh sockets ping and initialize (``probes``), or a normal client calls session.list
    (``bystander``), every ``every`` seconds, until stopped."""

    def __init__(self, node: Node, out: Outcome, *, probes: bool, every: float) -> None:
        super().__init__(daemon=True)
        self.node, self.out, self.probes, self.every = node, out, probes, every
        self.stop = threading.Event()
        self.ctx: zmq.Context[Any] = zmq.Context()

    def probe(self, router: str, token: str) -> None:
        sock: zmq.Socket[Any] = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(router)
        phase = self.out.phase
        try:
            start = time.monotonic()
            sock.send_multipart([p.Header(kind=p.PING).encode(), p.pack({})])
            if not sock.poll(int(PROBE_DEADLINE_S * 1000)):
                self.out.probe_failures.append(f"phase {phase}: no pong in time")
                return
            sock.recv_multipart()
            pinged = time.monotonic()
            init = p.Header(kind=p.REQUEST, rid="probe", method="initialize", target="broker")
            sock.send_multipart([init.encode(), p.pack({"versions": [1], "token": token})])
            if not sock.poll(int(PROBE_DEADLINE_S * 1000)):
                self.out.probe_failures.append(f"phase {phase}: no initialize reply in time")
                return
            reply = p.Header.decode(sock.recv_multipart()[0])
            if reply.kind != p.RESPONSE:
                self.out.probe_failures.append(f"phase {phase}: initialize refused")
            self.out.probes.append((phase, start, pinged - start, time.monotonic() - pinged))
        finally:
            sock.close(0)

    def call(self, client: Client) -> None:
        phase, start = self.out.phase, time.monotonic()
        try:
            client.call("session.list")
            code = "ok"
        except RoostError as err:
            code = err.code
        self.out.bystander.append((phase, time.monotonic() - start, code))

    def run(self) -> None:
        info = read_node_info(self.node.state_dir)
        token = read_token(self.node.state_dir)
        # 15 s: a starved bystander still fails, but a 2-core machine running three other test
        # workers beside the flood may take longer than 5 s to answer one (a CI run did: 5.01 s)
        client = Client(info.router, token, events=info.events, timeout=BYSTANDER_S, ctx=self.ctx)
        try:
            if not self.probes:
                client.initialize()
            while not self.stop.is_set():
                if self.probes:
                    self.probe(info.router, token)
                else:
                    self.call(client)
                self.stop.wait(self.every)
        finally:
            client.close()
            self.ctx.destroy(0)


def initialize(fs: FuzzSocket, gen: Gen, token: str, out: Outcome) -> None:
    header = gen.header(p.REQUEST, "initialize")
    frames = [gen.pack(header), p.pack({"versions": [1], "token": token})]
    assert fs.send(frames, model(frames, fs.authed, token))
    settle([fs], out, 5.0)
    assert not fs.outstanding(), f"{fs.name} was not initialized"
    fs.authed = True


def phase_a(sockets: list[FuzzSocket], big: FuzzSocket, gen: Gen, token: str, out: Outcome) -> None:
    rng = gen.rng
    start = time.monotonic()
    for count in range(PHASE_A_MESSAGES):
        if time.monotonic() - start > PHASE_A_S:
            out.sent["stopped early at"] = count
            break
        if count == HARD_AT:  # one frame over the hard limit: libzmq disconnects
            settle([big], out, 5.0)
            header = gen.pack(gen.header(p.REQUEST, "session.prompt"))
            big.sock.send_multipart([header, b"\x00" * (p.HARD_FRAME_LIMIT + 1)])
            out.sent["over-hard-limit"] += 1
            # it reconnects with the same routing id, so the broker still knows it as initialized
        if count == HARD_AT + 50:  # exactly the hard limit: frame-too-large
            frames = [gen.pack(gen.header(p.REQUEST, "x")), b"\x00" * p.HARD_FRAME_LIMIT]
            big.send(frames, model(frames, big.authed, token))
            out.sent["at-hard-limit"] += 1
        fs = rng.choice(sockets)
        category, frames = gen_message(gen, fs.authed, token)
        if fs.send(frames, model(frames, fs.authed, token)):
            out.sent[category] += 1
        else:
            out.sent["send-timeout"] += 1
        if fs.name.startswith("user") and not fs.authed:  # a failed initialize ended it
            good = [gen.pack(gen.header(p.REQUEST, "initialize"))]
            good.append(p.pack({"versions": [1], "token": token}))
            fs.send(good, model(good, fs.authed, token))
            out.sent["initialize again"] += 1
        drain(sockets, out)
        if sum(len(s.pending) for s in sockets) > WINDOW:
            settle(sockets, out, SETTLE_S / 2, below=WINDOW // 3)
        if sum(len(s.pending) for s in sockets) > WINDOW:  # a stall: note it, throw on
            out.unanswered.setdefault("A", []).extend(x for fs in sockets for x in fs.unanswered())
            for fs in sockets:
                fs.forget()
    # the socket that was disconnected reconnects by itself and is served again
    ping = [gen.pack(gen.header(p.PING, "")), p.pack({})]
    big.send(ping, model(ping, big.authed, token))
    settle(sockets, out, SETTLE_S / 2)
    out.unanswered.setdefault("A", []).extend(x for fs in sockets for x in fs.unanswered())
    out.disconnects = {fs.name: n for fs in sockets if (n := fs.disconnects())}
    for fs in sockets:
        fs.forget()


def phase_b(flooders: list[FuzzSocket], gen: Gen, token: str, out: Outcome) -> None:
    """A few thousand requests, as fast as the sockets take them (bounded by SNDTIMEO)."""
    deadline = time.monotonic() + FLOOD_S
    for i in range(FLOOD):
        if time.monotonic() > deadline:
            break
        for fs in flooders:
            method = "fuzz.flood" if i % 4 else "events.since"
            header = p.Header(kind=p.REQUEST, rid=f"flood:{fs.name}:{i}", method=method)
            body = {"after": 0, "limit": 1} if method == "events.since" else {}
            frames = [header.encode(), p.pack(body)]
            if fs.send(frames, model(frames, fs.authed, token)):
                out.flood_sent += 1
        if i % 250 == 249:
            drain(flooders, out)
    # every request must be answered; on a loaded machine (2 cores, the suite's other processes)
    # working through a few thousand takes longer than a phase A settle, so wait longer here
    settle(flooders, out, FLOOD_SETTLE_S)
    out.unanswered["B"] = [x for fs in flooders for x in fs.unanswered()]
    out.disconnects.update({fs.name: n for fs in flooders if (n := fs.disconnects())})


def read_log(state_dir: Path) -> list[dict[str, Any]]:
    lines = []
    for line in (state_dir / "logs" / "node.log").read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            lines.append({"event": "not-json", "line": line})
    return lines


def run_fuzz(node: Node) -> Outcome:
    out = Outcome()
    info = read_node_info(node.state_dir)
    token = read_token(node.state_dir)
    gen = Gen(random.Random(SEED))
    ctx: zmq.Context[Any] = zmq.Context()
    names = ["anon-0", "anon-1", "anon-2", "user-0", "user-1", "user-2", "big"]
    sockets = [FuzzSocket(ctx, info.router, name) for name in names]
    flooders = [FuzzSocket(ctx, info.router, f"flood-{i}") for i in range(FLOODERS)]
    out.routing_ids = [fs.routing_id for fs in (*sockets, *flooders)]
    watches = [
        Watch(node, out, probes=True, every=PROBE_EVERY_S),
        Watch(node, out, probes=False, every=0.1),
    ]
    try:
        for fs in sockets + flooders:
            if not fs.name.startswith("anon"):
                initialize(fs, gen, token, out)
        for watch in watches:
            watch.start()
        started = time.monotonic()
        phase_a(sockets, sockets[-1], gen, token, out)
        out.elapsed["A"] = time.monotonic() - started
        out.log_a = read_log(node.state_dir)
        out.phase = "B"
        started = time.monotonic()
        phase_b(flooders, gen, token, out)
        out.elapsed["B"] = time.monotonic() - started
        # a flood answered faster than one probe interval (0.4 s) would leave phase B unprobed
        wait_for(
            lambda: out.probe_failures or any(probe[0] == "B" for probe in out.probes),
            PROBE_EVERY_S + 2 * PROBE_DEADLINE_S + 5.0,
            "a probe in phase B",
        )
        out.phase = "after"
        started = time.monotonic()
        with node.client() as client:  # the node serves clients again (at once, if all is well)
            wait_for(lambda: ok(client), 15.0, "session.list to answer after the flood")
        out.recovery_s = time.monotonic() - started
    finally:
        for watch in watches:
            watch.stop.set()
        for watch in watches:
            watch.join(10.0)
        for fs in sockets + flooders:
            fs.close()
        ctx.destroy(0)
    out.log = read_log(node.state_dir)
    return out


def ok(client: Client) -> bool:
    try:
        client.call("session.list", timeout=2.0)
    except RoostError:
        return False
    return True


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Node, Outcome]]:
    node = Node(tmp_path_factory.mktemp("fuzz"))
    try:
        node.up()
        yield node, run_fuzz(node)
    finally:
        node.kill_all()


# -- the checks ----------------------------------------------------------------------------------


def test_the_fuzzer_threw_everything(fuzzed: tuple[Node, Outcome]) -> None:
    _, out = fuzzed
    assert out.sent.get("stopped early at", PHASE_A_MESSAGES) >= 500, out.sent
    for category in ("frames", "garbage", "wrong-types", "kinds", "methods", "huge-map", "deep"):
        assert out.sent[category] > 0, category
    for category in ("oversized", "versions", "targets", "grants", "initialize", "mutation"):
        assert out.sent[category] > 0, category
    assert out.sent["over-hard-limit"] == 1 and out.sent["at-hard-limit"] == 1
    assert out.flood_sent >= 2 * FLOOD, out.flood_sent
    thrown = out.sent.get("stopped early at", PHASE_A_MESSAGES)
    assert out.replies > thrown // 2, (out.replies, thrown)
    assert out.codes["not-initialized"] and out.codes["forbidden"] and out.codes["unknown-method"]
    assert out.codes["frame-too-large"] and out.codes["unsupported-version"]


def test_only_the_frame_over_the_hard_limit_costs_a_connection(
    fuzzed: tuple[Node, Outcome],
) -> None:
    """libzmq drops a frame over MAXMSGSIZE with the connection; the DEALER reconnects by itself
    (the pong it asked for afterwards came: phase A has nothing unanswered)."""
    _, out = fuzzed
    assert out.disconnects == {"big": 1}


def test_the_node_survives_and_answers_status(fuzzed: tuple[Node, Outcome]) -> None:
    node, _ = fuzzed
    proc = psutil.Process(node.pid())
    assert proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    status = node.run("node", "status")
    assert status["pid"] == node.pid()
    for child in ("state", "adapters"):
        actor = status["actors"][child]
        assert (actor["health"], actor["restarts"]) == ("running", 0), actor


def test_every_reply_matches_the_protocol(fuzzed: tuple[Node, Outcome]) -> None:
    """Known codes, no tracebacks, never `internal`, and each the answer the model expects."""
    _, out = fuzzed
    wrong = [entry for entry in out.wrong if entry.startswith("phase A")]
    assert not wrong, "\n".join(wrong[:20])


def test_every_message_of_phase_a_is_served(fuzzed: tuple[Node, Outcome]) -> None:
    """The broker never drops a request silently (section 2, Requests and replies), and at this
    pace the node serves every request itself: no `timeout`, `unavailable` or `unreachable`."""
    _, out = fuzzed
    assert not out.unanswered["A"], "\n".join(out.unanswered["A"][:20])
    degraded = [entry for entry in out.degraded if entry.startswith("phase A")]
    assert not degraded, "\n".join(degraded[:20])


def test_fresh_sockets_are_served_during_the_fuzz(fuzzed: tuple[Node, Outcome]) -> None:
    _, out = fuzzed
    assert not out.probe_failures, out.probe_failures
    for phase in ("A", "B"):
        assert any(probe[0] == phase for probe in out.probes), f"no probe in phase {phase}"
    slowest = max(max(ping, init) for _, _, ping, init in out.probes)
    assert slowest < PROBE_DEADLINE_S


def test_a_normal_client_works_after_the_fuzz(fuzzed: tuple[Node, Outcome], tmp_path: Path) -> None:
    node, _ = fuzzed
    with node.client() as client:
        before = client.call("events.since", {"after": 0, "limit": 1})["last_seq"]
        record = client.call("session.spawn", {"provider": "echo", "cwd": str(tmp_path)})["record"]
        assert record["state"] == "live", record
        wait_for(lambda: "echo-ready>" in (screen(client, record["id"]) or ""), 15.0, "the prompt")
        accepted = client.call("session.prompt", {"id": record["id"], "text": "after the storm"})
        assert accepted["accepted"] is True
        wait_for(
            lambda: "echo: after the storm" in (screen(client, record["id"]) or ""),
            15.0,
            "the echo",
        )
        events = client.call("events.since", {"after": before, "limit": 1000})["events"]
        seqs = [event["seq"] for event in events]
        assert seqs == list(range(before + 1, before + 1 + len(seqs))), seqs
        mine = [event["kind"] for event in events if event.get("record") == record["id"]]
        assert "record.created" in mine and "session.input" in mine, mine
        client.call("session.stop", {"id": record["id"], "grace_ms": 500})


def screen(client: Client, record_id: str) -> str | None:
    shown = client.call("session.show", {"id": record_id, "screen": True})
    return shown.get("screen")


def test_refused_is_logged_once_per_peer(fuzzed: tuple[Node, Outcome]) -> None:
    _, out = fuzzed
    per_peer = Counter(str(line.get("peer")) for line in out.log if line.get("event") == "refused")
    ours = {peer for peer in per_peer if any(peer.endswith(r.hex()) for r in out.routing_ids)}
    for peer, count in per_peer.items():
        assert count <= 2, f"{count} 'refused' lines for peer {peer}"
    assert len(ours) >= 6, f"the fuzzing sockets were refused without a warning: {per_peer}"
    assert sum(per_peer.values()) <= 3 * len(out.routing_ids), per_peer


def failures_in(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Errors, exceptions and what is not a structlog line (an asyncio traceback on stderr)."""
    return [
        line
        for line in log
        if line.get("level") in ("error", "critical")
        or "exception" in line
        or line.get("event") == "not-json"
    ]


def test_the_log_has_no_tracebacks_after_phase_a(fuzzed: tuple[Node, Outcome]) -> None:
    _, out = fuzzed
    assert not failures_in(out.log_a), failures_in(out.log_a)[:10]


def test_warnings_are_not_logged_per_message(fuzzed: tuple[Node, Outcome]) -> None:
    _, out = fuzzed
    per_source = Counter(
        (line.get("event"), line.get("peer") or line.get("sender"))
        for line in out.log
        if line.get("level") == "warning"
    )
    noisy = {source: n for source, n in per_source.items() if n > 2}
    assert not noisy, noisy


def test_a_flood_is_answered_and_does_not_disturb_others(fuzzed: tuple[Node, Outcome]) -> None:
    """Every request of the flood is answered: served, or refused with `unavailable` when the
    node's queue is full (load shed, retryable); a client calling meanwhile gets its answers in
    time, and service is normal at once afterwards."""
    _, out = fuzzed
    assert not out.unanswered["B"], f"{len(out.unanswered['B'])} of {out.flood_sent} unanswered"
    assert set(out.flood_codes) <= {"ok", "unknown-method", "unavailable"}, out.flood_codes
    assert not out.wrong, out.wrong[:10]
    disturbed = [entry for entry in out.bystander if entry[2] not in ("ok", "unavailable")]
    assert not disturbed, disturbed[:10]
    assert not failures_in(out.log), failures_in(out.log)[:10]
    assert out.recovery_s < 1.0
