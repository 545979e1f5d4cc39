"""Who a message is from: the broker's checks of tokens, CURVE keys and protocol versions.

Tokens are compared in constant time. A CURVE key is looked up again for every message (the
authorised keys are re-read only when their file changed), so a revoke or a new role takes
effect on connections already open. On a hub, a key with the role ``node`` proves a node's link
instead of the actor secret (``policy.link_address``).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

from roost.client.keys import AllowedKeys
from roost.client.scoped import ScopedTokens
from roost.wire import protocol as p
from roost.wire.errors import RoostError
from roost.wire.policy import NODE_ROLE, Policy


def token_ok(offered: Any, secret: str) -> bool:
    return isinstance(offered, str) and hmac.compare_digest(offered.encode(), secret.encode())


def negotiate(versions: Any) -> int:
    """The highest protocol version both sides speak, from ``initialize``'s ``versions``."""
    if not isinstance(versions, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in versions
    ):
        raise RoostError(
            "bad-request", "field 'versions' must be a list of integers", {"field": "versions"}
        )
    common = sorted(set(versions) & set(p.SUPPORTED_VERSIONS))
    if not common:
        raise RoostError(
            "unsupported-version",
            "no protocol version in common",
            {"supported": list(p.SUPPORTED_VERSIONS)},
        )
    return int(common[-1])


@dataclass
class Gate:
    token: str
    actor_token: str
    observer_token: str
    policy: Policy
    keys: AllowedKeys | None = None  # the authorised CURVE keys of a network endpoint
    scoped: ScopedTokens | None = None  # a node's scoped tokens (roost token new)

    def key_role(self, key: str | None) -> str | None:
        return self.keys.role(key) if key and self.keys is not None else None

    def link_address(self, key: str | None) -> str | None:
        """The address a node's key may register as on a hub, or None (then: the secret)."""
        if not key or self.keys is None:
            return None
        return self.policy.link_address(self.keys.role(key), self.keys.name(key))

    def hello(self, offered: Any, key: str | None, address: Any) -> bool:
        """Admit an actor's hello; True when it is a node's link (by key, on a hub)."""
        link = self.link_address(key)
        if link is not None:
            if address != link:
                raise RoostError("forbidden", f"this key may register only as {link!r}")
            return True
        if not token_ok(offered, self.actor_token):
            raise RoostError("unauthorized", "hello refused")
        return False

    def client_role(self, offered: Any, key: str | None) -> str:
        """The role ``initialize`` grants: the CURVE key's, else the token's."""
        return self.client(offered, key)[0]

    def client(self, offered: Any, key: str | None) -> tuple[str, str | None]:
        """The role ``initialize`` grants (the CURVE key's, else the token's) and, for a scoped
        token, its id (the node's scope on every request of the connection)."""
        role = self.key_role(key)  # allowed by ZAP, so it has a role
        if role == NODE_ROLE:
            raise RoostError("unauthorized", "a node's key registers with hello, not initialize")
        if role:
            return role, None
        if token_ok(offered, self.token):
            return p.OPERATOR, None
        if self.observer_token and token_ok(offered, self.observer_token):
            return p.OBSERVER, None
        scoped = self.scoped.match(offered) if self.scoped is not None else None
        if scoped is not None:
            return p.OPERATOR, scoped.id
        raise RoostError("unauthorized", "the token was refused")

    def scope_live(self, scope: str) -> bool:
        """Whether the scoped token ``scope`` is still there (not revoked)."""
        return self.scoped is not None and self.scoped.get(scope) is not None
