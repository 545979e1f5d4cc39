"""roost's exactly-once promise as a model: what clients asked and were answered (the ledger), what
a node and its echo agents show (the evidence), and the checks between the two.

Shared by the stateful property test (tests/e2e/test_exactly_once.py) and the soak
(bench/soak.py). Neither trusts roost's own account alone: the event log (``events.since``) says
what was committed, and the echo agent's own files say what it received, so each claim is checked
against something roost did not write for the purpose.

- Every text sent carries a unique token (``T<who>.<n>.``), so where it went is exact: a pty
  prompt's or input's token in the ``session.input`` event that committed it, in the session's
  transcript (the terminal's echo of what was typed into the pty, and the agent's answer
  ``echo: <line>``) and in the agent's session file (one JSON line per line it read:
  ``providers/echo/sessions/<provider session>.jsonl``); a turn's token (``/tool echo <token>``)
  in its ``session.input``, in the transcript's ``> <text>`` line written when its process
  started, and in the session file's line the headless agent writes as the turn completes.
- Keys are ``enter``, ``tab`` and ``space`` only: each leaves a mark in the agent's lines (a line
  ends, a tab or a space inside it) and none edits the line or signals the agent (``interrupt``
  would flush the terminal's input queue, ``eof`` end the agent). A pty generation's committed
  inputs, in seq order, make one keystroke stream; its lines, split at each submit and without
  the blank ones the agent skips, are what the agent must have read.

What is promised (docs/PROTOCOL.md "Operation ids", ``session.prompt``, ``session.turn``, section 8
"A lost session"), and encoded here:

- an accepted input is committed once and typed once, in commit order; the inputs of a
  generation that is still live, and those committed before a ``session.stop`` began, are all
  typed; a generation whose supervisor died (``session.lost``) or whose agent exited may have
  typed only a prefix of what was committed (the rest was never typed: a pty input is not typed
  into the next generation);
- an accepted turn runs at most once, on its own record and generation, and ends exactly once;
  nothing of it follows its end; a turn of a generation still live ends ``completed`` (the echo
  agent never fails), one whose supervisor died ``interrupted`` (or as its spool says);
- a request that is refused leaves no trace; a repeated operation id runs nothing: it answers the
  first outcome (``duplicate: true``, the same seq or turn, the first record if it names one) or
  is refused, and a retry (same method, same record) of an operation that succeeded answers the
  first outcome rather than an error;
- the wrong mode (typed input to a ``stream`` record, a turn to a ``pty`` record) is refused
  ``bad-request`` with ``detail.field`` ``"mode"`` (``session-not-live`` or ``not-found`` when
  the record is not live) and never logged;
- the event log is contiguous: seqs 1, 2, 3, ... with no gap (nothing is trimmed at the default
  retention).
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from roost.client.client import Client
from roost.wire.errors import RoostError

TYPED = ("session.prompt", "session.input", "session.key")
TURN = "session.turn"
SENDS = (*TYPED, TURN)
MODE_OF = {m: "pty" for m in TYPED} | {TURN: "stream"}
KIND_OF = {"session.prompt": "prompt", "session.input": "input", "session.key": "key", TURN: "turn"}
KEY_TEXT = {"enter": "\r", "tab": "\t", "space": " "}  # what each key types (echo submits \r)
SAFE_KEYS = tuple(KEY_TEXT)
# Errors that do not say whether the request was carried out: it may have been committed (a
# timeout, a store that answered late) or not; the operation id tells, at the end.
IN_DOUBT = frozenset(
    {"timeout", "unavailable", "unreachable", "not-initialized", "internal", "unanswered"}
)
TOKEN_RE = re.compile(r"T\d+\.\d{6}\.")
TURN_MARK_RE = re.compile(r"> /tool echo (T\d+\.\d{6}\.)\r\n")
# Violations that a settled node may still be working off (typing, ending a turn): the final
# check polls while only these remain.
LIVENESS = frozenset(
    {
        "accepted-never-typed",
        "agent-line-missing",
        "turn-never-ended",
        "completed-turn-not-run",
        "op-still-accepted",
    }
)


def token(who: int, n: int) -> str:
    return f"T{who}.{n:06d}."


def text_for(method: str, tok: str) -> str:
    """The text a request of ``method`` carries its token in (a turn makes a tool call)."""
    return f"/tool echo {tok}" if method == TURN else tok


# -- the ledger --------------------------------------------------------------------------------


@dataclass
class Request:
    """One request a client sent with an operation id, and what it was answered."""

    who: int  # the client (its tokens are T<who>.<n>.)
    n: int  # its order among the client's requests
    method: str
    record: str  # the record id it named
    op: str
    token: str = ""  # prompt, input, turn
    keys: list[str] | None = None  # key
    name: str = ""  # rename
    live: bool | None = None  # the record was live when sent, as the sender knew (None: unknown)
    repeat: bool = False  # the sender had used the op id before
    sent: float = 0.0  # time.time() when sent, answered
    answered: float = 0.0
    reply: dict[str, Any] | None = None
    error: dict[str, Any] | None = None  # {"code", "detail"}

    @property
    def text(self) -> str:
        return text_for(self.method, self.token) if self.token else ""

    @property
    def code(self) -> str:
        return str((self.error or {}).get("code") or "")

    @property
    def outcome(self) -> str:
        """``accepted`` (carried out: a new input, turn or change), ``duplicate`` (answered with
        an earlier request's outcome), ``refused`` (an error that means nothing was done) or
        ``doubt`` (no telling yet)."""
        if self.reply is not None:
            return "duplicate" if self.reply.get("duplicate") else "accepted"
        return "doubt" if self.code in IN_DOUBT else "refused"

    def describe(self) -> str:
        what = self.token or (",".join(self.keys or []) if self.keys else self.name)
        answer = (
            f"dup of {self.reply.get('seq') or self.reply.get('turn')}"
            if self.outcome == "duplicate" and self.reply
            else (f"seq {self.reply.get('seq')}" if self.reply else self.code)
        )
        return (
            f"#{self.who}.{self.n} {self.method}({self.record} {what!r}) op={self.op} -> {answer}"
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str)

    @classmethod
    def from_json(cls, line: str) -> Request:
        return cls(**json.loads(line))


def trim(reply: dict[str, Any]) -> dict[str, Any]:
    """What the checks read of a reply (a record object becomes its id, state and name)."""
    kept: dict[str, Any] = {
        k: reply[k]
        for k in ("accepted", "seq", "seqs", "turn", "duplicate", "op", "generation", "status")
        if k in reply
    }
    rec = reply.get("record")
    if isinstance(rec, dict):
        kept["record"] = {k: rec.get(k) for k in ("id", "state", "name", "generation")}
    elif rec is not None:
        kept["record"] = rec
    if "op_recorded" in reply:
        kept["op_recorded"] = reply["op_recorded"]
    return kept


def send(client: Client, req: Request, *, timeout: float = 10.0) -> Request:
    """Send ``req`` (its body from its fields) with its op id; its answer is kept on it."""
    body: dict[str, Any] = {"id": req.record}
    if req.method in ("session.prompt", "session.input", TURN):
        body["text"] = req.text
    elif req.method == "session.key":
        body["keys"] = req.keys
    elif req.method == "session.rename":
        body["name"] = req.name
    elif req.method == "session.stop":
        body["grace_ms"] = 1000
    req.sent = time.time()
    try:
        req.reply = trim(client.call(req.method, body, op=req.op, timeout=timeout))
    except RoostError as err:
        req.error = {"code": err.code, "detail": err.detail or {}}
    req.answered = time.time()
    return req


# -- the evidence ------------------------------------------------------------------------------


@dataclass
class Evidence:
    """What the node and the agents show: the whole event log, each record's transcript and its
    echo agent's lines, and (at the end) the state of every operation id."""

    events: list[dict[str, Any]]
    first_seq: int = 1
    gap: bool = False
    transcripts: dict[str, str] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)  # transcripts whose oldest bytes are gone
    agent_lines: dict[str, list[str]] = field(default_factory=dict)
    lookups: dict[str, dict[str, Any]] = field(default_factory=dict)


