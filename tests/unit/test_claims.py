"""Claims and leases with a fake clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from roost.actors.node.claims import NODE, Claims
from roost.wire.errors import RoostError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def claims(clock: Clock) -> Claims:
    return Claims(clock)


def code(fn: Callable[..., object], *args: object, **kw: object) -> str:
    with pytest.raises(RoostError) as info:
        fn(*args, **kw)
    return info.value.code


def test_unclaimed_records_take_requests_without_a_grant(claims: Claims) -> None:
    claims.check("r1", "")
    assert claims.get("r1") is None


def test_a_claim_refuses_others_and_admits_its_holder(claims: Claims) -> None:
    grant = claims.claim("r1", 1, "client/a", lease_ms=5000)
    assert grant.generation == 1 and grant.grant_id.startswith("g")
    assert code(claims.check, "r1", "") == "not-claimed"
    claims.check("r1", grant.grant_id)
    claims.check("r2", "")  # other records are not affected
    assert code(claims.claim, "r1", 1, "client/b", lease_ms=5000) == "not-claimed"


def test_take_over_fences_the_old_grant(claims: Claims) -> None:
    old = claims.claim("r1", 1, "client/a", lease_ms=5000)
    new = claims.claim("r1", 1, "client/b", lease_ms=5000, take_over=True)
    assert code(claims.check, "r1", old.grant_id) == "stale-grant"
    claims.check("r1", new.grant_id)


def test_a_lease_not_renewed_lapses(claims: Claims, clock: Clock) -> None:
    grant = claims.claim("r1", 1, "client/a", lease_ms=1000)
    clock.now += 0.9
    renewed = claims.claim("r1", 1, "client/a", lease_ms=1000, renew=grant.grant_id)
    assert renewed.grant_id == grant.grant_id
    clock.now += 0.9
    claims.check("r1", grant.grant_id)  # still inside the renewed lease
    clock.now += 0.2
    claims.check("r1", "")  # lapsed: unclaimed again
    with pytest.raises(RoostError) as info:
        claims.check("r1", grant.grant_id)
    assert info.value.code == "stale-grant" and info.value.detail["reason"] == "lapsed"


def test_release_and_unknown_grants(claims: Claims) -> None:
    grant = claims.claim("r1", 1, "client/a", lease_ms=5000)
    assert code(claims.release, "r1", "g-bogus") == "stale-grant"
    claims.release("r1", grant.grant_id)
    claims.check("r1", "")
    assert code(claims.check, "r1", grant.grant_id) == "stale-grant"


def test_the_node_lease_is_a_claim_of_its_own(claims: Claims, clock: Clock) -> None:
    lease = claims.claim(NODE, 0, "client/a", lease_ms=1000)
    assert code(claims.check, NODE, "") == "not-claimed"
    claims.check(NODE, lease.grant_id)
    claims.check("r1", "")  # records are not claimed by it
    record = claims.claim("r1", 1, "client/b", lease_ms=1000)
    assert code(claims.check, NODE, record.grant_id) == "stale-grant"  # not the node's grant
    wire = claims.get(NODE)
    assert wire is not None and (wire["scope"], wire["record"]) == ("node", None)
    assert claims.get("r1") == {**record.to_wire(clock.now), "scope": "record", "record": "r1"}
    with pytest.raises(RoostError) as refused:
        claims.claim(NODE, 0, "client/b", lease_ms=1000)
    assert "the node" in refused.value.message and refused.value.detail["scope"] == "node"
    clock.now += 1.1
    claims.check(NODE, "")  # lapsed like any lease


def test_a_grant_that_ended_is_stale_whatever_the_request_names(claims: Claims) -> None:
    forgotten = claims.claim("r1", 1, "c/1", lease_ms=1000).grant_id
    claims.forget("r1")
    with pytest.raises(RoostError) as info:
        claims.check_retired(forgotten)
    assert info.value.code == "stale-grant"
    assert info.value.detail == {"grant": forgotten, "reason": "record forgotten"}
    claims.check_retired("g-never-issued")  # unknown: nothing to say about it
    live = claims.claim("r2", 1, "c/1", lease_ms=1000).grant_id
    claims.check_retired(live)  # a live grant has not ended
