"""Every long-lived task of an actor process has an owner (runtime.process): one that crashes is
logged at once (``task-crashed``, its name, its error and traceback) and either ends the process
with ``CRASHED``, for its parent to start it again, or is started again within a restart limit;
none dies while the rest of the process serves on without it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import structlog

from roost.actors.runtime.children import RestartPolicy
from roost.actors.runtime.process import CRASHED, TaskCrashed, Tasks, logged_crash, run_until

QUICK = RestartPolicy(max_restarts=2, window=60.0, backoff_base=0.001, backoff_max=0.01)


async def _forever(ended: list[str]) -> None:
    try:
        await asyncio.get_running_loop().create_future()
    finally:
        ended.append("forever")


async def _crashes() -> None:
    await asyncio.sleep(0)
    raise RuntimeError("the writer broke")


def test_a_crashed_task_ends_run_until_logged_and_the_others_are_cancelled() -> None:
    async def main() -> None:
        stop = asyncio.Event()
        ended: list[str] = []
        with structlog.testing.capture_logs() as logs:
            try:
                await asyncio.wait_for(run_until(stop, _forever(ended), _crashes()), 10)
            except TaskCrashed as crash:
                assert crash.name == "_crashes" and isinstance(crash.error, RuntimeError)
            else:
                raise AssertionError("run_until returned although a task crashed")
        assert stop.is_set() and ended == ["forever"]  # the others were cancelled and awaited
        [line] = [e for e in logs if e["event"] == "task-crashed"]
        assert line["task"] == "_crashes" and line["log_level"] == "error"
        assert line["error"] == "RuntimeError('the writer broke')"
        assert isinstance(line["exc_info"], RuntimeError)  # the traceback goes to the log

    asyncio.run(main())


def test_run_until_stop_and_a_task_that_returns_are_no_crash() -> None:
    async def main() -> None:
        stop = asyncio.Event()
        ended: list[str] = []

        returned = asyncio.Event()

        async def done_at_once() -> None:  # a feature that is off, a child given up on
            returned.set()

        async def stopper() -> None:  # SIGTERM, node.shutdown
            await returned.wait()
            stop.set()

        with structlog.testing.capture_logs() as logs:
            await asyncio.wait_for(run_until(stop, done_at_once(), _forever(ended), stopper()), 10)
        assert ended == ["forever"] and not [e for e in logs if e["event"] == "task-crashed"]

    asyncio.run(main())


def test_a_kept_task_is_started_again_each_crash_until_its_limit() -> None:
    async def main() -> None:
        runs: list[int] = []
        crashes: list[TaskCrashed] = []
        limit = asyncio.Event()

        async def flaky() -> None:
            runs.append(len(runs))
            raise ValueError(f"run {len(runs)}")

        def on_crash(crash: TaskCrashed) -> None:
            crashes.append(crash)
            limit.set()

        tasks = Tasks(on_crash=on_crash)
        with structlog.testing.capture_logs() as logs:
            tasks.keep(flaky, "outbox", QUICK)
            await asyncio.wait_for(limit.wait(), 10)
        await tasks.cancel()
        assert runs == [0, 1, 2]  # the first run and two restarts, then the limit
        lines = [e for e in logs if e["event"] == "task-crashed"]
        assert [e["task"] for e in lines] == ["outbox"] * 3
        assert [e["error"] for e in lines] == [
            "ValueError('run 1')",
            "ValueError('run 2')",
            "ValueError('run 3')",
        ]
        assert lines[-1]["restart_in"] is None and all(e["restart_in"] for e in lines[:-1])
        [crash] = crashes
        assert tasks.failure is crash and crash.name == "outbox"

    asyncio.run(main())


def test_a_kept_task_that_recovers_is_no_failure() -> None:
    async def main() -> None:
        runs: list[int] = []
        tasks = Tasks(on_crash=lambda crash: None)

        async def once_broken() -> None:
            runs.append(1)
            if len(runs) == 1:
                raise OSError("too many open files")

        with structlog.testing.capture_logs() as logs:
            task = tasks.keep(once_broken, "link", QUICK)
            await asyncio.wait_for(task, 10)
        assert len(runs) == 2 and tasks.failure is None
        [line] = [e for e in logs if e["event"] == "task-crashed"]
        assert line["task"] == "link" and line["restart_in"] == QUICK.backoff_base

    asyncio.run(main())


SCRIPT = """
import asyncio, sys
from pathlib import Path
from roost.actors.runtime.process import run_until, run_until_stopped, setup_logging

async def serve_reads():
    try:
        await asyncio.get_running_loop().create_future()
    finally:
        print("reads-stopped", flush=True)

async def writer():
    await asyncio.sleep(0.05)
    raise RuntimeError("disk on fire")

setup_logging(Path(sys.argv[1]), "test")
run_until_stopped(lambda stop: run_until(stop, serve_reads(), writer()))
"""


def test_a_process_whose_task_crashed_exits_non_zero_with_the_crash_in_its_log(
    tmp_path: Path,
) -> None:
    """The process as a parent sees it: it ends by itself (rather than serve on without its
    writer), with ``CRASHED``, and its log says which task and why."""
    log_file = tmp_path / "actor.log"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), str(log_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == CRASHED, err
    assert out.split() == ["reads-stopped"]
    lines: list[dict[str, Any]] = [json.loads(x) for x in log_file.read_text().splitlines()]
    [line] = [x for x in lines if x["event"] == "task-crashed"]
    assert line["task"] == "writer" and line["error"] == "RuntimeError('disk on fire')"
    assert "Traceback" in line["exception"] and "disk on fire" in line["exception"]


def test_a_short_lived_tasks_crash_is_logged_not_left_unretrieved() -> None:
    async def main() -> list[MutableMapping[str, Any]]:
        with structlog.testing.capture_logs() as logs:
            crashed = asyncio.create_task(_crashes(), name="hand-over r1")
            crashed.add_done_callback(logged_crash)
            fine = asyncio.create_task(asyncio.sleep(0), name="fine")
            fine.add_done_callback(logged_crash)
            cancelled = asyncio.create_task(asyncio.sleep(10), name="cancelled")
            cancelled.add_done_callback(logged_crash)
            cancelled.cancel()
            await asyncio.wait({crashed, fine, cancelled})
            await asyncio.sleep(0)  # the done callbacks run
        return logs

    logs = asyncio.run(main())
    assert [(e["event"], e["task"]) for e in logs] == [("task-crashed", "hand-over r1")]
    assert "the writer broke" in logs[0]["error"]