def read_log(client: Client, timeout: float = 15.0) -> tuple[list[dict[str, Any]], int, bool]:
    """Every event of the node's log (``events.since`` from 0, every page), its first seq, gap."""
    events: list[dict[str, Any]] = []
    first, gap = 1, False
    for page in client.event_pages({"after": 0, "limit": 5000}, timeout=timeout):
        events.extend(page["events"])
        first, gap = int(page.get("first_seq") or 1), bool(page.get("gap"))
    return events, first, gap


def read_transcript(client: Client, rid: str) -> tuple[str, bool]:
    """A record's whole transcript (``session.transcript``, page by page), and whether its
    oldest bytes were dropped."""
    chunks, offset, dropped = [], 0, False
    while True:
        page = client.call("session.transcript", {"id": rid, "offset": offset, "limit": 1 << 18})
        dropped = dropped or bool(page["dropped"])
        data: bytes = page["data"]
        chunks.append(data)
        offset = int(page["offset"]) + len(data)
        if not data or offset >= int(page["end"]):
            return b"".join(chunks).decode("utf-8", "replace"), dropped


def agent_lines(state_dir: Path, provider_session: str) -> list[str]:
    """The lines the echo agent read (pty) or completed turns of (stream), from its own file."""
    path = state_dir / "providers" / "echo" / "sessions" / f"{provider_session}.jsonl"
    try:
        text = path.read_text()
    except OSError:
        return []
    lines = []
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):  # being written now
            break
        with contextlib.suppress(ValueError):
            lines.append(str(json.loads(line)["user"]))
    return lines


