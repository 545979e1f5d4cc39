"""The supervisor's signal channel (supervisor.signals): its ordering and staleness rules, and a
real Unix datagram socket under the test's tmp dir."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
from pathlib import Path
from typing import Any, cast

import pytest
import structlog.testing

from roost.actors.supervisor import signals
from roost.actors.supervisor.signals import Ordering, SignalChannel, socket_path
from roost.wire import signals as ws
from tests import kit


def sig(
    seq: int,
    source: ws.SignalSource = "hook",
    record: str = "r1",
    generation: int = 1,
    kind: ws.SignalKind = "turn-end",
) -> ws.Signal:
    return {
        "v": ws.VERSION,
        "record": record,
        "generation": generation,
        "seq": seq,
        "source": source,
        "kind": kind,
        "at": 0.0,
        "data": {},
    }


def test_another_record_or_generation_is_dropped() -> None:
    o = Ordering("r1", 2)
    assert o.refusal(sig(5, record="r2", generation=2)) == "other-record"
    assert o.refusal(sig(5, generation=1)) == "other-generation"
    assert o.refusal(sig(5, generation=3)) == "other-generation"
    assert o.refusal(sig(5, generation=2)) is None


def test_a_repeated_or_older_seq_is_dropped_per_source() -> None:
    o = Ordering("r1", 1)
    assert o.refusal(sig(10)) is None
    assert o.refusal(sig(10)) == "stale-seq"  # repeated
    assert o.refusal(sig(9)) == "stale-seq"  # late
    assert o.refusal(sig(3, source="osc9")) is None  # another source has its own order
    assert o.refusal(sig(11)) is None
    assert o.refusal(sig(4, source="osc9")) is None
    assert o.refusal(sig(4, source="osc9")) == "stale-seq"
    assert o.last == {"hook": 11, "osc9": 4}


def test_a_dropped_signal_does_not_move_its_source_on() -> None:
    o = Ordering("r1", 1)
    assert o.refusal(sig(100, generation=2)) == "other-generation"
    assert o.refusal(sig(5)) is None


def test_another_provider_session_s_signal_is_told_apart() -> None:
    """A CLI the agent started signals with the agent's environment but its own session id."""
    mine, theirs = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
    named = {**sig(1), "data": {"provider_session": theirs}}
    assert signals.other_session(cast(ws.Signal, named), mine) == theirs
    assert signals.other_session(cast(ws.Signal, {**named, "data": {}}), mine) is None
    same = {**named, "data": {"provider_session": mine}}
    assert signals.other_session(cast(ws.Signal, same), mine) is None
    assert signals.other_session(cast(ws.Signal, named), None) is None  # not known yet
    cleared = {**named, "kind": "session", "data": {"provider_session": theirs, "how": "clear"}}
    assert signals.other_session(cast(ws.Signal, cleared), mine) is None  # claude's /clear
    started = {**cleared, "data": {"provider_session": theirs, "how": "startup"}}
    assert signals.other_session(cast(ws.Signal, started), mine) == theirs


async def _another_provider_session_s_signals_are_dropped_and_logged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mine, theirs = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
    channel = SignalChannel("r1", 1, None)
    identity: list[str | None] = [None]
    channel.identity = lambda: identity[0]
    got: list[int] = []
    channel.handlers["turn-end"] = lambda s: got.append(s["seq"])

    def named(seq: int, who: str) -> ws.Signal:
        return cast(ws.Signal, {**sig(seq), "data": {"provider_session": who}})

    with structlog.testing.capture_logs() as logs:
        channel.inject(named(1, theirs))  # the id is not known yet: taken
        identity[0] = mine
        for seq in range(2, 30):
            channel.inject(named(seq, theirs))
        channel.inject(named(5, mine))  # the others moved no seq on
        channel.inject(sig(6))  # one naming no session is the session's own
    assert got == [1, 5, 6]
    assert channel.dropped == {"other-session": 28}
    said = [e for e in logs if e["event"] == "signal-dropped"]
    assert len(said) == 1 and said[0]["reason"] == "other-session"
    assert said[0]["signalled"] == theirs and said[0]["kind"] == "turn-end"


def test_another_provider_session_s_signals_are_dropped_and_logged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asyncio.run(_another_provider_session_s_signals_are_dropped_and_logged(monkeypatch))


