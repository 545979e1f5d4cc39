"""The broker's admission checks (roost.broker.admission): versions, tokens, keys and roles."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from roost.broker.admission import Gate, negotiate, token_ok
from roost.client import keys as k
from roost.client import scoped
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


def test_a_scoped_token_is_an_operator_of_its_own_and_only_while_it_is_there(
    tmp_path: Path,
) -> None:
    tokens = scoped.ScopedTokens(tmp_path)
    gate = Gate("tok", "actor", "watch", Policy(), scoped=tokens)
    assert _code(gate.client, "anything", None) == "unauthorized"  # no file yet
    secret, entry = scoped.new(tmp_path, "own", "agent", 3)
    assert gate.client(secret, None) == ("operator", entry.id)
    assert gate.client("tok", None) == ("operator", None)  # the node's own token: no scope
    assert gate.scope_live(entry.id)
    assert secret not in (tmp_path / scoped.FILE).read_text()
    assert (tmp_path / scoped.FILE).stat().st_mode & 0o777 == 0o600
    scoped.revoke(tmp_path, entry.id)
    assert not gate.scope_live(entry.id)
    assert _code(gate.client, secret, None) == "unauthorized"
    assert _code(scoped.revoke, tmp_path, entry.id) == "not-found"
    assert Gate("tok", "actor", "watch", Policy()).scope_live(entry.id) is False  # a hub's


def test_scoped_tokens_refuse_bad_input_and_a_damaged_file_admits_nobody(tmp_path: Path) -> None:
    assert _code(scoped.new, tmp_path, "all", "", None) == "bad-request"
    assert _code(scoped.new, tmp_path, "own", "x" * 65, None) == "bad-request"
    assert _code(scoped.new, tmp_path, "own", "", -1) == "bad-request"
    secret, _ = scoped.new(tmp_path, "own", "", None)
    (tmp_path / scoped.FILE).write_text('{"tokens": [{"digest": 1}]}')
    assert scoped.ScopedTokens(tmp_path).match(secret) is None
    (tmp_path / scoped.FILE).write_text("not json")
    assert scoped.listed(tmp_path) == []
