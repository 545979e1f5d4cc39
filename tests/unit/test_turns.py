"""A stream turn's acceptance when the state store does not answer its begin in time
(supervisor.turns): the begin is repeated with the same turn id until the store answers; a turn
answered only after the session was stopped does not run and ends ``stopped``. One turn at a
time: a turn that races one being accepted waits for that one's outcome, so that its ``busy``
names a turn that exists (issue 9, finding 18); there the adapter's answer is held on an event
the test sets, and the turn's process is a real, short-lived Python process."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from roost.actors.runtime.peer import Peer
from roost.actors.supervisor import turns
from roost.actors.supervisor.outbox import Outbox
from roost.actors.supervisor.terminal import Terminal, Transcript
from roost.actors.supervisor.turns import TurnRunner
from roost.broker.errors import RoostError


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns, "BEGIN_RETRY_S", 0.01)


class StalledStore:
    """``state.turn.begin`` fails ``unavailable`` until ``answer`` is set; the adapter's turn
    command is a process that would leave a mark if it ran."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark
        self.begins: list[dict[str, Any]] = []
        self.answer = asyncio.Event()

    async def call(self, target: str, method: str, body: dict[str, Any], **_: Any) -> Any:
        if method == "adapter.turn":
            code = f"open({str(self.mark)!r}, 'w').write('ran')"
            return {"argv": [sys.executable, "-c", code], "env": {}}
        assert method == "state.turn.begin"
        self.begins.append(body)
        if not self.answer.is_set():
            raise RoostError("unavailable", "state did not answer state.turn.begin in time")
        return {"turn": body["turn"]["id"], "seq": 7}


def _runner(tmp_path: Path, store: StalledStore) -> tuple[TurnRunner, Outbox]:
    async def nowhere(entry: dict[str, Any]) -> None:  # entries stay in the queue
        raise RoostError("unavailable", "not delivered in this test")

    outbox = Outbox(tmp_path, nowhere)
    spec = {
        "record_id": "r1",
        "generation": 1,
        "instance_id": "i1",
        "provider": "echo",
        "provider_session": "s1",
        "cwd": str(tmp_path),
        "env": {},
        "data_dir": str(tmp_path),
    }
    runner = TurnRunner(store, outbox, spec, Terminal(24, 80), Transcript(tmp_path))  # type: ignore[arg-type]
    return runner, outbox


async def _until(cond: Any) -> None:
    async with asyncio.timeout(10):
        while not cond():
            await asyncio.sleep(0.01)


def test_a_begin_is_repeated_with_the_same_turn_id_until_answered(tmp_path: Path) -> None:
    async def scenario() -> tuple[dict[str, Any], StalledStore]:
        store = StalledStore(tmp_path / "mark")
        runner, _ = _runner(tmp_path, store)
        started = asyncio.ensure_future(runner.start("hi", "op-1"))
        await _until(lambda: len(store.begins) >= 3)
        assert runner.accepting and runner.running is None and not started.done()
        store.answer.set()
        reply = await started
        assert runner._task is not None
        await runner._task
        return reply, store

    reply, store = asyncio.run(scenario())
    assert {b["turn"]["id"] for b in store.begins} == {reply["turn"]}
    assert {b["events"][0]["eid"] for b in store.begins} == {f"i1:turn:{reply['turn']}"}
    assert reply["accepted"] and reply["seq"] == 7
    assert (tmp_path / "mark").read_text() == "ran"


def test_a_turn_answered_after_stop_does_not_run(tmp_path: Path) -> None:
    async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        store = StalledStore(tmp_path / "mark")
        runner, outbox = _runner(tmp_path, store)
        started = asyncio.ensure_future(runner.start("hi", ""))
        await _until(lambda: len(store.begins) >= 2)
        await runner.stop()
        settled = asyncio.ensure_future(runner.settled())
        await asyncio.sleep(0)
        assert not settled.done()  # the supervisor may not leave yet
        store.answer.set()
        reply = await started
        await settled
        return reply, list(outbox._queue)

    reply, queued = asyncio.run(scenario())
    ends = [e for e in queued if e["t"] == "turn-end"]
    assert ends and ends[0]["turn"] == reply["turn"]
    assert ends[0]["reason"] == "stopped" and ends[0]["exit"] is None
    assert not (tmp_path / "mark").exists()


# -- one turn at a time -------------------------------------------------------------------------