def collect(
    client: Client,
    state_dir: Path,
    *,
    snapshots: dict[str, str] | None = None,
    lookup_ops: Iterable[str] = (),
) -> Evidence:
    """The evidence now. The transcripts and agent files are read before the log, so whatever
    they show was committed before the log is read (input is committed before it is typed).
    ``snapshots``: the transcripts of records forgotten since (their files are gone)."""
    records = Log(read_log(client)[0])
    transcripts, dropped, lines = dict(snapshots or {}), set(), {}
    for rid in records.modes:
        if rid not in records.forgotten and rid not in transcripts:
            with contextlib.suppress(RoostError):
                transcripts[rid], gone = read_transcript(client, rid)
                if gone:
                    dropped.add(rid)
        if rid in records.sessions:
            lines[rid] = agent_lines(state_dir, records.sessions[rid])
    events, first, gap = read_log(client)
    lookups = {}
    for op in sorted(set(lookup_ops)):
        lookups[op] = client.call("operation.lookup", {"op": op})
    return Evidence(events, first, gap, transcripts, dropped, lines, lookups)


# -- what the log says -------------------------------------------------------------------------


@dataclass
class Generation:
    record: str
    generation: int
    stopping: int | None = None  # seq of its record.state -> stopping
    exited: int | None = None  # seq of its session.exited
    lost: int | None = None  # seq of its session.lost

    @property
    def live(self) -> bool:
        return self.exited is None and self.lost is None and self.stopping is None

    def must_type(self, seq: int) -> bool:
        """Whether the input committed at ``seq`` must have been typed by the end."""
        if self.lost is not None:
            return False
        if self.stopping is not None:
            return seq < self.stopping
        return self.exited is None


class Log:
    """The event log, read for the checks."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.by_seq = {e["seq"]: e for e in events}
        self.modes: dict[str, str] = {}
        self.sessions: dict[str, str] = {}
        self.forgotten: set[str] = set()
        self.inputs: list[dict[str, Any]] = []
        self.by_token: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        self.turns: dict[str, dict[str, Any]] = {}  # turn id -> its session.input
        self.turn_events: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        self.gens: dict[tuple[str, int], Generation] = {}
        for e in events:
            kind, rid, data = e["kind"], str(e.get("record") or ""), e.get("data") or {}
            if kind == "record.created":
                self.modes[rid] = data.get("mode", "pty")
            elif kind == "record.forgotten":
                self.forgotten.add(rid)
            elif kind == "session.identity" and data.get("provider_session"):
                self.sessions.setdefault(rid, data["provider_session"])
            elif kind == "session.input":
                self.inputs.append(e)
                for tok in set(TOKEN_RE.findall(str(data.get("text") or ""))):
                    self.by_token[tok].append(e)
                if data.get("input") == "turn" and isinstance(data.get("turn"), str):
                    self.turns.setdefault(data["turn"], e)
            elif isinstance(data.get("turn"), str) and kind.startswith("session."):
                self.turn_events[data["turn"]].append(e)
            if rid and isinstance(e.get("generation"), int):
                gen = self.gen(rid, e["generation"])
                if kind == "record.state" and data.get("to") == "stopping":
                    gen.stopping = gen.stopping or e["seq"]
                elif kind == "session.exited":
                    gen.exited = gen.exited or e["seq"]
                elif kind == "session.lost":
                    gen.lost = gen.lost or e["seq"]

    def gen(self, rid: str, generation: int) -> Generation:
        key = (rid, generation)
        if key not in self.gens:
            self.gens[key] = Generation(rid, generation)
        return self.gens[key]

    def generations(self, rid: str) -> list[Generation]:
        return sorted(
            (g for g in self.gens.values() if g.record == rid), key=lambda g: g.generation
        )

    def end_of(self, turn_id: str) -> dict[str, Any] | None:
        ends = [e for e in self.turn_events.get(turn_id, []) if e["kind"] == "session.turn"]
        return ends[0] if ends else None


def typed_stream(inputs: list[dict[str, Any]]) -> str:
    """The keystrokes of pty inputs (their events' data), in the order given."""
    out = []
    for e in inputs:
        data = e.get("data") or {}
        if data.get("input") == "prompt":
            out.append(str(data.get("text", "")) + "\r")
        elif data.get("input") == "input":
            out.append(str(data.get("text", "")))
        elif data.get("input") == "key":
            out.append("".join(KEY_TEXT.get(k, "?") for k in data.get("keys") or []))
    return "".join(out)


def lines_read(stream: str) -> list[str]:
    """The lines the echo agent records for a keystroke stream: each submitted, non-blank one."""
    return [line for line in stream.split("\r")[:-1] if line.strip()]


# -- the checks --------------------------------------------------------------------------------


@dataclass
class Violation:
    kind: str
    what: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.what}"


