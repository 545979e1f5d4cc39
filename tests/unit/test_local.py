"""The in-process link between a broker and an actor beside it (roost.broker.local)."""

from __future__ import annotations

from typing import Any

from roost.broker.local import LocalLink, data


def test_frames_cross_at_once_with_the_routing_id_on_the_brokers_side() -> None:
    to_broker: list[list[Any]] = []
    to_actor: list[list[Any]] = []
    link = LocalLink(b"local-1", to_broker.append, "node")
    assert link.deliver([b"h", b"b"]) is False  # nobody attached yet: gone
    link.attach(to_actor.append)
    assert link.send([b"header", b"body"]) is True
    assert to_broker == [[b"local-1", b"header", b"body"]]
    assert link.deliver([b"h", b"b"]) is True and to_actor == [[b"h", b"b"]]
    assert link.queued == 0
    link.close()
    assert link.deliver([b"h", b"b"]) is False


def test_a_receiver_that_fails_does_not_stop_the_sender() -> None:
    def fails(frames: list[Any]) -> None:
        raise ValueError("a bad message")

    link = LocalLink(b"local-1", fails, "node")
    assert link.send([b"h", b"b"]) is True  # logged, not raised into the actor's send


def test_data_reads_bytes_or_a_frame() -> None:
    class FrameLike:
        bytes = b"framed"

    assert data(b"plain") == b"plain"
    assert data(FrameLike()) == b"framed"
