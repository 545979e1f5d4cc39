"""``roost attach`` after a silence (roost.cli.attach._recheck): a restart of the node or hub
is redrawn once the record can be read again, also when the first read after it fails (through a
hub, the node's link may come back after the client does)."""

from __future__ import annotations

from typing import Any

import pytest

from roost.cli import attach
from roost.wire.errors import RoostError


class Alive:
    """Liveness whose checks say: restarted, then the same incarnation."""

    def __init__(self) -> None:
        self.checks = iter([True, False, False])
        self.lost_with: list[str] = []
        self.found_times = 0

    def check(self) -> bool | None:
        return next(self.checks)

    def lost(self, err: RoostError) -> None:
        self.lost_with.append(err.code)

    def found(self) -> None:
        self.found_times += 1


class Stream:
    socket = object()

    def close(self) -> None:
        pass


class Poller:
    def register(self, sock: Any, flags: int) -> None:
        pass

    def unregister(self, sock: Any) -> None:
        pass


def test_a_restart_is_redrawn_when_the_first_read_after_it_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(attach, "_subscribe", lambda view: Stream())
    client: Any = None  # never reached: call and draw are stood in for
    view = attach.Attachment(client, {"id": "r1"}, as_json=True, keyboard=False, writable=False)
    alive = Alive()
    monkeypatch.setattr(view, "alive", alive)
    answers: list[Any] = [
        RoostError("unreachable", "the link is not back"),
        {"record": {"state": "live"}},
    ]
    drawn: list[bool] = []

    def call(method: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        answer = answers.pop(0)
        if isinstance(answer, RoostError):
            raise answer
        return dict(answer)

    monkeypatch.setattr(view, "call", call)
    monkeypatch.setattr(view, "draw", lambda **kw: drawn.append(True))
    streams: list[Any] = [Stream()]
    poller: Any = Poller()  # what _recheck does with a zmq.Poller
    assert attach._recheck(view, streams, poller) == ""
    assert alive.lost_with == ["unreachable"] and drawn == []
    assert attach._recheck(view, streams, poller) == ""
    assert drawn == [True] and alive.found_times == 1  # the restart, drawn once it could be
    answers.append({"record": {"state": "live"}})
    attach._recheck(view, streams, poller)
    assert drawn == [True]  # nothing changed since: no redraw