class Checker:
    """The checks of one moment: ``final`` once everything has settled (and the operation ids
    were looked up), else only what must hold at every moment (nothing twice, nothing refused,
    nothing on the wrong record or out of order)."""

    def __init__(self, ledger: list[Request], ev: Evidence, *, final: bool) -> None:
        self.ledger = sorted(ledger, key=lambda r: (r.sent, r.who, r.n))
        self.ev, self.final = ev, final
        self.log = Log(ev.events)
        self.out: list[Violation] = []
        self.resolved: dict[int, str] = {}  # id(request) -> its outcome, doubts resolved
        self.seq_of: dict[int, int] = {}  # id(request) -> the seq of its session.input
        self.turn_of: dict[int, str] = {}

    def bad(self, kind: str, what: str) -> None:
        self.out.append(Violation(kind, what))

    def run(self) -> list[Violation]:
        self.contiguous()
        self.resolve()
        self.logged_inputs()
        self.accepted_requests()
        self.operations()
        self.wrong_modes()
        self.turns()
        for rid, mode in self.log.modes.items():
            if mode == "pty":
                self.pty_evidence(rid)
            else:
                self.stream_evidence(rid)
        return self.out

    # -- the log itself

    def contiguous(self) -> None:
        seqs = [e["seq"] for e in self.ev.events]
        if self.ev.gap or self.ev.first_seq != 1:
            self.bad("log-gap", f"first_seq {self.ev.first_seq}, gap {self.ev.gap}")
        for a, b in itertools.pairwise(seqs):
            if b != a + 1:
                self.bad("log-gap", f"seq {b} follows {a}")
        if seqs and seqs[0] != 1:
            self.bad("log-gap", f"the log starts at seq {seqs[0]}")

    # -- outcomes

    def resolve(self) -> None:
        """Each request's outcome; a doubt is settled by its operation's stored outcome when the
        operation ids have been looked up (the final check), else left a doubt."""
        for r in self.ledger:
            out = r.outcome
            if out == "accepted" and r.reply is not None:
                if isinstance(r.reply.get("seq"), int):
                    self.seq_of[id(r)] = r.reply["seq"]
                if isinstance(r.reply.get("turn"), str):
                    self.turn_of[id(r)] = r.reply["turn"]
            self.resolved[id(r)] = out
        by_op: dict[str, list[Request]] = collections.defaultdict(list)
        for r in self.ledger:
            by_op[r.op].append(r)
        for op, looked in self.ev.lookups.items():
            doubts = [r for r in by_op.get(op, []) if self.resolved[id(r)] == "doubt"]
            if not doubts:
                continue
            if looked.get("state") == "unknown":
                for r in doubts:
                    self.resolved[id(r)] = "refused"
                continue
            if any(self.resolved[id(r)] == "accepted" for r in by_op[op]):
                for r in doubts:  # the op has its owner: these were answered by it, or refused
                    self.resolved[id(r)] = "refused"
                continue
            owner = self._owner_of_lookup(looked, doubts)
            for r in doubts:
                self.resolved[id(r)] = "accepted" if r is owner else "refused"

    def _owner_of_lookup(self, looked: dict[str, Any], doubts: list[Request]) -> Request | None:
        result = looked.get("result") or {}
        method, record = looked.get("method"), looked.get("record")
        if method in SENDS:
            seq = (result.get("seqs") or [None])[0] if method in TYPED else None
            turn = result.get("turn") if method == TURN else None
            if turn is not None and turn in self.log.turns:
                seq = self.log.turns[turn]["seq"]
            event = self.log.by_seq.get(seq) if isinstance(seq, int) else None
            if event is None:
                return None
            toks = set(TOKEN_RE.findall(str((event.get("data") or {}).get("text") or "")))
            for r in doubts:
                if r.method != method or r.record != event.get("record"):
                    continue
                if (r.token and r.token in toks) or (not r.token and r.method == "session.key"):
                    self.seq_of[id(r)] = event["seq"]
                    if turn is not None:
                        self.turn_of[id(r)] = turn
                    return r
            return None
        for r in doubts:
            if r.method == method and (record is None or r.record == record):
                return r
        return None

    def owners(self) -> dict[str, Request]:
        """Each operation id's owner: its first request carried out."""
        owners: dict[str, Request] = {}
        for r in self.ledger:
            if self.resolved[id(r)] == "accepted" and r.op not in owners:
                owners[r.op] = r
        return owners

    # -- the log against the ledger

    def logged_inputs(self) -> None:
        by_token: dict[str, list[Request]] = collections.defaultdict(list)
        for r in self.ledger:
            if r.token:
                by_token[r.token].append(r)
        key_seqs = {
            self.seq_of[id(r)]
            for r in self.ledger
            if r.method == "session.key" and id(r) in self.seq_of
        }
        key_doubts = sum(
            1 for r in self.ledger if r.method == "session.key" and self.resolved[id(r)] == "doubt"
        )
        unexplained_keys = []
        for e in self.log.inputs:
            rid, data = e["record"], e.get("data") or {}
            kind = data.get("input")
            mode = self.log.modes.get(rid)
            if mode is not None and (kind == "turn") != (mode == "stream"):
                self.bad(
                    "wrong-mode-logged", f"seq {e['seq']}: a {kind} input logged on {mode} {rid}"
                )
            toks = set(TOKEN_RE.findall(str(data.get("text") or "")))
            if kind == "key":
                if e["seq"] not in key_seqs:
                    unexplained_keys.append(e)
                continue
            for tok in toks:
                senders = by_token.get(tok, [])
                if not senders:
                    continue  # not one of this ledger's (another client's, or a fixture's)
                ok = [
                    r
                    for r in senders
                    if (self.resolved[id(r)] == "accepted" and self.seq_of.get(id(r)) == e["seq"])
                    or self.resolved[id(r)] == "doubt"
                ]
                if not ok:
                    self.bad(
                        "unaccepted-logged",
                        f"seq {e['seq']} on {rid} holds {tok}, sent only by "
                        + "; ".join(r.describe() for r in senders),
                    )
                elif all(r.record != rid for r in ok):
                    self.bad(
                        "logged-on-other-record",
                        f"seq {e['seq']}: {tok} logged on {rid}, sent to {ok[0].record}",
                    )
        for tok, events in self.log.by_token.items():
            if len(events) > 1:
                self.bad(
                    "logged-twice",
                    f"{tok} committed {len(events)} times: seqs {[e['seq'] for e in events]}",
                )
        if len(unexplained_keys) > key_doubts:
            self.bad(
                "unaccepted-logged",
                f"key inputs at seqs {[e['seq'] for e in unexplained_keys]} answer no accepted "
                f"key request ({key_doubts} in doubt)",
            )

    def accepted_requests(self) -> None:
        for r in self.ledger:
            if r.method not in SENDS or self.resolved[id(r)] != "accepted":
                continue
            seq = self.seq_of.get(id(r))
            event = self.log.by_seq.get(seq) if isinstance(seq, int) else None
            if event is None or event["kind"] != "session.input":
                self.bad("accepted-not-logged", f"{r.describe()}: no session.input at seq {seq}")
                continue
            data = event.get("data") or {}
            if event["record"] != r.record:
                self.bad(
                    "logged-on-other-record",
                    f"{r.describe()}: its seq {seq} is on {event['record']}",
                )
            other_text = bool(r.token) and r.token not in str(data.get("text") or "")
            other_keys = r.keys is not None and data.get("keys") != r.keys
            if data.get("input") != KIND_OF[r.method] or other_text or other_keys:
                self.bad("accepted-not-logged", f"{r.describe()}: seq {seq} holds {data}")
            if r.method == TURN and data.get("turn") != self.turn_of.get(id(r)):
                self.bad("accepted-not-logged", f"{r.describe()}: seq {seq} is turn {data}")

    # -- operation ids

    def operations(self) -> None:
        owners = self.owners()
        seen_ok: dict[str, Request] = {}
        for r in self.ledger:
            out = self.resolved[id(r)]
            owner = owners.get(r.op)
            if out == "accepted":
                first = seen_ok.setdefault(r.op, r)
                if first is not r:
                    self.bad(
                        "op-ran-twice",
                        f"op {r.op}: {first.describe()} and then {r.describe()} both carried out",
                    )
                continue
            if owner is None or owner.sent > r.sent:
                continue
            if out == "duplicate":
                self._duplicate(r, owner)
            elif (
                out == "refused"
                and r.code not in IN_DOUBT  # the retry met the outage too: the client repeats it
                and owner.method == r.method
                and owner.record == r.record
            ):
                self.bad(
                    "retry-refused",
                    f"{r.describe()}: a retry of {owner.describe()} was refused {r.code} "
                    f"{(r.error or {}).get('detail')} instead of answering the first outcome",
                )
        for op, looked in self.ev.lookups.items():
            owner = owners.get(op)
            state = looked.get("state")
            if owner is None:
                if state != "unknown" and any(x.op == op for x in self.ledger):
                    self.bad("op-stored-unanswered", f"op {op} is {state} yet none carried it out")
                continue
            if state == "unknown":
                if (owner.reply or {}).get("op_recorded") is not False:
                    self.bad("op-not-stored", f"{owner.describe()}: operation.lookup says unknown")
                continue
            if looked.get("method") != owner.method or looked.get("record") not in (
                owner.record,
                None,
            ):
                self.bad(
                    "lookup-mismatch",
                    f"{owner.describe()}: lookup says {looked.get('method')} on "
                    f"{looked.get('record')}",
                )
            result = looked.get("result") or {}
            if owner.method in TYPED and result.get("seqs") != [self.seq_of.get(id(owner))]:
                self.bad("lookup-mismatch", f"{owner.describe()}: lookup result {result}")
            if owner.method == TURN:
                turn = self.turn_of.get(id(owner))
                end = self.log.end_of(turn) if turn else None
                if result.get("turn") != turn:
                    self.bad("lookup-mismatch", f"{owner.describe()}: lookup result {result}")
                elif end is not None:
                    status = (end.get("data") or {}).get("status")
                    want = "interrupted" if status == "interrupted" else "terminal"
                    if state != want and self.final:
                        kind = "op-still-accepted" if state == "accepted" else "lookup-mismatch"
                        self.bad(kind, f"{owner.describe()}: turn {status}, its op {state}")

    def _duplicate(self, r: Request, owner: Request) -> None:
        reply = r.reply or {}
        op = reply.get("op") or {}
        if op.get("id") != r.op or op.get("method", owner.method) != owner.method:
            self.bad(
                "duplicate-wrong-outcome", f"{r.describe()}: op {op}; first {owner.describe()}"
            )
        named = reply.get("record")
        if op.get("record", owner.record) != owner.record and owner.method != "session.spawn":
            self.bad(
                "duplicate-names-other-record",
                f"{r.describe()}: op {op}; the op's first was {owner.describe()}",
            )
        if isinstance(named, str) and named != owner.record:
            self.bad(
                "duplicate-names-other-record",
                f"{r.describe()}: answers record {named}; the op's first was {owner.describe()}",
            )
        if owner.method in TYPED:
            if reply.get("seq") != self.seq_of.get(id(owner)):
                self.bad("duplicate-wrong-outcome", f"{r.describe()} is not {owner.describe()}")
        elif owner.method == TURN:
            if reply.get("turn") != self.turn_of.get(id(owner)):
                self.bad("duplicate-wrong-outcome", f"{r.describe()} is not {owner.describe()}")
        elif isinstance(named, dict):
            first = (owner.reply or {}).get("record")
            if isinstance(first, dict) and named.get("id") != first.get("id"):
                self.bad("duplicate-wrong-outcome", f"{r.describe()} is not {owner.describe()}")

    def wrong_modes(self) -> None:
        owners = self.owners()
        for r in self.ledger:
            mode = self.log.modes.get(r.record)
            if r.method not in SENDS or mode is None or MODE_OF[r.method] == mode:
                continue
            out = self.resolved[id(r)]
            detail = (r.error or {}).get("detail") or {}
            owner = owners.get(r.op)
            if out == "accepted":
                self.bad("wrong-mode-accepted", f"{r.describe()} on a {mode} record")
            elif out == "refused" and not (
                r.code == "bad-request" and detail.get("field") == "mode"
            ):
                repeat = owner is not None and owner.sent < r.sent
                if r.code in ("session-not-live", "not-found") and r.live is not True:
                    continue
                if r.code in IN_DOUBT:  # no answer at all (a node or store away): nothing was
                    continue  # accepted, which the log's check shows (never logged)
                if repeat and r.code != "bad-request":
                    continue
                self.bad(
                    "wrong-mode-refused-otherwise",
                    f"{r.describe()} on a {mode} record: {r.code} {detail}",
                )

    # -- turns

    def turns(self) -> None:
        log = self.log
        for tid, events in log.turn_events.items():
            start = log.turns.get(tid)
            if start is None:
                self.bad(
                    "turn-events-unknown-turn",
                    f"{[e['kind'] for e in events]} for turn {tid}, never begun",
                )
                continue
            end = log.end_of(tid)
            counts = collections.Counter(e["kind"] for e in events)
            for e in events:
                if e["record"] != start["record"] or e["generation"] != start["generation"]:
                    self.bad(
                        "turn-event-on-other-record",
                        f"seq {e['seq']} {e['kind']} of turn {tid} (of {start['record']} gen "
                        f"{start['generation']}) on {e['record']} gen {e['generation']}",
                    )
                if e["seq"] < start["seq"]:
                    self.bad("turn-event-before-start", f"seq {e['seq']} {e['kind']} of {tid}")
                if end is not None and e["seq"] > end["seq"]:
                    self.bad(
                        "turn-event-after-end",
                        f"seq {e['seq']} {e['kind']} of {tid} after its end at {end['seq']}",
                    )
            for kind in ("session.tool_call", "session.tool_result", "session.output"):
                if counts[kind] > 1:
                    self.bad("turn-event-twice", f"turn {tid}: {counts[kind]} {kind} events")
            if counts["session.turn"] > 1:
                self.bad("turn-ended-twice", f"turn {tid} ended {counts['session.turn']} times")
        for tid, start in log.turns.items():
            if log.modes.get(start["record"]) != "stream":
                if self.final and log.end_of(tid) is None:
                    self.bad("turn-never-ended", f"turn {tid} on pty {start['record']} never ran")
                continue
            end = log.end_of(tid)
            gen = log.gen(start["record"], start["generation"])
            if end is None:
                if self.final:
                    self.bad("turn-never-ended", f"turn {tid} of {start['record']} never ended")
                continue
            status = (end.get("data") or {}).get("status")
            if self.final and gen.live and status != "completed":
                self.bad(
                    "turn-not-completed",
                    f"turn {tid} of live {start['record']} ended {end.get('data')}",
                )
            if status == "completed":
                counts = collections.Counter(e["kind"] for e in log.turn_events[tid])
                for kind in ("session.tool_call", "session.tool_result", "session.output"):
                    if counts[kind] == 0:
                        self.bad("turn-events-missing", f"completed turn {tid}: {dict(counts)}")
                        break

    # -- what the agents received

    def pty_evidence(self, rid: str) -> None:
        log = self.log
        transcript = self.ev.transcripts.get(rid)
        lines = self.ev.agent_lines.get(rid, [])
        counts = collections.Counter(TOKEN_RE.findall(transcript or ""))
        in_lines = collections.Counter(t for line in lines for t in TOKEN_RE.findall(line))
        for tok in counts + in_lines:
            events = log.by_token.get(tok)
            if not events:
                self.bad("typed-not-accepted", f"{tok} reached {rid}'s agent, never committed")
                continue
            e = events[0]
            if e["record"] != rid or (e.get("data") or {}).get("input") not in ("prompt", "input"):
                self.bad(
                    "typed-on-other-record",
                    f"{tok} reached pty {rid}'s agent; committed as seq {e['seq']} on "
                    f"{e['record']} ({(e.get('data') or {}).get('input')})",
                )
        for tok, n in counts.items():
            if n > 2:
                self.bad("typed-twice", f"{tok} is {n} times in {rid}'s transcript (at most 2)")
        for tok, n in in_lines.items():
            if n > 1:
                self.bad("typed-twice", f"{tok} is in {n} lines the agent of {rid} read")
        mine = [
            e
            for e in log.inputs
            if e["record"] == rid
            and (e.get("data") or {}).get("input") in ("prompt", "input", "key")
        ]
        by_gen: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
        for e in mine:
            by_gen[e["generation"]].append(e)
        if transcript is not None and rid not in self.ev.dropped:
            self._typed_in_order(rid, transcript, by_gen, in_lines)
        self._lines(rid, lines, by_gen)

    def _typed_in_order(
        self,
        rid: str,
        transcript: str,
        inputs: dict[int, list[dict[str, Any]]],
        in_lines: collections.Counter[str],
    ) -> None:
        """Each generation's texts were typed in commit order, a prefix of them at least, and
        all of them where the generation must have typed everything."""
        first: dict[str, int] = {}
        for m in TOKEN_RE.finditer(transcript):
            first.setdefault(m.group(), m.start())
        last_pos, last_tok = -1, ""
        for gen in self.log.generations(rid):
            missing: str | None = None
            for e in inputs.get(gen.generation, []):
                toks = TOKEN_RE.findall(str((e.get("data") or {}).get("text") or ""))
                if not toks:
                    continue
                tok = toks[0]
                pos = first.get(tok, -1)
                typed = pos >= 0 or tok in in_lines
                if typed and missing is not None:
                    self.bad(
                        "typed-out-of-order",
                        f"{rid} gen {gen.generation}: {tok} (seq {e['seq']}) typed, the earlier "
                        f"{missing} not",
                    )
                if pos >= 0:
                    if pos < last_pos:
                        self.bad(
                            "typed-out-of-order",
                            f"{rid}: {tok} (seq {e['seq']}) typed before {last_tok}",
                        )
                    last_pos, last_tok = pos, tok
                if not typed:
                    missing = missing or tok
                    if self.final and gen.must_type(e["seq"]):
                        self.bad(
                            "accepted-never-typed",
                            f"{tok} (seq {e['seq']}, {rid} gen {gen.generation}) was not typed; "
                            f"the generation {self._ended(gen)}",
                        )

    @staticmethod
    def _ended(gen: Generation) -> str:
        if gen.lost is not None:
            return f"was lost at seq {gen.lost}"
        if gen.stopping is not None:
            return f"began stopping at seq {gen.stopping}"
        if gen.exited is not None:
            return f"exited at seq {gen.exited}"
        return "is live"

    def _lines(self, rid: str, actual: list[str], inputs: dict[int, list[dict[str, Any]]]) -> None:
        """The agent's lines: each generation's, a prefix of what it was sent, in order; all of
        them for a generation still live at the end. A line that fits nowhere is reported and
        passed over (so that one wrong line is one violation, not every line after it)."""
        gens = self.log.generations(rid)
        expected = [lines_read(typed_stream(inputs.get(g.generation, []))) for g in gens]
        g, k = 0, 0
        for i, line in enumerate(actual):
            if g < len(gens) and k < len(expected[g]) and line == expected[g][k]:
                k += 1
                continue
            later = [h for h in range(g + 1, len(gens)) if expected[h][:1] == [line]]
            if later:  # the next generation's first line: this one read what it read
                self._read_all(rid, gens[g], expected[g], k)
                g, k = later[0], 1
                continue
            want = expected[g][k] if g < len(gens) and k < len(expected[g]) else None
            self.bad(
                "agent-line-unexpected",
                f"{rid}'s agent read {line!r} (line {i + 1} of {len(actual)}), which no committed "
                f"input typed there, in that order (next expected {want!r})",
            )
        if g < len(gens):
            self._read_all(rid, gens[g], expected[g], k)
        for h in range(g + 1, len(gens)):
            self._read_all(rid, gens[h], expected[h], 0)

    def _read_all(self, rid: str, gen: Generation, expected: list[str], k: int) -> None:
        if self.final and gen.live and k < len(expected):
            self.bad(
                "agent-line-missing",
                f"{rid} gen {gen.generation}: the agent read {k} of {len(expected)} lines; "
                f"next expected {expected[k]!r}",
            )

    def stream_evidence(self, rid: str) -> None:
        log = self.log
        transcript = self.ev.transcripts.get(rid)
        lines = self.ev.agent_lines.get(rid, [])
        ran = collections.Counter(TURN_MARK_RE.findall(transcript or ""))
        everywhere = set(TOKEN_RE.findall(transcript or ""))
        for tok in everywhere | set(ran):
            events = log.by_token.get(tok)
            if not events:
                self.bad("ran-not-accepted", f"{tok} ran on {rid}, never committed")
            elif events[0]["record"] != rid or (events[0].get("data") or {}).get("input") != "turn":
                self.bad(
                    "ran-on-other-record",
                    f"{tok} ran on stream {rid}; committed as seq {events[0]['seq']} on "
                    f"{events[0]['record']} ({(events[0].get('data') or {}).get('input')})",
                )
        for tok, n in ran.items():
            if n > 1:
                self.bad("turn-ran-twice", f"{tok}'s process started {n} times on {rid}")
        mine = [t for t in log.turns.values() if t["record"] == rid]
        texts = [str((t.get("data") or {}).get("text")) for t in mine]
        where = collections.defaultdict(list)
        for i, line in enumerate(lines):
            where[line].append(i)
        for i, line in enumerate(lines):
            if line not in texts:
                self.bad(
                    "agent-line-unexpected",
                    f"{rid}'s agent completed {line!r} (line {i + 1} of {len(lines)}), which no "
                    "turn committed there",
                )
        last = -1
        judged = transcript is not None and rid not in self.ev.dropped
        for t, text in zip(mine, texts, strict=True):
            end = log.end_of((t.get("data") or {})["turn"])
            completed = end is not None and (end.get("data") or {}).get("status") == "completed"
            seen = where.get(text, [])
            if len(seen) > 1:
                self.bad("turn-ran-twice", f"{text!r} is in {len(seen)} lines of {rid}'s agent")
            if seen:
                if seen[0] < last:
                    self.bad("turn-out-of-order", f"{text!r} completed on {rid} out of order")
                last = seen[0]
            elif completed and self.final:
                self.bad("completed-turn-not-run", f"{text!r} completed on {rid}; not in its agent")
            tok = (TOKEN_RE.findall(text) or [""])[0]
            if completed and self.final and judged and ran[tok] != 1:
                self.bad("completed-turn-not-run", f"{text!r} completed; ran {ran[tok]} times")


