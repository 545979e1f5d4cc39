"""Stream-mode turns in a supervisor (supervisor.turns): the node begins every turn and hands it
over; the runner runs each begun turn once, one at a time (another handed over meanwhile is
``busy``, naming the turn that runs), its process starting beside the answer, a turn whose
command cannot be had ending ``failed``, a stop ending a turn not started yet ``stopped``; the
next turn's plan asked ahead (a refusal of it said to the node through the gate); and the turns a
dying node began and nobody handed over, run by the catch-up or when their operation is repeated
(only this record's and generation's). The adapter's answer is held on an event where a test
needs it, and a turn's process is a real, short-lived Python process that leaves a mark."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from roost.actors.supervisor import turns
from roost.actors.supervisor.outbox import Outbox
from roost.actors.supervisor.terminal import Terminal, Transcript
from roost.actors.supervisor.turns import TurnRunner
from roost.wire.errors import RoostError
from roost.wire.messages import TurnPlan
from tests import kit


class Adapter(kit.FakePeer):
    """``adapter.turn`` once ``release`` is set: a command that appends its text to ``mark`` (a
    plan for any text, argv[3] taking it, when asked without one and ``text_arg`` is given), or
    first a refusal for each of ``fail``; ``state.turn.latest`` and ``state.turn.get`` answer
    ``latest`` and ``turn``. Every call is kept, with the text it carried."""

    def __init__(
        self,
        mark: Path,
        *,
        text_arg: int | None = None,
        fail: tuple[str, ...] = (),
        sleep: float = 0.0,
    ) -> None:
        super().__init__()
        self.mark, self.text_arg, self.fail, self.sleep = mark, text_arg, list(fail), sleep
        self.release = asyncio.Event()
        self.release.set()
        self.asked: list[tuple[str, str | None]] = []  # each call's method and text
        self.latest: dict[str, Any] | None = None
        self.turn: dict[str, Any] | None = None

    async def answer(
        self, target: str, method: str, body: dict[str, Any], kw: dict[str, Any]
    ) -> Any:
        self.asked.append((method, body.get("text")))
        if method == "state.turn.latest":
            return {"turn": self.latest}
        if method == "state.turn.get":
            return {"turn": self.turn}
        assert (target, method) == ("adapter/echo", "adapter.turn"), method
        await self.release.wait()
        if self.fail:
            raise RoostError(self.fail.pop(0), "no command for you")
        code = (
            f"import sys, time; time.sleep({self.sleep}); "
            f"open({str(self.mark)!r}, 'a').write(sys.argv[1] + ' ')"
        )
        plan: dict[str, Any] = {
            "argv": [sys.executable, "-c", code, body.get("text") or "(slot)"],
            "env": {},
        }
        if "text" not in body and self.text_arg is not None:
            plan["text_arg"] = self.text_arg
        return plan


class Spool:
    """The outbox: every entry kept; delivered at once unless ``delivered`` is cleared."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.delivered = asyncio.Event()
        self.delivered.set()

    def put(self, entry: dict[str, Any]) -> int:
        self.entries.append(entry)
        return len(self.entries)

    @property
    def size(self) -> int:
        return 0 if self.delivered.is_set() else len(self.entries)

    async def drained(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self.delivered.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def ends(self) -> list[tuple[str, Any, Any]]:
        return [(e["turn"], e["exit"], e["reason"]) for e in self.entries if e["t"] == "turn-end"]


def _runner(tmp_path: Path, peer: Adapter, spool: Spool) -> TurnRunner:
    spec = kit.launch_spec(
        mode="stream", provider_session="s1", cwd=str(tmp_path), data_dir=str(tmp_path)
    )
    return TurnRunner(peer, cast(Outbox, spool), spec, Terminal(24, 80), Transcript(tmp_path))


async def _busy(call: Any) -> dict[str, Any]:
    with pytest.raises(RoostError) as info:
        await call
    assert info.value.code == "busy"
    return info.value.detail


async def _ran(runner: TurnRunner) -> None:
    """Until the turn started last has ended."""
    assert runner._task is not None
    await asyncio.wait_for(runner._task, 10)


def _planned(runner: TurnRunner) -> bool:
    return runner._plan is not None and runner._plan[2].done()


# -- one begun turn at a time ---------------------------------------------------------------------


def test_the_answer_does_not_wait_for_the_turns_process(tmp_path: Path) -> None:
    mark = tmp_path / "mark"

    async def main() -> Spool:
        spool = Spool()
        runner = _runner(tmp_path, Adapter(mark), spool)
        assert await runner.run_begun("t1", "hi") == {"started": True}
        assert runner.running == "t1" and runner.proc is None  # not even forked yet
        assert await _busy(runner.run_begun("t2", "another")) == {"turn": "t1"}
        await _ran(runner)
        assert runner.running is None
        return spool

    assert asyncio.run(main()).ends() == [("t1", 0, None)]
    assert mark.read_text() == "hi "


def test_a_turn_handed_over_while_one_is_prepared_is_busy_naming_it(tmp_path: Path) -> None:
    """The node's gate is ``busy`` from its begin on; a turn handed over on an older gate finds
    the one being prepared (its command asked) and is told which (the node tries it again)."""
    mark = tmp_path / "mark"

    async def main() -> Spool:
        peer, spool = Adapter(mark), Spool()
        peer.release.clear()
        runner = _runner(tmp_path, peer, spool)
        first = asyncio.ensure_future(runner.run_begun("t1", "one"))
        await kit.until(lambda: runner.preparing)
        assert runner.running == "t1" and not runner.idle
        assert await _busy(runner.run_begun("t2", "two")) == {"turn": "t1"}
        peer.release.set()
        assert await first == {"started": True}
        await _ran(runner)
        assert await runner.run_begun("t2", "two") == {"started": True}  # its turn now
        await _ran(runner)
        return spool

    assert asyncio.run(main()).ends() == [("t1", 0, None), ("t2", 0, None)]
    assert mark.read_text() == "one two "


def test_a_turn_whose_command_cannot_be_had_ends_failed_and_the_next_runs(tmp_path: Path) -> None:
    mark = tmp_path / "mark"

    async def main() -> tuple[list[dict[str, Any]], Spool]:
        spool = Spool()
        runner = _runner(tmp_path, Adapter(mark, fail=("bad-request",)), spool)
        first = await runner.run_begun("t1", "one")
        second = await runner.run_begun("t2", "two")
        await _ran(runner)
        return [first, second], spool

    replies, spool = asyncio.run(main())
    assert replies == [{"started": False}, {"started": True}]
    [(turn, code, reason), after] = spool.ends()
    assert (turn, code) == ("t1", 127) and reason.startswith("no command for the turn: ")
    assert after == ("t2", 0, None) and mark.read_text() == "two "


def test_a_stop_while_the_command_is_asked_ends_the_turn_stopped_and_is_waited_for(
    tmp_path: Path,
) -> None:
    """The supervisor leaves only once the turn has its end (``settled``)."""
    mark = tmp_path / "mark"

    async def main() -> tuple[dict[str, Any], Spool]:
        peer, spool = Adapter(mark), Spool()
        peer.release.clear()
        runner = _runner(tmp_path, peer, spool)
        begun = asyncio.ensure_future(runner.run_begun("t1", "hi"))
        await kit.until(lambda: runner.preparing)
        await runner.stop()
        settled = asyncio.ensure_future(runner.settled())
        await asyncio.sleep(0.05)
        assert not settled.done()  # the supervisor may not leave yet
        peer.release.set()
        started = await begun
        await asyncio.wait_for(settled, 5)
        return started, spool

    started, spool = asyncio.run(main())
    assert started == {"started": False} and spool.ends() == [("t1", None, "stopped")]
    assert not mark.exists()


def test_a_stop_while_the_process_starts_ends_it_stopped(tmp_path: Path) -> None:
    async def main() -> Spool:
        spool = Spool()
        runner = _runner(tmp_path, Adapter(tmp_path / "mark", sleep=0.5), spool)
        await runner.run_begun("t1", "one")
        assert runner.proc is None
        await asyncio.wait_for(runner.stop(grace=5.0), 10)
        return spool

    ends = asyncio.run(main()).ends()
    assert ends == [("t1", -signal.SIGTERM, "stopped")]  # ended once started, not left to run out
    assert not (tmp_path / "mark").exists()


def test_a_turn_handed_over_after_a_stop_ends_stopped_without_running(tmp_path: Path) -> None:
    mark = tmp_path / "mark"

    async def main() -> tuple[dict[str, Any], Spool, Adapter]:
        peer, spool = Adapter(mark), Spool()
        runner = _runner(tmp_path, peer, spool)
        await runner.stop()
        started = await runner.run_begun("t1", "hello")
        return started, spool, peer

    started, spool, peer = asyncio.run(main())
    assert started == {"started": False} and not mark.exists()
    assert spool.ends() == [("t1", None, "stopped")] and peer.asked == []  # nothing asked after


def test_a_begun_turn_runs_once_and_a_repeated_hand_over_does_not_run_it_again(
    tmp_path: Path,
) -> None:
    mark = tmp_path / "mark"

    async def main() -> list[dict[str, Any]]:
        runner = _runner(tmp_path, Adapter(mark, text_arg=3), Spool())
        runner.prefetch()
        await kit.until(lambda: _planned(runner))
        first = await runner.run_begun("t1", "hello")
        again = await runner.run_begun("t1", "hello")
        assert not runner.idle  # running: the gate says busy
        await kit.until(lambda: runner.running is None)
        after = await runner.run_begun("t1", "hello")  # it ran here: never again
        return [first, again, after]

    assert asyncio.run(main()) == [
        {"started": True},
        {"started": True, "repeated": True},
        {"started": True, "repeated": True},
    ]
    assert mark.read_text() == "hello "


# -- idle: what the gate says of a stream session -------------------------------------------------


@pytest.mark.parametrize("case", ["fresh", "running", "preparing", "closing", "undelivered"])
def test_the_node_may_begin_a_turn_only_while_the_runner_is_idle(tmp_path: Path, case: str) -> None:
    """No plan is needed any more: a turn begun without one asks for its command."""

    async def main() -> bool:
        peer, spool = Adapter(tmp_path / "mark", sleep=0.3), Spool()
        runner = _runner(tmp_path, peer, spool)
        begun: asyncio.Future[dict[str, Any]] | None = None
        if case == "running":
            await runner.run_begun("t1", "x")
        elif case == "preparing":
            peer.release.clear()
            begun = asyncio.ensure_future(runner.run_begun("t1", "x"))
            await kit.until(lambda: runner.preparing)
        elif case == "closing":
            await runner.stop()
        elif case == "undelivered":
            spool.delivered.clear()
            spool.put({"t": "line"})
        idle = runner.idle
        peer.release.set()
        if begun is not None:
            await begun
        await runner.stop()
        return idle

    assert asyncio.run(main()) is (case == "fresh")


def test_the_gate_is_asked_again_once_an_ended_turn_is_delivered(tmp_path: Path) -> None:
    async def main() -> list[tuple[bool, bool]]:
        spool = Spool()
        runner = _runner(tmp_path, Adapter(tmp_path / "mark"), spool)
        seen: list[tuple[bool, bool]] = []
        runner.on_idle = lambda: seen.append((spool.delivered.is_set(), runner.idle))
        spool.delivered.clear()
        await runner.run_begun("t1", "x")
        await _ran(runner)
        await asyncio.sleep(0.05)
        assert (True, True) not in seen
        spool.delivered.set()
        await kit.until(lambda: (True, True) in seen)
        return seen

    assert asyncio.run(main())[-1] == (True, True)


# -- the next turn's plan, asked ahead ------------------------------------------------------------


def test_a_turn_with_its_plan_asked_ahead_asks_nothing_more(tmp_path: Path) -> None:
    """The plan asked at launch runs the turn's own text, and the next turn's plan is asked once
    this one has ended."""
    mark = tmp_path / "mark"

    async def main() -> Adapter:
        peer = Adapter(mark, text_arg=3)
        runner = _runner(tmp_path, peer, Spool())
        runner.prefetch()
        await kit.until(lambda: _planned(runner))
        await runner.run_begun("t1", "-n 'one'")
        await _ran(runner)
        assert mark.read_text() == "-n 'one' "
        await kit.until(lambda: _planned(runner))
        await runner.run_begun("t2", "two")
        await _ran(runner)
        await kit.until(lambda: _planned(runner))
        return peer

    assert asyncio.run(main()).asked == [("adapter.turn", None)] * 3
    assert mark.read_text() == "-n 'one' two "


async def _unanswered() -> TurnPlan:
    """A plan request that never gets its answer."""
    await asyncio.Event().wait()
    return {}


@pytest.mark.parametrize(
    "why", ["another-session", "no-text-arg", "not-answered", "stale", "refused"]
)
def test_a_plan_that_does_not_hold_is_asked_again_with_the_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    mark = tmp_path / "mark"

    async def main() -> Adapter:
        peer = Adapter(
            mark,
            text_arg=None if why == "no-text-arg" else 3,
            fail=("not-found",) if why == "refused" else (),
        )
        runner = _runner(tmp_path, peer, Spool())
        if why == "not-answered":
            never = asyncio.get_running_loop().create_task(_unanswered())
            runner._plan = (runner._plan_key(), asyncio.get_running_loop().time(), never)
        else:
            runner.prefetch()
            await kit.until(lambda: _planned(runner))
        if why == "another-session":
            runner.spec["provider_session"] = "s2"  # learned since the plan was asked
        if why == "stale":
            monkeypatch.setattr(turns, "PLAN_FRESH_S", -1.0)
        await runner.run_begun("t1", "one")
        await _ran(runner)
        return peer

    calls = asyncio.run(main()).asked
    assert ("adapter.turn", "one") in calls
    assert mark.read_text() == "one "


@pytest.mark.parametrize(
    ("fail", "refused"),
    [
        (("not-found",), "not-found"),  # no conversation to resume: no retry changes it
        (("bad-request",), "bad-request"),  # no headless mode
        (("unavailable",), None),  # the adapter host away: the turn asks again
        (("timeout",), None),
        ((), None),
    ],
)
def test_a_refused_plan_refuses_the_next_turns_through_the_gate(
    tmp_path: Path, fail: tuple[str, ...], refused: str | None
) -> None:
    async def main() -> tuple[str | None, int, str | None]:
        runner = _runner(tmp_path, Adapter(tmp_path / "mark", text_arg=3, fail=fail), Spool())
        told: list[int] = []
        runner.on_idle = lambda: told.append(1)
        runner.prefetch()
        await kit.until(lambda: bool(told))
        code = runner.refusal.code if runner.refusal else None
        runner.prefetch()  # asked again (the next launch, a turn's end): it holds now
        await kit.until(lambda: len(told) == 2)
        return code, len(told), runner.refusal.code if runner.refusal else None

    assert asyncio.run(main()) == (refused, 2, None)


def test_a_plan_replaced_before_its_answer_says_nothing(tmp_path: Path) -> None:
    async def main() -> list[int]:
        peer = Adapter(tmp_path / "mark", text_arg=3)
        peer.release.clear()
        runner = _runner(tmp_path, peer, Spool())
        told: list[int] = []
        runner.on_idle = lambda: told.append(1)
        runner.prefetch()
        await asyncio.sleep(0.01)
        runner.prefetch()  # the first is cancelled
        peer.release.set()
        await kit.until(lambda: _planned(runner))
        await asyncio.sleep(0.01)
        return told

    assert asyncio.run(main()) == [1]


# -- turns a dying node began ---------------------------------------------------------------------


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

    async def main() -> None:
        peer = Adapter(mark, text_arg=3)
        peer.latest = latest
        runner = _runner(tmp_path, peer, Spool())
        await runner.catch_up(1)
        await kit.until(lambda: runner.running is None)
        if runner._task is not None:
            await _ran(runner)

    asyncio.run(main())
    assert mark.exists() is runs


@pytest.mark.parametrize(
    ("turn", "started"),
    [
        ({"id": "t9", "record": "r1", "state": "running", "generation": 1, "text": "x"}, True),
        ({"id": "t9", "record": "r1", "state": "completed", "generation": 1, "text": "x"}, False),
        ({"id": "t9", "record": "r1", "state": "running", "generation": 2, "text": "x"}, False),
        ({"id": "t9", "record": "r2", "state": "running", "generation": 1, "text": "x"}, False),
        ({"id": "t9", "state": "running", "generation": 1, "text": "x"}, False),
        (None, False),
    ],
    ids=["runs", "ended", "another-generation", "another-record", "no-record", "unknown"],
)
def test_a_repeated_operation_runs_a_node_turn_nobody_handed_over(
    tmp_path: Path, turn: dict[str, Any] | None, started: bool
) -> None:
    """Only this record's: an operation id repeated on another record names a turn that is not
    this supervisor's to run (the node hands nothing over then; this is the second fence)."""
    mark = tmp_path / "mark"

    async def main() -> list[dict[str, Any]]:
        peer = Adapter(mark)
        peer.turn = turn
        runner = _runner(tmp_path, peer, Spool())
        first = await runner.adopt("t9", 1)
        await kit.until(lambda: runner.running is None)
        if runner._task is not None:
            await _ran(runner)
        return [first, await runner.adopt("t9", 1)]

    first, again = asyncio.run(main())
    assert first == {"started": started} and mark.exists() is started
    if started:
        assert again == {"started": True, "repeated": True}  # it ran here: never again
