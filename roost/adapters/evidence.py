"""Process evidence: what the supervisor samples of a session's process tree, for the adapters.

A sample names the agent process roost launched, the PTY's foreground process group and the
agent's descendants, each with pid, ppid, pgid, exe, cmdline and start time (from psutil, taken by
the supervisor). Adapters read samples; they never take them (they touch no processes).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    ppid: int
    pgid: int
    name: str
    exe: str
    cmdline: tuple[str, ...]
    start_time: float

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> ProcessInfo:
        return cls(
            pid=int(raw["pid"]),
            ppid=int(raw["ppid"]),
            pgid=int(raw["pgid"]),
            name=str(raw.get("name", "")),
            exe=str(raw.get("exe", "")),
            cmdline=tuple(str(a) for a in raw.get("cmdline") or ()),
            start_time=float(raw.get("start_time", 0.0)),
        )


@dataclass(frozen=True)
class Evidence:
    """One sample of a session's processes; ``agent`` is None once the launched process is gone."""

    agent: ProcessInfo | None
    foreground_pgid: int | None
    descendants: tuple[ProcessInfo, ...] = field(default_factory=tuple)
    taken: float = 0.0

    def to_wire(self) -> dict[str, Any]:
        wire = asdict(self)
        return wire

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> Evidence:
        agent = raw.get("agent")
        return cls(
            agent=ProcessInfo.from_wire(agent) if agent else None,
            foreground_pgid=raw.get("foreground_pgid"),
            descendants=tuple(ProcessInfo.from_wire(d) for d in raw.get("descendants") or ()),
            taken=float(raw.get("taken", 0.0)),
        )

    def foreground(self) -> ProcessInfo | None:
        """The process leading the PTY's foreground group, if it is one of ours."""
        for proc in (self.agent, *self.descendants):
            if proc is not None and proc.pid == self.foreground_pgid:
                return proc
        return None


SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "tcsh", "csh", "ash", "busybox"})


def stable_idle_shell(samples: list[Evidence]) -> bool:
    """Proof that the PTY holds an idle shell and nothing else: two samples with the same shell
    (same pid, same start time), the shell leading the foreground group, and no children."""
    if len(samples) < 2:
        return False
    first, last = samples[0], samples[-1]
    shells = []
    for sample in (first, last):
        fg = sample.foreground()
        if fg is None or fg.name not in SHELLS or fg.pid != fg.pgid:
            return False
        if any(d.ppid == fg.pid for d in sample.descendants):
            return False
        shells.append((fg.pid, fg.start_time))
    return shells[0] == shells[1]
