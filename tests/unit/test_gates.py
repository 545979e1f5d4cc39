"""The supervisors' input gates as the node knows them (roost.actors.node.gates): what a
``node.session.gate`` says (an earlier supervisor's bare ``gate`` too), a gate counting only for
the record's live generation and instance, the wait for one to change, and what input is answered
when its gate will not open."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from roost.actors.node.gates import Gate, Gates, refusal
from roost.wire.errors import RoostError
from roost.wire.limits import INPUT_PENDING_MAX
from roost.wire.messages import Active

BODY = {"record": "r1", "generation": 3, "instance": "i3"}
ACTIVE: Active = {"generation": 3, "instance": "i3"}


# -- what a supervisor says -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "gate"),
    [
        ({"gate": True, "state": "open"}, Gate(3, "i3", "open")),
        (
            {"gate": False, "state": "open", "withhold": "api-key"},
            Gate(3, "i3", "open", withhold="api-key"),
        ),
        (
            {"gate": False, "state": "hold", "why": "resume"},
            Gate(3, "i3", "hold", why="resume"),
        ),
        ({"gate": False, "state": "full", "pending": 300_000}, Gate(3, "i3", "full")),
        ({"gate": False, "state": "busy", "turn": "t1"}, Gate(3, "i3", "busy", turn="t1")),
        ({"gate": False, "state": "closed"}, Gate(3, "i3", "closed")),
        (
            {
                "gate": False,
                "state": "refused",
                "code": "not-found",
                "message": "no conversation",
                "detail": {"b": 2, "a": 1},
            },
            Gate(
                3,
                "i3",
                "refused",
                code="not-found",
                message="no conversation",
                detail=(("a", 1), ("b", 2)),
            ),
        ),
    ],
)
def test_a_gate_says_its_state_and_why(said: dict[str, Any], gate: Gate) -> None:
    assert Gate.parse({**BODY, **said}) == gate


@pytest.mark.parametrize(("bare", "state"), [(True, "open"), (False, "hold"), (None, "hold")])
def test_an_earlier_supervisors_bare_gate_is_open_or_hold(bare: bool | None, state: str) -> None:
    """A supervisor that says no ``state`` (wire 2) says ``gate: true`` while input may be
    committed; anything else holds input (it commits forwarded input itself anyway)."""
    body: dict[str, Any] = dict(BODY)
    if bare is not None:
        body["gate"] = bare
    assert Gate.parse(body) == Gate(3, "i3", state)


@pytest.mark.parametrize("state", ["opened", "", 3, None])
def test_a_state_it_does_not_know_falls_back_to_the_bare_gate(state: Any) -> None:
    assert Gate.parse({**BODY, "gate": True, "state": state}) == Gate(3, "i3", "open")
    assert Gate.parse({**BODY, "gate": False, "state": state}) == Gate(3, "i3", "hold")


@pytest.mark.parametrize("state", [["open"], {"open": 1}])
def test_a_malformed_state_is_no_state(state: Any) -> None:
    """As for ``why``, ``withhold`` and ``turn``, a value of the wrong type is ignored, never a
    failure of the notification's handler."""
    assert Gate.parse({**BODY, "gate": True, "state": state}) == Gate(3, "i3", "open")


def test_other_fields_of_the_wrong_type_are_ignored() -> None:
    body = {**BODY, "state": "open", "why": 1, "withhold": ["login"], "turn": {"id": "t"}}
    assert Gate.parse(body) == Gate(3, "i3", "open")
    body = {**BODY, "state": "refused", "code": 404, "message": None, "detail": ["x"]}
    assert Gate.parse(body) == Gate(3, "i3", "refused")


@pytest.mark.parametrize(
    "address",
    [
        {"record": "r1", "instance": "i3"},
        {"record": "r1", "generation": "3", "instance": "i3"},
        {"record": "r1", "generation": 3},
        {"record": "r1", "generation": 3, "instance": 3},
    ],
)
def test_a_gate_names_its_generation_and_instance_or_says_nothing(address: dict[str, Any]) -> None:
    assert Gate.parse({**address, "gate": True, "state": "open"}) is None


# -- each record's gate, for its live supervisor only ---------------------------------------------


def test_a_gate_counts_only_for_the_live_generation_and_instance() -> None:
    gates = Gates()
    gates.put("r1", Gate(3, "i3", "open"))
    assert gates.get("r1", ACTIVE) == Gate(3, "i3", "open")
    assert gates.get("r1", {"generation": 4, "instance": "i3"}) is None  # a later generation
    assert gates.get("r1", {"generation": 3, "instance": "i4"}) is None  # a later supervisor
    assert gates.get("r1", {}) is None
    assert gates.get("r2", ACTIVE) is None
    assert gates.get_any("r1") == Gate(3, "i3", "open")  # whichever supervisor said it


