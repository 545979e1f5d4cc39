"""What a broker lets its peers address: the rules that differ between a node and a hub.

A node's broker serves clients that address the node actor (``node``). A hub's broker serves
clients that address the hub actor (``hub``) or a node's node actor across the
lab, ``<node-id>/node`` (across nodes an address is prefixed with the node
id), which the node's link registers with its CURVE key instead of the actor secret: the key must
be authorised with the role ``node`` under that node id as its name. A node's events reach hub
clients under ``<node-id>/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from roost.wire.errors import RoostError

NODE_ROLE = "node"  # a CURVE key of a node dialling a hub
HUB = "hub"
AUTO = "auto"  # --node auto: the hub places the session (hub.place); no node is called so
NODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_node_id(node_id: str) -> str:
    """A node id that can prefix addresses and topics: 1-64 of A-Z a-z 0-9 . _ -, not "hub" nor
    "auto"."""
    if not NODE_ID.match(node_id) or node_id in (HUB, AUTO):
        raise RoostError(
            "bad-request",
            "a node id is 1 to 64 letters, digits, '.', '_' or '-' (and not 'hub' or 'auto')",
            {"field": "node-id"},
        )
    return node_id


def node_address(node_id: str) -> str:
    """The address of a node's node actor across a lab."""
    return f"{node_id}/node"


def node_of(address: str) -> str | None:
    """The node id in a lab address ``<node-id>/node``, or None for any other address."""
    node_id, sep, rest = address.partition("/")
    valid = sep and rest == "node" and NODE_ID.match(node_id) and node_id != HUB
    return node_id if valid else None


@dataclass(frozen=True)
class Policy:
    hub: bool = False

    @property
    def default_target(self) -> str:
        return HUB if self.hub else "node"

    def client_may_address(self, target: str) -> bool:
        if target in ("", self.default_target):
            return True
        return self.hub and node_of(target) is not None

    def link_address(self, role: str | None, name: str | None) -> str | None:
        """The one address a CURVE key may register as without the actor secret (a node's link
        on a hub), or None."""
        if self.hub and role == NODE_ROLE and name and NODE_ID.match(name) and name != HUB:
            return node_address(name)
        return None

    def conflict(self, address: str) -> RoostError:
        """The refusal of a hello for an address a live peer of another process holds."""
        node_id = node_of(address) if self.hub else None
        what = (
            f"node id {node_id!r} is linked already, from another node (a second node with "
            "this id, or a copy of its key); this one stays unlinked while that one is linked"
            if node_id
            else f"{address!r} is held by another live process, which keeps it"
        )
        return RoostError("node-id-conflict", what, {"address": address})
