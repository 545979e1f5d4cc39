"""The supervisor's end of the signal channel (``roost.wire.signals``): a Unix datagram socket,
bound before the agent is launched and named in its environment, that takes exact signals from
what observes the CLI (its hooks, through ``roost signal``) and from the supervisor itself (codex's
OSC 9, read in the PTY's bytes: ``inject``).

Every signal, whatever its way in, passes ``Ordering.take``: one of another record or generation
(a CLI of an earlier launch, a hook still running from it) is dropped, and so is one whose
``seq`` is not above the last taken from the same source (a late or repeated delivery), and so is
one that names another provider session than this session's (``other_session``: a CLI the agent
itself started, which inherited the channel's environment). What a
taken signal does is the handler of its kind in ``handlers``; the supervisor registers its own
(``verdicts``), and another concern adds one the same way, e.g.
``channel.handlers["usage"] = on_usage`` for the token counts a ``usage`` signal carries. A kind
without a handler is taken and ignored.

Only this user's processes can send: the socket is ``0600`` in the node's private runtime
directory (``0700``), and on Linux each datagram's sender credentials (``SO_PASSCRED``) are
checked against this process's uid. The socket file is removed when the supervisor ends.
Receiving never blocks the loop: the socket is non-blocking and read on readiness.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from roost.wire import signals as ws
from roost.wire.messages import LaunchSpec

log = structlog.get_logger("roost.signals")

SUN_PATH_MAX = 107  # bytes of a socket path (sun_path is 108 with its NUL)
DROP_LOG_S = 10.0  # at most one log line per reason per this long (a noisy hook cannot flood it)
_CREDS = struct.Struct("3i")  # struct ucred: pid, uid, gid

Handler = Callable[[ws.Signal], None]
CLEARED = "clear"  # a ``session`` signal's ``how`` when the CLI started a new conversation


def other_session(sig: ws.Signal, identity: str | None) -> str | None:
    """The provider session ``sig`` names when it is not ``identity``, the session's own: a
    CLI the agent started (a ``claude -p`` a tool runs, a kimi with roost's integration) runs its
    hooks with the agent's environment, so they reach this channel. None: it is this session's,
    names none (codex's OSC 9, read on this session's own screen), or the session's id is not
    known yet (then a ``session`` signal may teach it: ``verdicts``). A ``session`` signal of
    a ``clear`` is the session's own CLI moving to a new conversation (claude's ``/clear`` gives
    it a new id, and its SessionStart says ``clear``): it passes, and moves the session's id."""
    found = sig["data"].get("provider_session")
    if identity is None or not isinstance(found, str) or not found or found == identity:
        return None
    if sig["kind"] == "session" and sig["data"].get("how") == CLEARED:
        return None
    return found


class Ordering:
    """Which signals are taken: those of this record and generation whose ``seq`` is above the
    last one taken from the same source. A pure rule, so tests call it directly."""

    def __init__(self, record: str, generation: int) -> None:
        self.record, self.generation = record, generation
        self.last: dict[str, int] = {}  # source -> the seq last taken from it

    def refusal(self, sig: ws.Signal) -> str | None:
        """Why ``sig`` is dropped (None: it is taken, and its seq is now the source's last)."""
        if sig["record"] != self.record:
            return "other-record"
        if sig["generation"] != self.generation:
            return "other-generation"
        last = self.last.get(sig["source"])
        if last is not None and sig["seq"] <= last:
            return "stale-seq"
        self.last[sig["source"]] = sig["seq"]
        return None


def socket_path(spec: LaunchSpec) -> Path | None:
    """Where this launch's channel is bound: the node's runtime directory (that of its ``ipc://``
    endpoint: short, private), else the session's directory; None when neither fits sun_path."""
    name = f"sig-{spec['record_id']}.{spec['generation']}"
    endpoint = spec["endpoint"]
    places = [Path(spec["session_dir"])]
    if endpoint.startswith("ipc://"):
        places.insert(0, Path(endpoint[len("ipc://") :]).parent)
    for place in places:
        path = place / name
        if len(os.fsencode(path)) <= SUN_PATH_MAX:
            return path
    return None


