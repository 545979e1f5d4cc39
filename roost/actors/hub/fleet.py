"""The hub's view of its fleet (``hub.fleet``) and where a new session goes (``hub.place``).

Each linked node is asked for its ``node.status`` with ``providers``: its roost version, its
records by state, its host's load and memory, and its last provider checks (installed, version,
login). A node that is not linked, does not answer, or answers with storage that is not healthy
or while it refuses new sessions is not healthy and takes no session. Among the healthy nodes
that have the provider installed and logged in (the built-in ones need no login; a provider the
config file defines has none to check), the least loaded is picked: the lowest sum of live
sessions per CPU, load average (1 min) per CPU and the fraction of memory in use; ties go to the
node id first in order. Every node's line says why it was or was not a candidate.
"""

from __future__ import annotations

from typing import Any

from roost.wire.errors import RoostError

ACTIVE = ("starting", "live", "stopping", "attention")
MIN_MEMORY_MB = 256  # a node with less memory available takes no new session


def row(known: dict[str, Any], status: dict[str, Any] | None, error: str | None) -> dict[str, Any]:
    """One node's line of ``hub.fleet``: what the hub knows of its link (``known``), and what
    the node said of itself (``status``), or the code of its failure to (``error``)."""
    line: dict[str, Any] = {**known, "answered": status is not None}
    if status is None:
        line.update(healthy=False, problem=error or "unreachable")
        return line
    counts = status.get("records") or {}
    host = status.get("host") or {}
    line.update(
        roost=status.get("roost"),
        sessions={
            "live": sum(int(counts.get(s, 0)) for s in ACTIVE),
            "attention": int(counts.get("attention", 0)),
            "records": sum(int(n) for n in counts.values()),
        },
        host=host,
        providers=status.get("providers") or {},
    )
    problem = _problem(status, host)
    line.update(healthy=problem is None, problem=problem)
    return line


def _problem(status: dict[str, Any], host: dict[str, Any]) -> str | None:
    storage = status.get("storage") or {}
    if status.get("records") is None or storage.get("health") not in (None, "ok"):
        return f"storage {storage.get('health') or 'not answering'}"
    if status.get("accepting") is False:
        return "not accepting sessions (held by a claim or stopping)"
    available = (host.get("memory_mb") or {}).get("available")
    if isinstance(available, int) and available < MIN_MEMORY_MB:
        return f"{available} MB of memory available"
    return None


def candidate(line: dict[str, Any], provider: str) -> str | None:
    """Why ``line``'s node cannot take a session of ``provider`` (None: it can)."""
    if not line.get("linked", True):
        return "not linked (down)"
    if not line["healthy"]:
        return str(line["problem"])
    checked = line["providers"].get(provider)
    if checked is None:
        return f"{provider} is not a provider there"
    if checked.get("installed") is None:
        return f"{provider} {checked.get('problem') or 'not checked'}"
    if not checked["installed"]:
        return f"{provider} is not installed" + (
            f" ({checked['problem']})" if checked.get("problem") else ""
        )
    if checked.get("login") == "logged-out":
        return f"{provider} is not logged in"
    if checked.get("login") == "unknown":
        return f"cannot tell whether {provider} is logged in"
    return None


def load(line: dict[str, Any]) -> float:
    """The node's load as placement weighs it (lower is less loaded)."""
    host = line.get("host") or {}
    cpus = max(1, int(host.get("cpus") or 1))
    per_cpu = (host.get("load") or [0.0])[0] / cpus
    memory = host.get("memory_mb") or {}
    used = 1 - memory["available"] / memory["total"] if memory.get("total") else 0.0
    return float(line["sessions"]["live"] / cpus + per_cpu + used)


def describe(line: dict[str, Any]) -> str:
    host = line.get("host") or {}
    memory = host.get("memory_mb") or {}
    load_1 = (host.get("load") or [0.0])[0]
    return (
        f"{line['sessions']['live']} live sessions, load {load_1:g} on {host.get('cpus')} CPUs, "
        f"{memory.get('available')} MB of memory free"
    )


def place(lines: list[dict[str, Any]], provider: str) -> dict[str, Any]:
    """``hub.place``'s answer: ``node``, ``why`` and each node's
    line (``candidates``: ``node_id``, ``eligible``, ``why``, ``load`` where eligible)."""
    candidates = []
    for line in lines:
        why = candidate(line, provider)
        entry: dict[str, Any] = {"node_id": line["node_id"], "eligible": why is None}
        if why is None:
            entry.update(load=round(load(line), 3), why=describe(line))
        else:
            entry["why"] = why
        candidates.append(entry)
    eligible = sorted(
        (c for c in candidates if c["eligible"]), key=lambda c: (c["load"], c["node_id"])
    )
    if not eligible:
        reasons = "; ".join(f"{c['node_id']}: {c['why']}" for c in candidates) or "none linked"
        raise RoostError(
            "no-node-fits",
            f"no node can run {provider} now ({reasons})",
            {"provider": provider, "candidates": candidates},
        )
    best = eligible[0]
    others = len(eligible) - 1
    why = f"the least loaded of {len(eligible)} that can run {provider}: {best['why']}"
    if not others:
        why = f"the only node that can run {provider}: {best['why']}"
    return {"node": best["node_id"], "provider": provider, "why": why, "candidates": candidates}
