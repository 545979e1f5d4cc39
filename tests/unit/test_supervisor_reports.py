"""What a pty supervisor reports of its verdicts (Supervisor.classified): a change, a signal that
bears a verdict out, and each turn's end once."""

from __future__ import annotations

from typing import Any, cast

from roost.actors.supervisor.actor import Supervisor


class Keys:
    def __init__(self) -> None:
        self.updates = 0

    def update_gate(self) -> None:
        self.updates += 1


class Reads:
    def __init__(self) -> None:
        self.asked = 0

    def soon(self) -> None:
        self.asked += 1


class Stub:
    def __init__(self) -> None:
        self.classification: dict[str, Any] = {}
        self.keyboard = Keys()
        self.usage = Reads()  # the CLI's files are read after a verdict that is not busy
        self.reports: list[dict[str, Any]] = []

    def report(self, method: str, body: dict[str, Any]) -> None:
        assert method == "node.session.classified"
        self.reports.append(body["classification"])

    def classified(self, result: dict[str, Any], via: str = "screen", ended: int = 0) -> None:
        Supervisor.classified(cast(Supervisor, self), result, via=via, ended=ended)


READY = {"state": "ready", "reason": None, "detail": ""}
BUSY = {"state": "busy", "reason": None, "detail": ""}


def test_a_change_is_reported_once_with_its_evidence() -> None:
    sup = Stub()
    sup.classified(READY)
    sup.classified(READY)
    assert sup.reports == [{**READY, "via": "screen", "turn_end": False}]
    assert sup.classification == {**READY, "via": "screen"} and sup.keyboard.updates == 1
    assert sup.usage.asked == 1  # a new verdict that is not busy: the figures are read


def test_a_signal_that_bears_an_unchanged_verdict_out_is_reported() -> None:
    sup = Stub()
    sup.classified(READY)
    sup.classified(READY, via="signal")
    sup.classified(READY, via="signal")  # the same evidence again: nothing new
    sup.classified(READY)  # back to the screen alone: not worth an event
    assert [r["via"] for r in sup.reports] == ["screen", "signal"]
    assert sup.keyboard.updates == 1  # the gate only moves with the verdict


def test_each_ended_turn_is_reported_once() -> None:
    sup = Stub()
    sup.classified(BUSY)
    sup.classified(READY, ended=1)  # a change that ends a turn: one report
    sup.classified(READY, via="both", ended=2)  # two turns more
    assert [(r["state"], r["via"], r["turn_end"]) for r in sup.reports] == [
        ("busy", "screen", False),
        ("ready", "screen", True),
        ("ready", "both", True),
        ("ready", "both", True),
    ]
    assert sup.usage.asked == 2  # after each verdict that ended turns, not after the busy one
