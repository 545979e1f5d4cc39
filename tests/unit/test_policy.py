"""What a broker lets its peers address (roost.wire.policy): a node's rules and a hub's."""

from __future__ import annotations

import pytest

from roost.wire.errors import RoostError
from roost.wire.policy import NODE_ROLE, Policy, check_node_id, node_address, node_of

NODE, HUB = Policy(), Policy(hub=True)
TARGETS = [
    "",
    "node",
    "hub",
    "/node",
    "x/node",
    "x/state",
    "x/node/y",
    "state",
    "session/r1",
    "broker",
    "client/abc",
]


def test_a_client_addresses_the_node_by_default_on_a_node_and_the_hub_on_a_hub() -> None:
    assert NODE.default_target == "node"
    assert HUB.default_target == "hub"


@pytest.mark.parametrize("target", TARGETS)
def test_a_node_lets_clients_address_only_the_node(target: str) -> None:
    assert NODE.client_may_address(target) is (target in ("", "node"))


@pytest.mark.parametrize("target", TARGETS)
def test_a_hub_lets_clients_address_the_hub_and_a_named_node(target: str) -> None:
    # "/node" names no node; a node's other actors ("x/state", "session/...") stay internal
    assert HUB.client_may_address(target) is (target in ("", "hub", "x/node"))


def test_a_node_address_is_its_id_then_node() -> None:
    assert node_address("lab-a") == "lab-a/node"
    assert node_of("lab-a/node") == "lab-a"
    assert node_of("lab-a/state") is None and node_of("node") is None and node_of("/node") is None
    assert HUB.client_may_address(node_address("lab-a"))


@pytest.mark.parametrize("node_id", ["lab-a", "n-0123456789", "A.b_c-9", "x" * 64])
def test_node_ids_that_can_prefix_an_address(node_id: str) -> None:
    assert check_node_id(node_id) == node_id


@pytest.mark.parametrize("node_id", ["", "hub", "a/b", "a b", "-a", ".a", "x" * 65, "é"])
def test_node_ids_that_cannot(node_id: str) -> None:
    with pytest.raises(RoostError) as refused:
        check_node_id(node_id)
    assert refused.value.code == "bad-request" and refused.value.detail == {"field": "node-id"}


def test_a_hub_lets_a_node_key_register_as_that_node_only() -> None:
    assert HUB.link_address(NODE_ROLE, "lab-a") == "lab-a/node"
    assert HUB.link_address(NODE_ROLE, "lab-b") == "lab-b/node"
    assert HUB.link_address(NODE_ROLE, "hub") is None  # the hub actor is nobody's to take
    assert HUB.link_address(NODE_ROLE, "a/b") is None


@pytest.mark.parametrize(
    ("role", "name"),
    [
        ("operator", "lab-a"),  # a client's key, whatever its name
        ("observer", "lab-a"),
        (None, "lab-a"),  # a key not (or no longer) allowed
        (NODE_ROLE, None),  # a node's key allowed without a name names no address
        (NODE_ROLE, ""),
    ],
)
def test_a_hub_gives_no_link_address_to_other_keys(role: str | None, name: str | None) -> None:
    assert HUB.link_address(role, name) is None


@pytest.mark.parametrize("role", [NODE_ROLE, "operator", "observer", None])
def test_a_node_never_registers_an_actor_by_key(role: str | None) -> None:
    assert NODE.link_address(role, "lab-a") is None  # a node's actors prove the actor secret


def test_a_policy_is_a_value() -> None:
    assert Policy() == Policy(hub=False) != Policy(hub=True)
    assert hash(Policy(hub=True)) == hash(HUB)


def test_a_taken_address_is_refused_node_id_conflict_naming_the_node_on_a_hub() -> None:
    on_hub = HUB.conflict("lab-1/node")
    assert on_hub.code == "node-id-conflict" and on_hub.detail == {"address": "lab-1/node"}
    assert "node id 'lab-1' is linked already" in on_hub.message
    on_node = NODE.conflict("session/r1")
    assert on_node.code == "node-id-conflict" and "'session/r1' is held" in on_node.message
