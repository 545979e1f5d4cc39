"""Session records and the rules for changing them (roost.actors.state.records)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from roost.actors.state.records import (
    ACTIVE_STATES,
    ATTENTION,
    DORMANT,
    FAILED,
    LIVE,
    STARTING,
    STATES,
    STOPPING,
    Record,
    check_forget,
    check_generation,
    check_live,
    check_resume,
    new_record_id,
    session_address,
    validate_name,
)
from roost.wire.errors import RoostError

ACTIVE = {"address": "session/r1", "generation": 3}


def record(**changes: Any) -> Record:
    base: dict[str, Any] = {
        "id": "r1",
        "name": "alpha",
        "provider": "echo",
        "mode": "pty",
        "cwd": "/work",
        "generation": 3,
    }
    base.update(changes)
    return Record(**base)


def code_of(check: Any, *args: Any) -> str:
    with pytest.raises(RoostError) as info:
        check(*args)
    return info.value.code


def test_active_states_are_the_ones_a_supervisor_may_hold() -> None:
    assert {STARTING, LIVE, STOPPING, ATTENTION} == ACTIVE_STATES
    assert set(STATES) - ACTIVE_STATES == {DORMANT, FAILED}


@pytest.mark.parametrize("state", sorted(ACTIVE_STATES))
def test_resume_of_an_active_record_is_busy(state: str) -> None:
    with pytest.raises(RoostError) as info:
        check_resume(record(state=state, provider_session="p1"))
    assert info.value.code == "session-record-busy"
    assert info.value.detail == {"record": "r1", "state": state}


@pytest.mark.parametrize("state", [DORMANT, FAILED])
def test_resume_of_an_inactive_record_with_identity_is_allowed(state: str) -> None:
    check_resume(record(state=state, provider_session="p1"))


@pytest.mark.parametrize("identity", [None, ""])
def test_resume_without_provider_session_is_refused(identity: str | None) -> None:
    rec = record(state=DORMANT, provider_session=identity)
    assert code_of(check_resume, rec) == "no-provider-session"


@pytest.mark.parametrize("state", sorted(ACTIVE_STATES))
def test_forget_of_an_active_record_is_busy(state: str) -> None:
    assert code_of(check_forget, record(state=state)) == "session-record-busy"


@pytest.mark.parametrize("state", [DORMANT, FAILED])
def test_forget_of_an_inactive_record_is_allowed(state: str) -> None:
    check_forget(record(state=state))


@pytest.mark.parametrize("state", [LIVE, ATTENTION])
def test_check_live_returns_the_active_session(state: str) -> None:
    assert check_live(record(state=state, active=ACTIVE)) == ACTIVE


@pytest.mark.parametrize("state", [STARTING, STOPPING, DORMANT, FAILED])
def test_check_live_refuses_other_states(state: str) -> None:
    assert code_of(check_live, record(state=state, active=ACTIVE)) == "session-not-live"


def test_check_live_refuses_a_live_record_without_active_session() -> None:
    assert code_of(check_live, record(state=LIVE, active=None)) == "session-not-live"


@pytest.mark.parametrize("session", [None, {}, {"other": 1}, {"generation": 3}])
def test_check_generation_passes(session: dict[str, Any] | None) -> None:
    check_generation(record(generation=3), session)


@pytest.mark.parametrize("generation", [2, 4, 0])
def test_check_generation_refuses_another_generation(generation: int) -> None:
    with pytest.raises(RoostError) as info:
        check_generation(record(generation=3), {"generation": generation})
    assert info.value.code == "stale-generation"
    assert info.value.detail == {"record": "r1", "generation": 3}


def test_validate_name_strips() -> None:
    assert validate_name("  my session ") == "my session"
    assert validate_name("x" * 128) == "x" * 128


@pytest.mark.parametrize("name", ["", "   ", "x" * 129, "a\nb", "a\x1b[31mb", "\x00", "tab\there"])
def test_validate_name_refuses(name: str) -> None:
    with pytest.raises(RoostError) as info:
        validate_name(name)
    assert info.value.code == "bad-request"
    assert info.value.detail == {"field": "name"}


@pytest.mark.parametrize("name", ["a\x7fb", "a\x9b31mb"])
def test_validate_name_refuses_other_control_characters(name: str) -> None:
    with pytest.raises(RoostError):
        validate_name(name)


@pytest.mark.parametrize("name", ["r5fd32c946a", "R5FD32C946A", " r0123456789 "])
def test_validate_name_refuses_the_form_of_a_record_id(name: str) -> None:
    with pytest.raises(RoostError) as info:
        validate_name(name)
    assert info.value.code == "name-looks-like-id" and info.value.detail["field"] == "name"


def test_validate_name_refuses_a_new_record_id() -> None:
    with pytest.raises(RoostError) as info:
        validate_name(new_record_id())
    assert info.value.code == "name-looks-like-id"


@pytest.mark.parametrize(
    "name", ["r2d2", "r5fd32c946", "r5fd32c946ab", "x5fd32c946a", "r5fd32c946g"]
)
def test_validate_name_takes_what_is_not_an_id(name: str) -> None:
    assert validate_name(name) == name


def test_to_wire_hides_env_values() -> None:
    rec = record(env={"API_KEY": "sk-secret-value", "HOME": "/home/u"}, rows=24, cols=80)
    wire = rec.to_wire()
    assert wire["env"] == ["API_KEY", "HOME"]
    assert b"sk-secret-value" not in msgpack.packb(wire, use_bin_type=True)
    assert wire["size"] == {"rows": 24, "cols": 80}
    assert rec.env["API_KEY"] == "sk-secret-value"


def test_from_row_ignores_unknown_columns() -> None:
    rec = Record.from_row(
        {
            "id": "r2",
            "name": None,
            "provider": "echo",
            "mode": "pty",
            "cwd": "/",
            "future_column": 1,
        }
    )
    assert (rec.id, rec.state, rec.generation) == ("r2", STARTING, 0)


def test_new_record_id_and_address() -> None:
    ids = {new_record_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(i.startswith("r") and len(i) == 11 for i in ids)
    assert session_address(record()) == "session/r1"
