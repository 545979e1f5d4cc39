"""The broker's peer registry, driven by a fake clock (roost.broker.registry)."""

from __future__ import annotations

import pytest

from roost.broker import registry
from roost.broker.registry import DEAD_AFTER_BEATS, HEARTBEAT_S, PeerEntry, Registry
from tests import kit


@pytest.fixture
def clock() -> kit.FakeClock:
    return kit.FakeClock(1000.0)


@pytest.fixture
def reg(clock: kit.FakeClock) -> Registry:
    return Registry(clock)


def actor(address: str, rid: bytes, at: float, incarnation: str = "i1") -> PeerEntry:
    return PeerEntry(address=address, routing_id=rid, incarnation=incarnation, last_seen=at)


def client(address: str, rid: bytes, at: float = 0.0) -> PeerEntry:
    return PeerEntry(address=address, routing_id=rid, incarnation="", last_seen=at, actor=False)


def test_register_and_lookup(reg: Registry, clock: kit.FakeClock) -> None:
    entry = actor("node", b"r1", clock.now)
    assert reg.register(entry) is None
    assert reg.lookup("node") is entry
    assert reg.address_of(b"r1") == "node"
    assert reg.actors() == [entry]
    assert reg.now() == clock.now


def test_lookup_of_unknown_address(reg: Registry) -> None:
    assert reg.lookup("nobody") is None
    assert reg.address_of(b"nobody") is None


def test_replace_returns_the_displaced_entry(reg: Registry, clock: kit.FakeClock) -> None:
    old = actor("node", b"r1", clock.now, "i1")
    new = actor("node", b"r2", clock.now, "i2")
    reg.register(old)
    assert reg.register(new) is old
    assert reg.lookup("node") is new
    assert reg.address_of(b"r1") is None
    assert reg.address_of(b"r2") == "node"
    assert reg.actors() == [new]


def test_re_register_with_the_same_routing_id_displaces_nothing(
    reg: Registry, clock: kit.FakeClock
) -> None:
    reg.register(actor("node", b"r1", clock.now, "i1"))
    again = actor("node", b"r1", clock.now, "i2")
    assert reg.register(again) is None
    assert reg.lookup("node") is again
    assert reg.address_of(b"r1") == "node"


def test_routing_id_reuse_removes_the_former_address(reg: Registry, clock: kit.FakeClock) -> None:
    reg.register(actor("session/a", b"r1", clock.now))
    reg.register(actor("session/b", b"r1", clock.now))
    assert reg.lookup("session/a") is None
    assert reg.address_of(b"r1") == "session/b"
    assert [e.address for e in reg.actors()] == ["session/b"]


def test_routing_id_reuse_by_a_client_removes_the_actor(
    reg: Registry, clock: kit.FakeClock
) -> None:
    reg.register(actor("session/a", b"r1", clock.now))
    reg.register(client("client/1", b"r1"))
    assert reg.lookup("session/a") is None
    assert reg.address_of(b"r1") == "client/1"


def test_remove(reg: Registry, clock: kit.FakeClock) -> None:
    entry = actor("node", b"r1", clock.now)
    reg.register(entry)
    assert reg.remove("node") is entry
    assert reg.remove("node") is None
    assert reg.lookup("node") is None
    assert reg.address_of(b"r1") is None


def test_touch_refreshes_last_seen(reg: Registry, clock: kit.FakeClock) -> None:
    entry = actor("node", b"r1", clock.now)
    reg.register(entry)
    clock.now += 2.5
    assert reg.touch(b"r1") is entry
    assert entry.last_seen == clock.now
    assert reg.touch(b"unknown") is None


def test_silence_alone_expires_no_actor(reg: Registry, clock: kit.FakeClock) -> None:
    """Liveness is libzmq's (heartbeats drop a silent connection): an actor that sends nothing
    stays registered until the broker learns its connection dropped."""
    entry = actor("session/a", b"r1", clock.now)
    reg.register(entry)
    clock.now += 1e6
    assert reg.lookup("session/a") is entry