def test_only_open_gates_are_counted() -> None:
    gates = Gates()
    gates.put("r1", Gate(3, "i3", "open"))
    gates.put("r2", Gate(1, "i1", "open", withhold="login"))
    gates.put("r3", Gate(1, "i1", "busy", turn="t1"))
    assert len(gates) == 2
    gates.put("r1", None)
    assert len(gates) == 1 and gates.get_any("r1") is None
    gates.clear()
    assert len(gates) == 0 and gates.get_any("r2") is None and gates.get_any("r3") is None


def test_a_wait_ends_when_the_gate_changes_or_at_its_limit() -> None:
    async def scenario() -> tuple[float, float]:
        gates = Gates()
        loop = asyncio.get_running_loop()
        started = loop.time()
        waiting = asyncio.ensure_future(gates.changed("r1", 5.0))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        gates.put("r2", Gate(1, "i1", "open"))  # another record's: not this wait's
        await asyncio.sleep(0.05)
        assert not waiting.done()
        gates.put("r1", Gate(3, "i3", "open"))
        await asyncio.wait_for(waiting, 1.0)
        woken = loop.time() - started
        started = loop.time()
        await gates.changed("r1", 0.05)  # nothing changes: the limit
        return woken, loop.time() - started

    woken, limited = asyncio.run(scenario())
    assert woken < 1.0 and 0.05 <= limited < 1.0


def test_a_gate_forgotten_or_cleared_wakes_its_waiters() -> None:
    async def scenario() -> None:
        gates = Gates()
        gates.put("r1", Gate(3, "i3", "hold", why="catch-up"))
        forgotten = asyncio.ensure_future(gates.changed("r1", 5.0))
        await asyncio.sleep(0)
        gates.put("r1", None)
        await asyncio.wait_for(forgotten, 1.0)
        gates.put("r1", Gate(3, "i3", "hold", why="catch-up"))
        cleared = asyncio.ensure_future(gates.changed("r1", 5.0))
        await asyncio.sleep(0)
        gates.clear()
        await asyncio.wait_for(cleared, 1.0)

    asyncio.run(scenario())


# -- what input is answered when its gate does not open -------------------------------------------


@pytest.mark.parametrize(
    ("gate", "code", "detail"),
    [
        (None, "unavailable", {"record": "r1", "why": "not-attached"}),
        (Gate(3, "i3", "hold", why="catch-up"), "unavailable", {"record": "r1", "why": "catch-up"}),
        (Gate(3, "i3", "hold", why="delivery"), "unavailable", {"record": "r1", "why": "delivery"}),
        (Gate(3, "i3", "hold"), "unavailable", {"record": "r1", "why": ""}),
        (Gate(3, "i3", "hold", why="resume"), "resume-pending", {"record": "r1"}),
        (Gate(3, "i3", "full"), "agent-not-reading", {"record": "r1", "limit": INPUT_PENDING_MAX}),
        (
            Gate(3, "i3", "busy", turn="t1"),
            "busy",
            {"record": "r1", "turn": "t1", "accepting": False},
        ),
        (Gate(3, "i3", "busy"), "busy", {"record": "r1", "turn": None, "accepting": False}),
        (Gate(3, "i3", "closed"), "session-not-live", {"record": "r1"}),
        (
            Gate(3, "i3", "refused", code="not-found", message="gone", detail=(("x", 1),)),
            "not-found",
            {"record": "r1", "x": 1},
        ),
        (Gate(3, "i3", "refused"), "session-not-live", {"record": "r1"}),  # it said no code
    ],
)
def test_the_refusal_says_why_the_gate_did_not_open(
    gate: Gate | None, code: str, detail: dict[str, Any]
) -> None:
    err = refusal(gate, "r1")
    assert (err.code, err.detail) == (code, detail)


def test_a_turn_refused_by_its_supervisor_is_answered_with_its_refusal() -> None:
    gate = Gate.parse(
        {
            **BODY,
            "state": "refused",
            "code": "bad-request",
            "message": "this provider has no headless mode",
            "detail": {"field": "mode"},
        }
    )
    err = refusal(gate, "r1")
    assert (err.code, err.message) == ("bad-request", "this provider has no headless mode")
    assert err.detail == {"record": "r1", "field": "mode"}


def test_a_refusal_with_a_code_this_node_does_not_know_is_still_a_refusal() -> None:
    """A supervisor of a later release (the same wire) may refuse with a code this node's
    release does not have: the input is refused all the same, not failed ``internal`` by a
    ValueError out of ``RoostError``."""
    gate = Gate.parse({**BODY, "state": "refused", "code": "a-later-code", "message": "m"})
    err = refusal(gate, "r1")
    assert isinstance(err, RoostError) and err.detail["record"] == "r1"