def check(ledger: list[Request], ev: Evidence, *, final: bool) -> list[Violation]:
    return Checker(ledger, ev, final=final).run()


# -- settling at the end -------------------------------------------------------------------------


def quiet(client: Client) -> bool:
    """The node holds nothing it accepted and has not passed on: no request being accepted, no
    lost session being settled, no commit or hand-over of its own under way."""
    try:
        status = client.call("node.status", timeout=10)
    except RoostError:
        return False
    inputs = status.get("inputs") or {}
    return (
        status.get("accepting") == 0
        and status.get("cleaning") == 0
        and inputs.get("committing", 0) == 0
        and inputs.get("handing_over", 0) == 0
    )


def final_check(
    client: Client,
    state_dir: Path,
    ledger: list[Request],
    *,
    snapshots: dict[str, str] | None = None,
    timeout: float = 30.0,
    lookup_ops: set[str] | None = None,
    log: Callable[[str], None] = lambda s: None,
) -> tuple[list[Violation], Evidence]:
    """Settle, then check everything: wait (with a deadline) for the node to be quiet and every
    live stream record's last turn to end, then look the operation ids up (``lookup_ops``, by
    default every one of the ledger) and check; while the only violations are ones a node still
    working would clear (an input not typed yet), look again until the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not quiet(client):
        time.sleep(0.1)  # polling interval of a condition with a deadline
    for rec in client.call("session.list")["records"]:
        if rec.get("mode") == "stream" and rec.get("state") in ("live", "attention"):
            with contextlib.suppress(RoostError):
                left = max(0.0, deadline - time.monotonic())
                client.call(
                    "session.turn.wait",
                    {"id": rec["id"], "timeout_ms": int(left * 1000)},
                    timeout=left + 5,
                )
    ops = {r.op for r in ledger} if lookup_ops is None else lookup_ops
    while True:
        ev = collect(client, state_dir, snapshots=snapshots, lookup_ops=ops)
        found = check(ledger, ev, final=True)
        if not found or any(v.kind not in LIVENESS for v in found):
            return found, ev
        if time.monotonic() > deadline:
            return found, ev
        log(f"settling: {len(found)} liveness violations left, e.g. {found[0]}")
        time.sleep(0.25)  # polling interval of a condition with a deadline


def summary(found: list[Violation], limit: int = 25) -> str:
    kinds = collections.Counter(v.kind for v in found)
    head = ", ".join(f"{k} x{n}" for k, n in kinds.most_common())
    body = "\n".join(f"  {v}" for v in found[:limit])
    more = f"\n  ... and {len(found) - limit} more" if len(found) > limit else ""
    return f"{len(found)} violations ({head}):\n{body}{more}"
