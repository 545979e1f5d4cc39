"""The in-process link between a broker and an actor beside it (roost.broker.local)."""

from __future__ import annotations

from typing import Any

from roost.broker.local import LocalLink, data
from roost.wire import protocol as p

Got = list[tuple[list[Any], p.Header | None]]


def test_frames_cross_at_once_with_the_routing_id_on_the_brokers_side() -> None:
    to_broker: Got = []
    to_actor: Got = []
    link = LocalLink(b"local-1", lambda f, h: to_broker.append((f, h)), "node")
    assert link.deliver([b"h", b"b"]) is False  # nobody attached yet: gone
    link.attach(lambda f, h: to_actor.append((f, h)))
    header = p.Header(kind=p.RESPONSE, rid="x")
    assert link.send([header.encode(), b"body"], header) is True
    assert to_broker == [([b"local-1", header.encode(), b"body"], header)]
    assert link.deliver([b"h", b"b"]) is True and to_actor == [([b"h", b"b"], None)]
    assert link.queued == 0
    link.close()
    assert link.deliver([b"h", b"b"]) is False


def test_a_receiver_that_fails_does_not_stop_the_sender() -> None:
    def fails(frames: list[Any], header: p.Header | None) -> None:
        raise ValueError("a bad message")

    link = LocalLink(b"local-1", fails, "node")
    assert link.send([b"h", b"b"]) is True  # logged, not raised into the actor's send


def test_data_reads_bytes_or_a_frame() -> None:
    class FrameLike:
        bytes = b"framed"

    assert data(b"plain") == b"plain"
    assert data(FrameLike()) == b"framed"
