"""When a long-lived subscriber asks again, and what an answer means (roost.cli.liveness)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from roost.cli.liveness import CHECK_S, Liveness
from roost.client.client import Client
from roost.wire.errors import RoostError
from tests import kit


class FakeClient:
    """What Liveness uses of a Client: info, events_endpoint, initialize(timeout)."""

    def __init__(self) -> None:
        self.info: dict[str, Any] = {"incarnation": "i1"}
        self.events_endpoint = "tcp://h:2"
        self.answer: dict[str, Any] | RoostError = {"incarnation": "i1"}

    def initialize(self, timeout: float | None = None) -> dict[str, Any]:
        if isinstance(self.answer, RoostError):
            raise self.answer
        self.info = self.answer
        self.events_endpoint = str(self.answer.get("events", self.events_endpoint))
        return self.info


def _alive(retry_for: float = 10.0) -> tuple[Liveness, FakeClient, kit.FakeClock]:
    client, clock = FakeClient(), kit.FakeClock(100.0)
    return Liveness(cast(Client, client), retry_for, clock), client, clock


def test_it_asks_only_after_a_silence() -> None:
    alive, _, clock = _alive()
    assert not alive.due()
    clock.now += CHECK_S
    assert alive.due()
    alive.heard()
    assert not alive.due()


def test_the_same_incarnation_and_endpoint_is_no_change() -> None:
    alive, _, _ = _alive()
    assert alive.check() is False


def test_a_restart_or_a_moved_endpoint_means_subscribe_again() -> None:
    alive, client, _ = _alive()
    client.answer = {"incarnation": "i2"}
    assert alive.check() is True
    assert alive.check() is False  # remembered
    client.answer = {"incarnation": "i2", "events": "tcp://h:3"}
    assert alive.check() is True


def test_no_answer_is_tried_again_then_given_up(capsys: pytest.CaptureFixture[str]) -> None:
    alive, client, clock = _alive(retry_for=10.0)
    client.answer = RoostError("timeout", "no answer")
    assert alive.check() is None
    assert "no answer (timeout)" in capsys.readouterr().err  # said once
    clock.now += 9.0
    assert alive.check() is None and capsys.readouterr().err == ""
    clock.now += 1.0
    with pytest.raises(RoostError) as gave_up:
        alive.check()
    assert gave_up.value.code == "unavailable" and gave_up.value.detail == {"cause": "timeout"}


def test_an_answer_in_time_resets_the_wait(capsys: pytest.CaptureFixture[str]) -> None:
    alive, _, clock = _alive(retry_for=10.0)
    alive.lost(RoostError("unreachable", "link not back"))
    clock.now += 9.0
    alive.found()
    assert "answered again" in capsys.readouterr().err
    clock.now += 9.0
    alive.lost(RoostError("unreachable", "link not back"))  # a new outage: a new wait
    assert alive.lost_at == clock.now


def test_a_refusal_that_is_no_outage_is_raised_at_once() -> None:
    alive, client, _ = _alive()
    client.answer = RoostError("unauthorized", "the token was refused")
    with pytest.raises(RoostError) as refused:
        alive.check()
    assert refused.value.code == "unauthorized"
