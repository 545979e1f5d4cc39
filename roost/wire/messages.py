"""The shapes of the maps roost's processes pass each other, as docs/PROTOCOL.md describes them.

Types for the checker: a map a ``TypedDict`` describes is a plain ``dict`` at run time, the same
map on the wire (``event`` builds one; nothing else here runs on a message's way). The closed sets
of strings are declared here once; the tuples the code tests membership with are derived from
them (``typing.get_args``), never written out a second time. Every package may import this
module: it imports nothing of roost.
"""

# No ``from __future__ import annotations`` here: a TypedDict's field types are then objects made
# once at import, rather than strings that typing compiles one by one (ForwardRef).
from typing import Any, Literal, NotRequired, TypedDict

# -- closed sets ---------------------------------------------------------------------------------

# A session record's state (PROTOCOL.md section 8, Records and states).
RecordState = Literal["starting", "live", "stopping", "dormant", "attention", "failed"]
# A session's mode: an interactive terminal, or headless turns.
Mode = Literal["pty", "stream"]
# What `node up` does with a record that was live when the machine went down (spawn --restore).
RestorePolicy = Literal["never", "resume"]
# What roost does when a pty session shows a usage limit (spawn --on-limit): report it only, or
# type the provider's continue prompt once the reset time the screen shows has passed.
OnLimit = Literal["wait", "continue"]
# An adapter's classification of a pty session's screen and processes.
ClassificationState = Literal["starting", "ready", "busy", "attention", "shell", "exited"]
# Why an adapter says a session needs a person.
AttentionReason = Literal[
    "login",
    "trust",
    "api-key",
    "permission",
    "picker",
    "rate-limit",
    "offline",
    "update",
    "question",
    "resume-unverified",
]
# Why the node leaves a session in attention: its supervisor speaks a wire this node does not serve.
WireReason = Literal["supervisor-outdated", "supervisor-newer"]
# An adapter's verdict on a resumed pty session.
ResumeOutcome = Literal["resumed", "attention_required", "retry_fresh", "resume_failed"]
# What became of one record of a restore (``record.restored``).
RestoreOutcome = Literal["resumed", "attention", "resume_failed", "skipped"]


# -- the node and its supervisors ----------------------------------------------------------------


class LaunchSpec(TypedDict):
    """What the node writes into a supervisor's spec file, and the supervisor runs."""

    record_id: str
    generation: int
    instance_id: str
    provider: str
    mode: Mode
    argv: list[str]
    cwd: str
    env: dict[str, str]
    rows: int
    cols: int
    submit: bytes
    submit_delay_s: float
    endpoint: str
    token: str
    session_dir: str
    provider_session: str | None
    data_dir: str
    resume: bool
    turn_silence_s: float | None
    turn_deadline_s: float | None
    name: str | None  # the record's name at launch, and the node's id: the process's title
    node_id: str
    # a fork's source provider session: the launch (or a stream record's first turn) copies that
    # conversation into a new one, verified as a resume is, and never takes the source's id
    fork: NotRequired[str | None]
    # the provider's OSC 9 notifications as signals: ``[pattern, kind, data]`` rules mapping a
    # notification's text to a signal kind (first match wins; none: no signal)
    osc9: NotRequired[list[list[Any]] | None]


class Active(TypedDict, total=False):
    """A record's ``active`` map: its current incarnation while a supervisor is believed to run.
    While ``starting``, before its supervisor attached, only ``record``, ``generation`` and
    ``instance``; after a re-attach it may carry more keys."""

    record: str
    generation: int
    instance: str
    pid: int | None
    agent_pid: int | None
    started: float | None
    supervisor: dict[str, Any] | None


class Worktree(TypedDict):
    """A record's ``worktree`` (spawn ``--worktree``): the repository, the worktree's directory,
    its branch and the commit it was branched from."""

    repo: str
    path: str
    branch: str
    base: str


class Event(TypedDict):
    """One event of the log, as its writer builds it (``state.events.append``); ``eid``: the
    writer's id for it (a repeat is appended once); the log adds ``seq`` and ``ts``."""

    kind: str
    record: NotRequired[str | None]  # absent in the node's own events (node.started)
    generation: NotRequired[int | None]
    data: NotRequired[dict[str, Any]]  # the store writes {} for one without
    eid: NotRequired[str]
    seq: NotRequired[int]
    ts: NotRequired[float]
    duplicate: NotRequired[bool]  # the store's append found its eid in the log: not written


def event(kind: str, record: str, generation: int, data: dict[str, Any]) -> Event:
    """An event of ``kind`` about ``record``'s ``generation``. ``data`` is kept as it is, not
    copied (a caller may add to it before the event is written)."""
    return {"kind": kind, "record": record, "generation": generation, "data": data}


class Restored(TypedDict):
    """One record's outcome in a restore, as ``record.restored`` carries it: why, for any but
    ``resumed`` (``reason``, or the ``error`` a launch failed with)."""

    outcome: RestoreOutcome
    reason: NotRequired[str | None]
    error: NotRequired[dict[str, Any]]


class AppendReply(TypedDict):
    """``state.events.append``'s answer: the events' sequence numbers, in order. ``repeated``:
    these events (by ``eid``) were appended before; ``duplicate``: the operation (``op``, as it
    was first stored) was applied before, and ``seqs`` are its first answer's."""

    seqs: list[int]
    repeated: NotRequired[bool]
    duplicate: NotRequired[bool]
    op: NotRequired[dict[str, Any]]


class OutboxEntry(TypedDict, total=False):
    """One entry of a supervisor's outbox (its spool on disk). ``t`` says which: ``events``
    (``events``), ``line`` (a stream turn's output line: ``turn``, ``stream``, ``line``, ``cut``),
    ``turn-end`` (``turn``, ``exit``, ``reason``) or ``report`` (a call to the node: ``method``,
    ``body``). ``n`` (its number) and ``i`` (the spooling instance) are stamped by the outbox."""

    t: Literal["events", "line", "turn-end", "report"]
    n: int
    i: str
    record: str
    generation: int
    events: list[dict[str, Any]]  # as the adapter or the supervisor wrote them: the deliverer
    # stamps each with the entry's record and generation, and an eid
    turn: str
    stream: str
    line: str
    cut: bool
    exit: int | None
    reason: str | None
    method: str
    body: dict[str, Any]


class TurnPlan(TypedDict, total=False):
    """An adapter's plan for a process (``adapter.launch``, ``adapter.turn``; PROTOCOL.md section
    9): its ``argv`` and the environment it adds; ``text_arg``: the index in ``argv`` that takes a
    turn's text, in a plan asked for any text; ``submit``, ``submit_delay_s`` and the turn
    deadlines only in ``adapter.launch``'s."""

    argv: list[str]
    env: dict[str, str]
    text_arg: int | None
    provider_session: str | None
    submit: bytes
    submit_delay_s: float
    turn_silence_s: float | None
    turn_deadline_s: float | None
    osc9: list[list[Any]] | None
    files: dict[str, str]  # name -> text, written into the record's session directory first
