"""Who watches a session's output (roost.broker.watch): the XPUB sockets' subscription messages
per socket, a topic matched by any subscribed prefix, and a hub's view of one node's output."""

from __future__ import annotations

from roost.broker.watch import Subscriptions, output_topic


def test_a_prefix_is_subscribed_while_any_socket_holds_it() -> None:
    subs = Subscriptions()
    assert not subs.watched("o/r0000000001")
    assert subs.update(0, b"\x01o/r0000000001")
    assert not subs.update(0, b"\x01o/r0000000001")  # no change: said once per socket
    assert subs.update(1, b"\x01o/r0000000001")  # the network socket too
    assert subs.watched("o/r0000000001") and not subs.watched("o/r0000000002")
    assert subs.update(0, b"\x00o/r0000000001")
    assert subs.watched("o/r0000000001")  # still on socket 1
    assert subs.update(1, b"\x00o/r0000000001")
    assert not subs.watched("o/r0000000001")
    assert not subs.update(1, b"\x00o/r0000000001")


def test_shorter_prefixes_watch_every_session_and_events_none() -> None:
    subs = Subscriptions()
    subs.update(0, b"\x01e/")
    assert not subs.watched("o/r0000000001")
    for prefix in (b"", b"o", b"o/"):
        subs.update(0, b"\x01" + prefix)
        assert subs.watched("o/r0000000001")
        subs.update(0, b"\x00" + prefix)
    assert not subs.watched("o/r0000000001")


def test_what_is_not_a_subscription_changes_nothing() -> None:
    subs = Subscriptions()
    assert not subs.update(0, b"")
    assert not subs.update(0, b"\x02o/")
    assert not subs.update(0, b"hello")
    assert subs.prefixes() == set()


def test_a_hub_names_one_nodes_output_as_the_node_does() -> None:
    subs = Subscriptions()
    subs.update(0, b"\x01lab-a/e/")
    assert subs.of_node("lab-a") == []
    subs.update(0, b"\x01lab-a/o/r0000000001")
    subs.update(1, b"\x01lab-a/o/r0000000002")
    subs.update(0, b"\x01lab-b/o/r0000000003")
    assert subs.of_node("lab-a") == ["o/r0000000001", "o/r0000000002"]
    assert subs.of_node("lab-b") == ["o/r0000000003"]
    subs.update(0, b"\x01lab-a/")  # all of lab-a
    assert subs.of_node("lab-a") == ["o/"] and subs.of_node("lab-b") == ["o/r0000000003"]
    subs.update(0, b"\x01")  # everything, every node
    assert subs.of_node("lab-b") == ["o/"] and subs.of_node("lab-c") == ["o/"]


def test_only_a_supervisor_has_an_output_topic() -> None:
    assert output_topic("session/r0000000001") == "o/r0000000001"
    for address in ("session/", "node", "state", "adapter/echo", "lab-a/node", "client/x"):
        assert output_topic(address) is None