class SignalChannel:
    """The channel of one launch; ``open`` binds it, ``env`` names it for the agent."""

    def __init__(self, record: str, generation: int, path: Path | None) -> None:
        self.ordering = Ordering(record, generation)
        self.path = path
        self.handlers: dict[ws.SignalKind, Handler] = {}
        self.identity: Callable[[], str | None] = lambda: None  # the session's provider id
        self.taken = 0
        self.dropped: dict[str, int] = {}  # reason -> count
        self._logged: dict[str, float] = {}  # reason -> when it was last logged
        self._sock: socket.socket | None = None
        self._creds = False

    def open(self) -> bool:
        """Bind the socket (a stale one of a crashed supervisor of this launch is replaced);
        False, logged, where it cannot be: the session then runs on its screen alone."""
        if self.path is None or sys.platform == "win32":
            log.warning("signal-channel-off", reason="no socket path fits" if self.path else "os")
            return False
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.bind(str(self.path))
            os.chmod(self.path, 0o600)
            sock.setblocking(False)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 18)
            passcred = getattr(socket, "SO_PASSCRED", None)
            if passcred is not None:
                sock.setsockopt(socket.SOL_SOCKET, passcred, 1)
                self._creds = True
        except OSError as exc:
            sock.close()
            log.warning("signal-channel-off", reason=exc.strerror or str(exc))
            return False
        self._sock = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._readable)
        return True

    def env(self) -> dict[str, str]:
        """What the agent's environment gets (nothing when the channel is not open)."""
        if self._sock is None or self.path is None:
            return {}
        o = self.ordering
        return {
            ws.ENV_SOCKET: str(self.path),
            ws.ENV_RECORD: o.record,
            ws.ENV_GENERATION: str(o.generation),
        }

    def close(self) -> None:
        if self._sock is None:
            return
        with contextlib.suppress(RuntimeError, ValueError):  # the loop may be closing already
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
        self._sock.close()
        self._sock = None
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()

    def inject(self, sig: ws.Signal) -> None:
        """A signal of the supervisor's own (read in the PTY's bytes): the same rules apply."""
        self._deliver(sig)

    def _readable(self) -> None:
        assert self._sock is not None
        space = socket.CMSG_SPACE(_CREDS.size) if self._creds else 0
        for _ in range(64):  # a burst is read in one go, then the loop gets its turn back
            try:
                raw, ancillary, _, _ = self._sock.recvmsg(ws.MAX_DATAGRAM + 1, space)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._drop("recv-failed", errno=exc.errno)
                return
            if self._creds and not _same_user(ancillary):
                self._drop("other-user")
                continue
            try:
                sig = ws.decode(raw)
            except ValueError as err:
                self._drop("malformed", error=str(err))
                continue
            self._deliver(sig)

    def _deliver(self, sig: ws.Signal) -> None:
        foreign = other_session(sig, self.identity())
        if foreign is not None:  # before the ordering: it moves no source's seq
            self._drop("other-session", source=sig["source"], kind=sig["kind"], signalled=foreign)
            return
        reason = self.ordering.refusal(sig)
        if reason is not None:
            self._drop(
                reason,
                source=sig["source"],
                kind=sig["kind"],
                seq=sig["seq"],
                generation=sig["generation"],
            )
            return
        self.taken += 1
        log.debug("signal", source=sig["source"], kind=sig["kind"], provider_event=sig.get("event"))
        handler = self.handlers.get(sig["kind"])
        if handler is not None:
            handler(sig)

    def _drop(self, reason: str, **context: object) -> None:
        """Count it; log it at most once per ``DROP_LOG_S`` per reason."""
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        now = time.monotonic()
        if now - self._logged.get(reason, float("-inf")) >= DROP_LOG_S:
            self._logged[reason] = now
            log.info("signal-dropped", reason=reason, count=self.dropped[reason], **context)


def _same_user(ancillary: list[tuple[int, int, bytes]]) -> bool:
    """Whether the datagram's credentials name this process's uid (none given: refused)."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == getattr(socket, "SCM_CREDENTIALS", -1):
            _, uid, _ = _CREDS.unpack(data[: _CREDS.size])
            return bool(uid == os.getuid())
    return False
