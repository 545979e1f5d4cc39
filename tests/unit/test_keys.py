"""Authorised keys (roost.client.keys): allowing again, one key per node id, revoking."""

from __future__ import annotations

from pathlib import Path

import pytest

from roost.client import keys as k
from roost.wire.errors import RoostError


def test_allowing_the_same_key_again_replaces_its_entry(tmp_path: Path) -> None:
    key = k.new_pair()[0]
    assert k.allow(tmp_path, key, "node", "lab-x")["replaced"] is None
    doc = k.allow(tmp_path, key, "node", "lab-1")
    assert doc["replaced"] == {"role": "node", "name": "lab-x"} and doc["revoked"] == []
    assert k.allowed(tmp_path) == {key: {"role": "node", "name": "lab-1"}}


def test_a_node_id_has_one_key_unless_replaced(tmp_path: Path) -> None:
    first, second = k.new_pair()[0], k.new_pair()[0]
    k.allow(tmp_path, first, "node", "lab-1")
    with pytest.raises(RoostError) as refused:
        k.allow(tmp_path, second, "node", "lab-1")
    assert refused.value.code == "node-id-conflict"
    assert refused.value.detail == {"name": "lab-1", "keys": [first]}
    assert set(k.allowed(tmp_path)) == {first}  # nothing changed
    doc = k.allow(tmp_path, second, "node", "lab-1", replace=True)
    assert doc["revoked"] == [first]
    assert k.allowed(tmp_path) == {second: {"role": "node", "name": "lab-1"}}


def test_clients_may_share_a_name(tmp_path: Path) -> None:
    a, b = k.new_pair()[0], k.new_pair()[0]
    k.allow(tmp_path, a, "operator", "team")
    k.allow(tmp_path, b, "observer", "team")
    assert set(k.allowed(tmp_path)) == {a, b}


def test_revoke_by_key_takes_that_key_only_and_by_name_every_key_so_named(tmp_path: Path) -> None:
    a, b, c = (k.new_pair()[0] for _ in range(3))
    for key in (a, b):
        k.allow(tmp_path, key, "operator", "team")
    k.allow(tmp_path, c, "operator", "other")
    assert k.revoke(tmp_path, a) == {"revoked": [a], "by": "key", "count": 1}
    k.allow(tmp_path, a, "operator", "team")
    assert k.revoke(tmp_path, "team") == {"revoked": sorted([a, b]), "by": "name", "count": 2}
    assert set(k.allowed(tmp_path)) == {c}
    with pytest.raises(RoostError) as missing:
        k.revoke(tmp_path, "team")
    assert missing.value.code == "not-found"
