"""Claims: a client's exclusive control of a session, by grant with a lease.

While a live grant exists for a record, mutating requests must carry it (else ``not-claimed``);
a taken-over or lapsed grant is fenced (``stale-grant``). Reading never needs a claim. The node
itself can be claimed the same way (``NODE``, the node-wide controller lease): then
node-wide mutations (spawning, workspaces, shutdown) need that grant. Pure logic with an injected
clock; grants live in the node's memory, so a node restart releases them all.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from roost.wire.errors import RoostError

NODE = "node"  # the key of the node-wide controller lease (no record id looks like it)
DEFAULT_LEASE_MS = 30_000
MAX_LEASE_MS = 24 * 3600 * 1000
RETIRED_KEPT = 10_000


@dataclass
class Grant:
    grant_id: str
    record_id: str
    generation: int
    holder: str
    expires: float

    def public(self, now: float) -> dict[str, Any]:
        """What another client may see: who holds it and for how long, never the grant id."""
        node = self.record_id == NODE
        return {
            "scope": NODE if node else "record",
            "record": None if node else self.record_id,
            "generation": self.generation,
            "holder": self.holder,
            "expires_in_ms": max(0, int((self.expires - now) * 1000)),
        }

    def to_wire(self, now: float) -> dict[str, Any]:
        return {"grant": self.grant_id, **self.public(now)}


def _stale(grant_id: str, why: str) -> RoostError:
    return RoostError(
        "stale-grant", f"the grant is no longer valid ({why})", {"grant": grant_id, "reason": why}
    )


def _what(key: str) -> str:
    return "the node" if key == NODE else f"record {key}"


class Claims:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._live: dict[str, Grant] = {}
        self._retired: OrderedDict[str, str] = OrderedDict()  # grant id -> why

    def _current(self, record_id: str) -> Grant | None:
        grant = self._live.get(record_id)
        if grant is not None and grant.expires <= self._clock():
            self._retire(grant, "lapsed")
            return None
        return grant

    def _retire(self, grant: Grant, why: str) -> None:
        self._live.pop(grant.record_id, None)
        self._retired[grant.grant_id] = why
        while len(self._retired) > RETIRED_KEPT:
            self._retired.popitem(last=False)

    def claim(
        self,
        record_id: str,
        generation: int,
        holder: str,
        *,
        lease_ms: int,
        take_over: bool = False,
        renew: str = "",
    ) -> Grant:
        current = self._current(record_id)
        lease = min(max(lease_ms, 100), MAX_LEASE_MS) / 1000
        if renew:
            self.check(record_id, renew)
            assert current is not None
            current.expires = self._clock() + lease
            return current
        if current is not None:
            if not take_over:
                raise RoostError(
                    "not-claimed",
                    f"{_what(record_id)} is claimed by another client",
                    current.public(self._clock()),
                )
            self._retire(current, "taken over")
        grant = Grant(
            "g" + secrets.token_hex(8), record_id, generation, holder, self._clock() + lease
        )
        self._live[record_id] = grant
        return grant

    def check(self, record_id: str, grant_id: str) -> None:
        """Refuse a mutating request that the claims forbid."""
        current = self._current(record_id)
        if grant_id:
            if current is None or current.grant_id != grant_id:
                raise _stale(grant_id, self._retired.get(grant_id, "not a grant of this record"))
            return
        if current is not None:
            raise RoostError(
                "not-claimed",
                f"{_what(record_id)} is claimed by another client",
                current.public(self._clock()),
            )

    def check_retired(self, grant_id: str) -> None:
        """A grant that has ended is refused whatever the request names, also a record that is
        no longer there (a forgotten one): the claims are checked before anything else."""
        why = self._retired.get(grant_id)
        if why is not None:
            raise _stale(grant_id, why)

    def release(self, record_id: str, grant_id: str) -> None:
        self.check(record_id, grant_id)
        current = self._current(record_id)
        if current is not None:
            self._retire(current, "released")

    def forget(self, record_id: str) -> None:
        current = self._live.get(record_id)
        if current is not None:
            self._retire(current, "record forgotten")

    def get(self, record_id: str) -> dict[str, Any] | None:
        current = self._current(record_id)
        return current.to_wire(self._clock()) if current else None