class HeldPeer:
    """Answers adapter.turn once ``release`` is set, and state.turn.begin at once."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.begun: list[str] = []

    async def call(self, target: str, method: str, body: dict[str, Any], **_: Any) -> Any:
        if method == "adapter.turn":
            await self.release.wait()
            return {"argv": [sys.executable, "-c", "import time; time.sleep(0.5)"], "env": {}}
        assert method == "state.turn.begin", method
        self.begun.append(body["turn"]["id"])
        return {"seq": len(self.begun)}


class Spool:
    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def put(self, entry: dict[str, Any]) -> int:
        self.entries.append(entry)
        return len(self.entries)

    async def drained(self, timeout: float) -> bool:
        return True

    def undelivered(self) -> RoostError:  # as Outbox: why input waits (no full disk here)
        return RoostError("unavailable", "earlier events are still being delivered")


def _held_runner(tmp_path: Path, peer: HeldPeer, spool: Spool) -> TurnRunner:
    spec = {
        "provider": "echo",
        "provider_session": "s1",
        "record_id": "r1",
        "generation": 1,
        "instance_id": "i1",
        "cwd": str(tmp_path),
        "env": {},
        "data_dir": str(tmp_path),
    }
    return TurnRunner(
        cast(Peer, peer), cast(Outbox, spool), spec, Terminal(24, 80), Transcript(tmp_path)
    )


async def _busy(start: asyncio.Task[dict[str, Any]]) -> dict[str, Any]:
    with pytest.raises(RoostError) as info:
        await start
    assert info.value.code == "busy"
    return info.value.detail


def test_a_racing_turn_names_the_turn_that_was_accepted(tmp_path: Path) -> None:
    async def main() -> None:
        peer, spool = HeldPeer(), Spool()
        runner = _held_runner(tmp_path, peer, spool)
        first = asyncio.create_task(runner.start("one", ""))
        second = asyncio.create_task(runner.start("two", ""))
        await asyncio.sleep(0)  # both are in start(): the first holds acceptance
        assert not second.done()  # it waits for the first's outcome, not "(accepting)"
        peer.release.set()
        accepted = await first
        assert await _busy(second) == {"turn": accepted["turn"], "accepting": False}
        assert peer.begun == [accepted["turn"]]
        await asyncio.wait_for(runner._task or asyncio.sleep(0), 10)
        assert spool.entries[-1]["t"] == "turn-end" and runner.running is None

    asyncio.run(main())


def test_a_turn_goes_ahead_when_the_one_in_acceptance_is_refused(tmp_path: Path) -> None:
    async def main() -> None:
        peer, spool = HeldPeer(), Spool()
        runner = _held_runner(tmp_path, peer, spool)
        refused = asyncio.Event()

        async def drained(timeout: float) -> bool:  # the first turn's outbox never drains
            if not refused.is_set():
                refused.set()
                await peer.release.wait()
                return False
            return True

        spool.drained = drained  # type: ignore[method-assign]
        first = asyncio.create_task(runner.start("one", ""))
        await refused.wait()
        second = asyncio.create_task(runner.start("two", ""))
        await asyncio.sleep(0)
        peer.release.set()
        with pytest.raises(RoostError) as info:
            await first
        assert info.value.code == "unavailable"
        assert (await second)["accepted"] is True
        await asyncio.wait_for(runner._task or asyncio.sleep(0), 10)

    asyncio.run(main())


def test_still_undecided_after_the_wait_is_busy_without_a_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turns, "ACCEPT_WAIT_S", 0.2)

    async def main() -> None:
        peer, spool = HeldPeer(), Spool()
        runner = _held_runner(tmp_path, peer, spool)
        first = asyncio.create_task(runner.start("one", ""))
        await asyncio.sleep(0)
        detail = await _busy(asyncio.create_task(runner.start("two", "")))
        assert detail == {"turn": None, "accepting": True}
        peer.release.set()
        assert (await first)["accepted"] is True
        await asyncio.wait_for(runner._task or asyncio.sleep(0), 10)

    asyncio.run(main())


# -- the turn's process starts beside the answer ------------------------------------------------


def test_the_answer_does_not_wait_for_the_turn_s_process(tmp_path: Path) -> None:
    async def main() -> None:
        store = StalledStore(tmp_path / "mark")
        store.answer.set()
        runner, _ = _runner(tmp_path, store)
        reply = await runner.start("hi", "")
        assert runner.running == reply["turn"] and runner.proc is None  # not even forked yet
        with pytest.raises(RoostError):  # one turn at a time, from the answer on
            await runner.start("another", "")
        assert runner._task is not None
        await asyncio.wait_for(runner._task, 10)
        assert (tmp_path / "mark").read_text() == "ran"

    asyncio.run(main())


def test_a_stop_while_the_process_starts_ends_it_stopped(tmp_path: Path) -> None:
    async def main() -> list[dict[str, Any]]:
        peer, spool = HeldPeer(), Spool()
        peer.release.set()
        runner = _held_runner(tmp_path, peer, spool)
        await runner.start("one", "")
        assert runner.proc is None
        await asyncio.wait_for(runner.stop(grace=5.0), 10)
        return spool.entries

    ends = [e for e in asyncio.run(main()) if e["t"] == "turn-end"]
    assert len(ends) == 1 and ends[0]["reason"] == "stopped"
    assert ends[0]["exit"] == -signal.SIGTERM  # ended once started, not left to run out


# -- the next turn's plan, asked ahead ----------------------------------------------------------


class Planner:
    """``adapter.turn`` answers a plan for any text (argv[3] takes it: a process that writes its
    argument to ``mark``) when asked without one, or the command for the text it is given;
    ``state.turn.begin`` at once. Every call is kept, with whether it carried a text."""

    def __init__(self, mark: Path, text_arg: int | None = 3) -> None:
        self.mark, self.text_arg = mark, text_arg
        self.calls: list[tuple[str, str | None]] = []

    async def call(self, target: str, method: str, body: dict[str, Any], **_: Any) -> Any:
        self.calls.append((method, body.get("text")))
        if method == "state.turn.begin":
            return {"seq": len(self.calls)}
        code = f"import sys; open({str(self.mark)!r}, 'w').write(sys.argv[1])"
        argv = [sys.executable, "-c", code, body.get("text") or "(slot)"]
        if "text" in body:
            return {"argv": argv, "env": {}}
        return {"argv": argv, "env": {}, "text_arg": self.text_arg}


async def _turn(runner: TurnRunner, text: str) -> None:
    await runner.start(text, "")
    assert runner._task is not None
    await asyncio.wait_for(runner._task, 10)


def test_a_turn_with_its_plan_asked_ahead_waits_on_the_commit_alone(tmp_path: Path) -> None:
    """Accepting a turn is then one round trip (the commit); the plan asked at launch runs the
    turn's own text, and the next turn's plan is asked once this one has ended."""

    async def main() -> Planner:
        peer = Planner(tmp_path / "mark")
        runner = _held_runner(tmp_path, cast(HeldPeer, peer), Spool())
        runner.prefetch()
        await _until(lambda: runner._plan is not None and runner._plan[2].done())
        await _turn(runner, "-n 'one'")
        assert (tmp_path / "mark").read_text() == "-n 'one'"
        await _until(lambda: runner._plan is not None and runner._plan[2].done())
        await _turn(runner, "two")
        assert (tmp_path / "mark").read_text() == "two"
        return peer

    calls = asyncio.run(main()).calls
    assert calls[:5] == [
        ("adapter.turn", None),
        ("state.turn.begin", None),
        ("adapter.turn", None),  # after the first turn's end: not first any more
        ("state.turn.begin", None),
        ("adapter.turn", None),
    ]


async def _unanswered() -> dict[str, Any]:
    """A plan request that never gets its answer."""
    await asyncio.Event().wait()
    return {}


@pytest.mark.parametrize("why", ["another-session", "no-text-arg", "not-answered", "stale"])
def test_a_plan_that_does_not_hold_is_asked_again_with_the_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    async def main() -> Planner:
        peer = Planner(tmp_path / "mark", text_arg=None if why == "no-text-arg" else 3)
        runner = _held_runner(tmp_path, cast(HeldPeer, peer), Spool())
        if why == "not-answered":
            never = asyncio.get_running_loop().create_task(_unanswered())
            runner._plan = (runner._plan_key(), asyncio.get_running_loop().time(), never)
        else:
            runner.prefetch()
            await _until(lambda: runner._plan is not None and runner._plan[2].done())
        if why == "another-session":
            runner.spec["provider_session"] = "s2"  # learned since the plan was asked
        if why == "stale":
            monkeypatch.setattr(turns, "PLAN_FRESH_S", -1.0)
        await _turn(runner, "one")
        assert (tmp_path / "mark").read_text() == "one"
        return peer

    calls = asyncio.run(main()).calls
    asked = [c for c in calls if c[0] == "adapter.turn"]
    assert ("adapter.turn", "one") in asked
    assert calls.index(("adapter.turn", "one")) < calls.index(("state.turn.begin", None))


# -- turns the node begins (its gate open) ------------------------------------------------------


class PlanningStore(StalledStore):
    """An adapter host with a plan for any text (``text_arg``) and the latest turn to answer."""

    def __init__(self, mark: Path, latest: dict[str, Any] | None = None) -> None:
        super().__init__(mark)
        self.latest = latest

    async def call(self, target: str, method: str, body: dict[str, Any], **kw: Any) -> Any:
        if method == "adapter.turn":
            code = f"open({str(self.mark)!r}, 'a').write('ran ')"
            return {"argv": [sys.executable, "-c", code, "TEXT"], "env": {}, "text_arg": 3}
        if method == "state.turn.latest":
            return {"turn": self.latest}
        return await super().call(target, method, body, **kw)


def test_the_node_may_begin_a_turn_only_with_a_fresh_plan_for_any_text(tmp_path: Path) -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        without = _runner(tmp_path, StalledStore(tmp_path / "m1"))[0]  # no text_arg
        without.prefetch()
        await asyncio.sleep(0.05)
        runner, _ = _runner(tmp_path, PlanningStore(tmp_path / "m2"))
        before = runner.idle  # the prefetch is not answered yet
        runner.prefetch()
        await _until(lambda: runner.idle)
        return without.idle, before, runner.idle

    assert asyncio.run(scenario()) == (False, False, True)


def test_a_begun_turn_runs_once_and_a_repeated_hand_over_does_not_run_it_again(
    tmp_path: Path,
) -> None:
    mark = tmp_path / "mark"

    async def scenario() -> list[dict[str, Any]]:
        runner, _ = _runner(tmp_path, PlanningStore(mark))
        runner.prefetch()
        await _until(lambda: runner.idle)
        first = await runner.run_begun("t1", "hello")
        again = await runner.run_begun("t1", "hello")
        assert not runner.idle  # running: the gate stays shut
        await _until(lambda: runner.running is None)
        return [first, again]

    assert asyncio.run(scenario()) == [{"started": True}, {"started": True, "repeated": True}]
    assert mark.read_text() == "ran "


def test_a_turn_handed_over_after_a_stop_ends_stopped_without_running(tmp_path: Path) -> None:
    mark = tmp_path / "mark"

    async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        runner, outbox = _runner(tmp_path, PlanningStore(mark))
        await runner.stop()
        started = await runner.run_begun("t1", "hello")
        return started, list(outbox._queue)

    started, queued = asyncio.run(scenario())
    assert started == {"started": False} and not mark.exists()
    assert [(e["t"], e["turn"], e["reason"]) for e in queued] == [("turn-end", "t1", "stopped")]


@pytest.mark.parametrize(
    ("latest", "runs"),
    [
        ({"id": "t9", "state": "running", "generation": 1, "text": "x"}, True),
        ({"id": "t9", "state": "completed", "generation": 1, "text": "x"}, False),
        ({"id": "t9", "state": "running", "generation": 0, "text": "x"}, False),
        (None, False),
    ],
)
def test_the_catch_up_runs_a_turn_a_dying_node_began(
    tmp_path: Path, latest: dict[str, Any] | None, runs: bool
) -> None:
    mark = tmp_path / "mark"

    async def scenario() -> None:
        runner, _ = _runner(tmp_path, PlanningStore(mark, latest))
        await runner.catch_up(1)
        await _until(lambda: runner.running is None)

    asyncio.run(scenario())
    assert mark.exists() is runs


class TurnStore(PlanningStore):
    def __init__(self, mark: Path, turn: dict[str, Any] | None) -> None:
        super().__init__(mark)
        self.turn = turn

    async def call(self, target: str, method: str, body: dict[str, Any], **kw: Any) -> Any:
        if method == "state.turn.get":
            return {"turn": self.turn}
        return await super().call(target, method, body, **kw)


@pytest.mark.parametrize(
    ("turn", "started"),
    [
        ({"id": "t9", "state": "running", "generation": 1, "text": "x"}, True),
        ({"id": "t9", "state": "completed", "generation": 1, "text": "x"}, False),
        ({"id": "t9", "state": "running", "generation": 2, "text": "x"}, False),
        (None, False),
    ],
)
def test_a_repeated_operation_runs_a_node_turn_nobody_handed_over(
    tmp_path: Path, turn: dict[str, Any] | None, started: bool
) -> None:
    mark = tmp_path / "mark"

    async def scenario() -> list[dict[str, Any]]:
        runner, _ = _runner(tmp_path, TurnStore(mark, turn))
        first = await runner.adopt("t9", 1)
        await _until(lambda: runner.running is None)
        return [first, await runner.adopt("t9", 1)]

    first, again = asyncio.run(scenario())
    assert first == {"started": started} and mark.exists() is started
    if started:
        assert again == {"started": True, "repeated": True}  # it ran here: never again
