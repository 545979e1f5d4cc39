"""Stable error codes and the one exception type that carries them across the wire.

Every failure a client can see has a kebab-case code from ``CODES``. Messages are for humans;
they never contain tracebacks, tokens or host paths of the state files.
"""

from __future__ import annotations

import errno

# Not typing.TYPE_CHECKING: `roost ls` imports this module on its fast path, and typing costs
# ~4 ms of that start; mypy takes a module's own TYPE_CHECKING for the real one.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CODES: dict[str, str] = {
    "bad-request": "the request is malformed or a field has the wrong type",
    "frame-too-large": "a frame is larger than the protocol limit",
    "unsupported-version": "no protocol version in common with the client",
    "not-initialized": "the connection must call initialize first",
    "unauthorized": "the token or key was refused",
    "forbidden": "the connection's role may not do this",
    "unknown-method": "the target does not serve this method",
    "unreachable": "the target address is not registered with the broker",
    "unavailable": "the actor is restarting; retry shortly",
    "no-node-fits": "no node linked to the hub can run that provider now (each one's reason)",
    "node-id-conflict": "a live peer of another process already holds that address (node id)",
    "timeout": "the target did not answer in time",
    "internal": "an unexpected failure inside an actor; the node keeps serving",
    "not-found": "no record, workspace or operation by that id or name",
    "ambiguous-name": "the name matches more than one record; use the record id",
    "name-taken": "another record already has that name",
    "name-looks-like-id": "a name may not be or look like a record id (r and 10 hex digits)",
    "session-record-busy": "the record is live (or changing state); stop it first",
    "session-not-live": "the record has no live session to take this request",
    "resume-pending": "the resumed session is not verified yet; nothing was typed, retry shortly",
    "agent-not-reading": "the agent has not read what was typed before; nothing was typed",
    "line-too-long": "a line is longer than the agent's terminal takes; nothing was typed",
    "stale-generation": "the request names an older generation of the session",
    "no-provider-session": "the record has no provider session id to resume by",
    "provider-cannot-fork": "the provider's CLI has no fork of a conversation",
    "unknown-provider": "no adapter for that provider",
    "bad-cwd": "the working directory does not exist or is not a directory",
    "launch-failed": "the agent program could not be started",
    "provider-missing": "the provider's CLI is not installed, or its ROOST_*_BIN names nothing",
    "needs-attention": "the session waits for a human (login, trust, ...): never on the wire",
    "not-a-repository": "spawn --worktree needs a directory inside a git repository",
    "worktree-failed": "git could not make, read or remove the session's worktree",
    "worktree-dirty": "the worktree has uncommitted changes; nothing was removed",
    "no-worktree": "the record has no worktree",
    "node-running": "a node already serves this state directory",
    "node-not-running": "no node serves this state directory",
    "no-systemd": "this machine does not run systemd (no systemctl): install the unit by hand",
    "service-failed": "writing, reloading or enabling the systemd unit failed",
    "interrupted": "Ctrl-C stopped the CLI's wait; what it asked for goes on (never on the wire)",
    "no-user-manager": "no systemd user manager runs for this user: `roost node up` instead",
    "busy": "the node is accepting or cleaning up a turn; try again",
    "insecure-listen": "a non-loopback endpoint needs CURVE keys and authorised clients",
    "not-claimed": "another client holds a claim on this session",
    "stale-grant": "the claim grant was taken over or has lapsed",
    "durable-state-schema-unsupported": "the state database has a newer schema than this roost",
    "durable-state-conflict": "the state database belongs to another node id",
    "durable-state-path-semantics-unsupported": "the state database holds another OS's paths",
    "durable-state-damaged": "the state database is damaged; `roost node repair` salvages it",
    "storage-full": "the state directory's disk is full; nothing was committed; retry later",
    "storage-failed": "the state database could not be written (I/O error); retry later",
    "backup-exists": "the backup's destination already exists; `--force` replaces it",
    "config-invalid": "the configuration file has an unknown key or a value of the wrong type",
    "integration-damaged": "the CLI's config has a damaged block of roost's hooks; mend it by hand",
    "integration-failed": "the CLI's config cannot take roost's hooks; nothing was written",
}

# The state store answered but could not write (its disk is full or failing): nothing of the
# request was committed.
REFUSED = frozenset({"storage-full", "storage-failed"})
# Worth trying again, never a reason to drop what was accepted: the node or its state store is
# away, or its disk is full or failing.
TRANSIENT = frozenset({"unavailable", "unreachable", "timeout", "not-initialized"}) | REFUSED


class RoostError(Exception):
    """A failure with a stable ``code``; what a client receives as an ``error`` reply."""

    def __init__(self, code: str, message: str = "", detail: dict[str, Any] | None = None) -> None:
        if code not in CODES:
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(message or CODES[code])
        self.code = code
        self.message = message or CODES[code]
        self.detail: dict[str, Any] = detail or {}

    def to_body(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "detail": self.detail}

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> RoostError:
        code = body.get("code")
        if not isinstance(code, str) or code not in CODES:
            code = "internal"
        message = body.get("message")
        detail = body.get("detail")
        return cls(
            code,
            message if isinstance(message, str) else "",
            detail if isinstance(detail, dict) else None,
        )

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def write_refused(exc: OSError, message: str) -> RoostError:
    """A file write the disk refused, as the error a caller answers: ``storage-full`` for
    ENOSPC, ``storage-failed`` for any other I/O error, naming the errno."""
    code = "storage-full" if exc.errno == errno.ENOSPC else "storage-failed"
    return RoostError(code, message, {"errno": errno.errorcode.get(exc.errno or 0)})
