"""A process's network endpoints, as the node daemon and the hub both check them: a ``tcp://``
address, and a CURVE server endpoint with the state directory's key pair and allowed keys.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from roost.broker.router import NetworkEndpoint
from roost.client.keys import AllowedKeys, allowed, is_loopback, node_keys
from roost.client.locate import default_state_dir
from roost.wire.errors import RoostError


def check_tcp(endpoint: str, flag: str) -> str:
    """``tcp://ADDRESS:PORT``, or bad-request naming the flag that gave it."""
    if not endpoint.startswith("tcp://") or ":" not in endpoint[6:]:
        raise RoostError("bad-request", f"--{flag} takes tcp://ADDRESS:PORT", {"field": flag})
    return endpoint


def roost_for(state_dir: Path) -> str:
    """``roost`` as the user runs it for this directory: with ``--state-dir`` unless it is the
    default one (the key commands a refusal asks for must reach this directory's keys)."""
    if Path(state_dir).resolve() == default_state_dir():
        return "roost"
    return f"roost --state-dir {shlex.quote(str(state_dir))}"


def curve_endpoint(state_dir: Path, endpoint: str, advice: str) -> NetworkEndpoint:
    """A CURVE server endpoint with this directory's key pair and its authorised keys; without
    a key pair and at least one allowed key, ``insecure-listen`` (``advice`` says what to run)."""
    pair = node_keys(state_dir)
    if pair is None or not allowed(state_dir):
        raise RoostError("insecure-listen", advice)
    return NetworkEndpoint(endpoint, curve_secret=pair[1], keys=AllowedKeys(state_dir))


def network_endpoint(state_dir: Path, endpoint: str) -> NetworkEndpoint:
    """A node's TCP endpoint: loopback may go without CURVE; anything else needs the node's key
    pair and at least one authorised client key, or the node refuses to start."""
    if is_loopback(check_tcp(endpoint, "listen")):
        return NetworkEndpoint(endpoint)
    roost = roost_for(state_dir)
    advice = (
        f"a network endpoint needs CURVE: run `{roost} keys new` and"
        f" `{roost} keys allow CLIENT_KEY`"
    )
    return curve_endpoint(state_dir, endpoint, f"{advice} first")
