"""One node per node id on a machine, and one runtime directory per state directory.

A daemon holds, for its whole life, an OS lock (``StateLock``: ``flock``) on
``<runtime base>/node-ids/<node id>.lock``; the runtime base (``locate.runtime_base``) is
``<XDG_RUNTIME_DIR or the temporary directory>/roost-<uid>``, whatever ``ROOST_RUNTIME_DIR`` says,
so every node of the user that sees the same file sees the same lock, a process of another PID
namespace included. A second daemon of that node id (a copy of the state directory brought up
beside the first, say) is refused ``node-id-conflict`` before it touches its database. The
kernel drops the lock when its process ends, however it ends (SIGKILL too), so a restart takes
it at once; the file itself stays (empty, 0600): a file no process holds is a free id. A hub
holds none (its id, ``hub``, is no node's: two hubs may run on one machine).

A daemon (or hub) also holds ``<runtime dir>/runtime.lock``: two state directories whose
runtime directory is the same (one ``ROOST_RUNTIME_DIR`` for both) would take each other's
sockets, so the second is refused ``node-running``.
"""

from __future__ import annotations

from pathlib import Path

from roost.actors.runtime.lock import StateLock
from roost.client.locate import private_dir, runtime_base
from roost.wire.errors import RoostError
from roost.wire.policy import check_node_id

IDS_DIR = "node-ids"
RUNTIME_LOCK = "runtime.lock"


def node_id_lock(node_id: str) -> Path:
    """The lock file of ``node_id`` (a valid node id: one file name, never a path)."""
    return private_dir(runtime_base() / IDS_DIR) / f"{check_node_id(node_id)}.lock"


def hold_node_id(node_id: str) -> StateLock:
    """Take ``node_id`` for this process's life, or raise ``node-id-conflict`` when a live
    process (another node's daemon) holds it; the message names the id, no path."""
    lock = StateLock(node_id_lock(node_id))
    if not lock.acquire():
        raise RoostError(
            "node-id-conflict",
            f"another node on this machine serves node id {node_id!r}: stop it first, or "
            "bring this state directory up as a new node (`roost node up --new-node-id ID`)",
            {"node_id": node_id},
        )
    return lock


def hold_runtime_dir(runtime: Path) -> StateLock:
    """Take the runtime directory for this process's life, or raise ``node-running`` when the
    node or hub of another state directory holds it."""
    lock = StateLock(runtime / RUNTIME_LOCK)
    if not lock.acquire():
        raise RoostError(
            "node-running",
            "a node or hub of another state directory serves this runtime directory (both "
            "have the same ROOST_RUNTIME_DIR): give each its own",
        )
    return lock
