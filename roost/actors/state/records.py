"""Session records: the durable truth about a session, and the rules for changing them.

Plain data and plain functions: the node actor asks these what a request may do; the state store
persists the result. Nothing here touches sockets, processes or files.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, field
from typing import Any, get_args

from roost.providers import MODES as MODES
from roost.providers import NEVER as NEVER
from roost.providers import RESTORE_POLICIES as RESTORE_POLICIES
from roost.providers import RESUME as RESUME
from roost.wire.errors import RoostError
from roost.wire.messages import (
    Active,
    ClassificationState,
    Mode,
    OnLimit,
    RecordState,
    RestorePolicy,
    Worktree,
)

STATES: tuple[RecordState, ...] = get_args(RecordState)
STARTING, LIVE, STOPPING, DORMANT, ATTENTION, FAILED = STATES
# States in which a supervisor process may exist for the record.
ACTIVE_STATES = frozenset({STARTING, LIVE, STOPPING, ATTENTION})


def new_record_id() -> str:
    return "r" + secrets.token_hex(5)


@dataclass
class Record:
    """One row of the ``records`` table, as the node and clients see it."""

    id: str
    name: str | None
    provider: str
    mode: Mode
    cwd: str
    workspace_id: str | None = None
    state: RecordState = STARTING
    generation: int = 0
    provider_session: str | None = None
    active: Active | None = None
    activity: ClassificationState | None = None
    attention: str | None = None
    last_exit: dict[str, Any] | None = None
    restore_policy: RestorePolicy = NEVER
    on_limit: OnLimit = "wait"  # spawn --on-limit
    reset_at: float | None = None  # when the usage limit it is in attention for resets
    worktree: Worktree | None = None  # spawn --worktree
    env: dict[str, str] = field(default_factory=dict)
    owner: str | None = None  # the scoped token it was spawned under (and its forks), if any
    rows: int = 40
    cols: int = 120
    created: float = 0.0
    updated: float = 0.0

    def to_wire(self) -> dict[str, Any]:
        """What clients receive: everything but the env values (they may hold secrets)."""
        wire = asdict(self)
        wire["env"] = sorted(self.env)
        wire["size"] = {"rows": self.rows, "cols": self.cols}
        return wire

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Record:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in row.items() if k in known})


def session_address(record: Record) -> str:
    return f"session/{record.id}"


def check_resume(record: Record) -> None:
    """Refuse a resume the record cannot take, with the code a client acts on."""
    if record.state in ACTIVE_STATES:
        raise RoostError(
            "session-record-busy",
            f"record {record.id} is {record.state}",
            {"record": record.id, "state": record.state},
        )
    if not record.provider_session:
        raise RoostError(
            "no-provider-session",
            f"record {record.id} has no provider session id; it cannot be resumed "
            "by id, and roost will not start a fresh conversation in its place",
            {"record": record.id},
        )


def check_forget(record: Record) -> None:
    if record.state in ACTIVE_STATES:
        raise RoostError(
            "session-record-busy",
            f"record {record.id} is {record.state}; stop it before forgetting it",
            {"record": record.id, "state": record.state},
        )


def check_live(record: Record) -> Active:
    """The active session address of a record that can take runtime requests."""
    if record.state not in (LIVE, ATTENTION) or record.active is None:
        raise RoostError(
            "session-not-live",
            f"record {record.id} is {record.state}",
            {"record": record.id, "state": record.state},
        )
    return record.active


def check_generation(record: Record, session: dict[str, Any] | None) -> None:
    """Fencing: a request naming an older generation never reaches a newer process."""
    if not session or "generation" not in session:
        return
    if session["generation"] != record.generation:
        raise RoostError(
            "stale-generation",
            f"generation {session['generation']} is not the current one ({record.generation})",
            {"record": record.id, "generation": record.generation},
        )


def looks_like_id(name: str) -> bool:
    """``r`` and 10 hex digits, in any case: the form of a record id (``new_record_id``)."""
    return len(name) == 11 and name[0] in "rR" and all(c in HEX for c in name[1:])


HEX = frozenset("0123456789abcdefABCDEF")


def validate_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > 128 or not name.isprintable():
        raise RoostError(
            "bad-request", "a name is 1 to 128 printable characters", {"field": "name"}
        )
    if looks_like_id(name):  # ids are looked up first: the name would hide, or be hidden
        raise RoostError(
            "name-looks-like-id",
            f"the name {name!r} looks like a record id (r and 10 hex digits): a record named so"
            " could be reached only by its own id; choose another name",
            {"field": "name", "name": name},
        )
    return name