def test_the_socket_goes_in_the_runtime_directory_and_always_fits(tmp_path: Path) -> None:
    short = kit.launch_spec(
        record_id="r0123456789",
        generation=3,
        endpoint="ipc:///tmp/roost-1000/abc/router",
        session_dir=str(tmp_path),
    )
    assert socket_path(short) == Path("/tmp/roost-1000/abc/sig-r0123456789.3")
    deep = "/" + "d" * 120
    session = kit.launch_spec(endpoint=f"ipc://{deep}/router", session_dir="/s")
    assert socket_path(session) == Path("/s/sig-r1.1")  # the runtime dir's path is too long
    assert socket_path(kit.launch_spec(endpoint="tcp://127.0.0.1:5", session_dir=deep)) is None


def send(path: Path, raw: bytes) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(raw, str(path))


async def _datagrams_are_taken_in_order_and_stale_ones_dropped(tmp_path: Path) -> None:
    path = tmp_path / "sig"
    channel = SignalChannel("r1", 1, path)
    got: list[tuple[str, int]] = []
    channel.handlers["turn-end"] = lambda s: got.append((s["source"], s["seq"]))
    assert channel.open()
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert channel.env() == {
            ws.ENV_SOCKET: str(path),
            ws.ENV_RECORD: "r1",
            ws.ENV_GENERATION: "1",
        }
        for raw in (
            ws.encode(sig(2)),
            ws.encode(sig(2)),  # repeated
            ws.encode(sig(1)),  # older
            ws.encode(sig(3, generation=0)),  # an earlier launch's hook
            ws.encode(sig(3, record="r9")),
            b"\x93not a signal",
            ws.encode(sig(1, source="statusline")),
            ws.encode(sig(3, kind="usage")),  # taken; no handler here
            ws.encode(sig(4)),
        ):
            send(path, raw)
        await kit.until(lambda: got == [("hook", 2), ("statusline", 1), ("hook", 4)])
        await kit.until(lambda: channel.taken == 4)
        assert channel.dropped == {
            "stale-seq": 2,
            "other-generation": 1,
            "other-record": 1,
            "malformed": 1,
        }
    finally:
        channel.close()
    assert not path.exists()
    assert channel.env() == {}


def test_datagrams_are_taken_in_order_and_stale_ones_dropped(tmp_path: Path) -> None:
    asyncio.run(_datagrams_are_taken_in_order_and_stale_ones_dropped(tmp_path))


async def _the_supervisor_s_own_signals_follow_the_same_rules() -> None:
    channel = SignalChannel("r1", 1, None)
    got: list[int] = []
    channel.handlers["turn-end"] = lambda s: got.append(s["seq"])
    for seq in (100, 100, 50, 200):
        channel.inject(sig(seq, source="osc9"))
    assert got == [100, 200]


def test_the_supervisor_s_own_signals_follow_the_same_rules() -> None:
    asyncio.run(_the_supervisor_s_own_signals_follow_the_same_rules())


async def _drops_are_logged_at_most_once_a_spell(monkeypatch: pytest.MonkeyPatch) -> None:
    channel = SignalChannel("r1", 1, None)
    with structlog.testing.capture_logs() as logs:
        for _ in range(50):
            channel.inject(sig(1, generation=7))
        monkeypatch.setattr(signals, "DROP_LOG_S", 0.0)
        channel.inject(sig(1, generation=7))
    said = [e for e in logs if e["event"] == "signal-dropped"]
    assert [e["count"] for e in said] == [1, 51]
    assert said[0]["reason"] == "other-generation" and said[0]["generation"] == 7


def test_drops_are_logged_at_most_once_a_spell(monkeypatch: pytest.MonkeyPatch) -> None:
    asyncio.run(_drops_are_logged_at_most_once_a_spell(monkeypatch))


async def _a_stale_socket_is_replaced_and_a_path_that_cannot_be_bound_turns_it_off(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sig"
    path.write_text("left by a crashed supervisor")
    channel = SignalChannel("r1", 1, path)
    assert channel.open()
    channel.close()
    off = SignalChannel("r1", 1, tmp_path / "missing-dir" / "sig")
    assert not off.open() and off.env() == {}
    off.close()


def test_a_stale_socket_is_replaced_and_a_path_that_cannot_be_bound_turns_it_off(
    tmp_path: Path,
) -> None:
    asyncio.run(_a_stale_socket_is_replaced_and_a_path_that_cannot_be_bound_turns_it_off(tmp_path))


def test_another_user_s_credentials_are_refused() -> None:
    creds: list[Any] = [
        (socket.SOL_SOCKET, socket.SCM_CREDENTIALS, signals._CREDS.pack(1, os.getuid() + 1, 0))
    ]
    assert not signals._same_user(creds)
    creds[0] = (socket.SOL_SOCKET, socket.SCM_CREDENTIALS, signals._CREDS.pack(1, os.getuid(), 0))
    assert signals._same_user(creds)
    assert not signals._same_user([])  # no credentials: refused