def test_an_expired_actor_is_a_ghost_for_a_while(reg: Registry, clock: kit.FakeClock) -> None:
    entry = actor("session/a", b"r1", clock.now)
    reg.register(entry)
    assert reg.expire("session/a") is entry
    assert reg.lookup("session/a") is None and reg.address_of(b"r1") is None
    assert reg.ghost(b"r1") == "session/a"  # its late replies are still routed
    clock.now += registry.GHOST_S
    assert reg.ghost(b"r1") is None


def test_clients_never_expire(reg: Registry, clock: kit.FakeClock) -> None:
    entry = client("client/1", b"c1", clock.now)
    reg.register(entry)
    clock.now += 1e6
    assert reg.lookup("client/1") is entry
    assert reg.actors() == []


def test_clients_are_capped_oldest_first(reg: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "MAX_CLIENTS", 3)
    for i in range(4):
        reg.register(client(f"client/{i}", f"c{i}".encode()))
    assert reg.lookup("client/0") is None
    assert reg.address_of(b"c0") is None
    assert [reg.lookup(f"client/{i}") is not None for i in (1, 2, 3)] == [True, True, True]


def test_re_registering_a_client_makes_it_newest(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "MAX_CLIENTS", 2)
    reg.register(client("client/0", b"c0"))
    reg.register(client("client/1", b"c1"))
    reg.register(client("client/0", b"c0"))
    reg.register(client("client/2", b"c2"))
    assert reg.lookup("client/1") is None
    assert reg.lookup("client/0") is not None
    assert reg.lookup("client/2") is not None


def test_client_cap_does_not_evict_actors(
    reg: Registry, clock: kit.FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "MAX_CLIENTS", 1)
    reg.register(actor("node", b"n", clock.now))
    reg.register(client("client/0", b"c0"))
    reg.register(client("client/1", b"c1"))
    assert reg.lookup("node") is not None
    assert reg.lookup("client/0") is None
    assert reg.address_of(b"c1") == "client/1"


def test_seen_says_first_once_per_key_and_stays_bounded() -> None:
    seen = registry.Seen(limit=3)
    assert seen.first(b"a") and not seen.first(b"a")
    for key in (b"b", b"c", b"d"):
        assert seen.first(key)
    assert len(seen) == 3  # b"a", the longest unseen, was forgotten
    assert seen.first(b"a")
    assert not seen.first(b"d")  # still remembered


def test_an_active_client_is_not_the_one_evicted(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "MAX_CLIENTS", 2)
    reg.register(client("client/0", b"c0"))
    reg.register(client("client/1", b"c1"))
    assert reg.touch(b"c0") is not None  # client/0 initialized first but is still talking
    reg.register(client("client/2", b"c2"))
    assert reg.lookup("client/1") is None
    assert reg.lookup("client/0") is not None


def test_a_holder_of_another_incarnation_is_not_displaced(
    reg: Registry, clock: kit.FakeClock
) -> None:
    first = actor("lab-1/node", b"r1", clock.now, "i1")
    reg.register(first)
    clock.now += HEARTBEAT_S * DEAD_AFTER_BEATS * 10  # silent: the broker still asks its socket
    assert reg.live_holder("lab-1/node", b"r2", "i2") is first  # a second process: refused


def test_the_same_peer_or_a_dead_holder_may_be_displaced(
    reg: Registry, clock: kit.FakeClock
) -> None:
    reg.register(actor("lab-1/node", b"r1", clock.now, "i1"))
    assert reg.live_holder("lab-1/node", b"r1", "i2") is None  # the same connection
    assert reg.live_holder("lab-1/node", b"r2", "i1") is None  # the same process reconnecting
    assert reg.live_holder("other/node", b"r2", "i2") is None  # nobody holds it
    reg.expire("lab-1/node")  # its connection dropped
    assert reg.live_holder("lab-1/node", b"r2", "i2") is None
