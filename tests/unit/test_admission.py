"""The broker's admission checks (roost.broker.admission): versions, tokens, keys and roles."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from roost.broker.admission import Gate, negotiate, token_ok
from roost.client import keys as k
from roost.wire.errors import RoostError
from roost.wire.policy import Policy


def _code(fn: Callable[..., object], *args: object) -> str:
    with pytest.raises(RoostError) as refused:
        fn(*args)
    return refused.value.code


def test_negotiate_takes_the_highest_common_version() -> None:
    assert negotiate([1]) == 1 and negotiate([7, 1, 3]) == 1
    assert _code(negotiate, [2]) == "unsupported-version"
    for bad in (None, "1", [True], [1.0], [[1]]):
        assert _code(negotiate, bad) == "bad-request"


def test_tokens_are_strings_compared_whole() -> None:
    assert token_ok("secret", "secret")
    assert not token_ok("secre", "secret") and not token_ok(None, "secret")
    assert not token_ok(b"secret", "secret")


def _gate(tmp_path: Path, hub: bool = False) -> tuple[Gate, dict[str, str]]:
    public = {role: k.new_pair()[0] for role in ("operator", "observer", "node")}
    for role, key in public.items():
        k.allow(tmp_path, key, role, "lab-a" if role == "node" else role)
    gate = Gate("tok", "actor", "watch", Policy(hub=hub), k.AllowedKeys(tmp_path))
    return gate, public


def test_a_client_role_comes_from_its_key_else_its_token(tmp_path: Path) -> None:
    gate, public = _gate(tmp_path)
    assert gate.client_role("", public["operator"]) == "operator"
    assert gate.client_role("tok", public["observer"]) == "observer"  # the key decides
    assert _code(gate.client_role, "tok", public["node"]) == "unauthorized"
    assert gate.client_role("tok", None) == "operator"
    assert gate.client_role("watch", None) == "observer"
    assert _code(gate.client_role, "wrong", None) == "unauthorized"


def test_a_hello_needs_the_actor_secret_unless_a_hub_knows_the_nodes_key(tmp_path: Path) -> None:
    node_gate, public = _gate(tmp_path)
    assert node_gate.hello("actor", None, "state") is False
    assert _code(node_gate.hello, "", public["node"], "lab-a/node") == "unauthorized"
    hub_gate = Gate("tok", "actor", "watch", Policy(hub=True), node_gate.keys)
    assert hub_gate.hello("", public["node"], "lab-a/node") is True
    assert _code(hub_gate.hello, "", public["node"], "lab-b/node") == "forbidden"
    assert _code(hub_gate.hello, "", public["operator"], "lab-a/node") == "unauthorized"
    k.revoke(tmp_path, public["node"])
    assert _code(hub_gate.hello, "", public["node"], "lab-a/node") == "unauthorized"
