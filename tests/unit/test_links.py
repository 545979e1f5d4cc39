"""Keeping a hub's node links honest (roost.broker.links): a link answers only what it was
asked, to whoever asked, once; it makes no requests; it publishes under its own node only."""

from __future__ import annotations

import pytest

from roost.broker.links import Links
from roost.wire import protocol as p
from roost.wire.errors import RoostError


def _request(rid: str, sender: str = "client/c1") -> p.Header:
    return p.Header(kind=p.REQUEST, rid=rid, method="session.list", sender=sender)


def _reply(rid: str, target: str = "client/c1", kind: str = p.RESPONSE) -> p.Header:
    return p.Header(kind=kind, rid=rid, target=target)


def _refused(links: Links, link: str, header: p.Header) -> str:
    with pytest.raises(RoostError) as refused:
        links.check(link, header)
    return refused.value.code


def test_a_reply_is_let_through_once_to_whoever_asked() -> None:
    links = Links()
    links.sent("lab-a/node", _request("c1:1"))
    links.sent("lab-a/node", _request("c1:2"))
    links.check("lab-a/node", _reply("c1:1"))
    assert _refused(links, "lab-a/node", _reply("c1:1")) == "forbidden"  # only once
    links.check("lab-a/node", _reply("c1:2", kind=p.ERROR))
    assert len(links) == 0


def test_a_link_cannot_answer_for_another_node_or_to_someone_else() -> None:
    links = Links()
    links.sent("lab-a/node", _request("c1:1"))
    assert _refused(links, "lab-b/node", _reply("c1:1")) == "forbidden"  # asked of lab-a
    assert _refused(links, "lab-a/node", _reply("c1:1", target="client/c2")) == "forbidden"
    assert _refused(links, "lab-a/node", _reply("never-asked")) == "forbidden"


def test_a_link_makes_no_requests() -> None:
    for kind in (p.REQUEST, p.NOTIFY):
        header = p.Header(kind=kind, rid="x", method="hub.shutdown", target="hub")
        assert _refused(Links(), "lab-a/node", header) == "forbidden"


def test_a_link_publishes_under_its_own_node_only() -> None:
    links = Links()
    links.check("lab-a/node", p.Header(kind=p.PUBLISH, extra={"topic": "lab-a/e/r1/x"}))
    for topic in ("lab-b/e/r1/x", "e/r1/x", "lab-a", None):
        header = p.Header(kind=p.PUBLISH, extra={"topic": topic} if topic else {})
        assert _refused(links, "lab-a/node", header) == "forbidden"


def test_what_is_owed_is_bounded_oldest_first() -> None:
    links = Links(limit=2)
    for rid in ("1", "2", "3"):
        links.sent("lab-a/node", _request(rid))
    assert len(links) == 2
    assert _refused(links, "lab-a/node", _reply("1")) == "forbidden"  # forgotten: it timed out
    links.check("lab-a/node", _reply("3"))
