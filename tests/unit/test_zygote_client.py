"""The node's handle on its fork server (roost.actors.node.zygote) and the launcher's use of it
(roost.actors.node.launcher), against stand-in zygotes that follow its JSON-lines exchange."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from roost.actors.node.zygote import InDoubt, Unavailable, Zygote, wanted
from roost.actors.runtime.children import RestartPolicy

# ok: answers every request with a pid; stale: the first request with stale, then exits;
# mute: takes a request and dies without an answer; broken: exits before ready; each one
# appends the spec paths it was asked for to LOG.
FAKE = r"""
import json, sys
mode, log = sys.argv[1], sys.argv[2]
if mode == "broken":
    sys.exit(3)
print(json.dumps({"ready": {"pid": 0, "roost": "test"}}), flush=True)
for n, line in enumerate(sys.stdin):
    with open(log, "a") as fh:
        fh.write(json.loads(line)["spec"] + "\n")
    if mode == "mute":
        sys.exit(1)
    if mode == "stale":
        print(json.dumps({"stale": "changed on disk: x.py"}), flush=True)
        sys.exit(0)
    print(json.dumps({"pid": 4000 + n}), flush=True)
"""


def fake(
    mode: str,
    log: Path,
    policy: RestartPolicy | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Zygote:
    return Zygote([sys.executable, "-c", FAKE, mode, str(log)], policy, clock)


def asked(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_one_zygote_answers_every_fork_in_turn(tmp_path: Path) -> None:
    async def go() -> tuple[list[int], int | None]:
        z = fake("ok", tmp_path / "log")
        assert z.status() == {"kind": "zygote", "health": "idle", "pid": None, "starts": 0}
        pids = [await z.fork(tmp_path / f"spec{i}") for i in range(3)]
        first = z.pid
        assert z.status() == {"kind": "zygote", "health": "running", "pid": first, "starts": 1}
        await z.close()
        assert z.status()["health"] == "idle"
        return pids, first

    pids, first = asyncio.run(go())
    assert pids == [4000, 4001, 4002]
    assert asked(tmp_path / "log") == [str(tmp_path / f"spec{i}") for i in range(3)]
    assert first is not None and not psutil.pid_exists(first)  # closed: its input ended


def test_forks_asked_at_once_are_answered_each_its_own(tmp_path: Path) -> None:
    async def go() -> list[int]:
        z = fake("ok", tmp_path / "log")
        try:
            return list(await asyncio.gather(*(z.fork(tmp_path / f"s{i}") for i in range(8))))
        finally:
            await z.close()

    assert sorted(asyncio.run(go())) == list(range(4000, 4008))


def test_stale_code_forks_nothing_and_the_next_launch_gets_a_new_zygote(tmp_path: Path) -> None:
    async def go() -> tuple[str, int, int]:
        z = fake("stale", tmp_path / "log")
        with pytest.raises(Unavailable) as stale:
            await z.fork(tmp_path / "a")
        assert not isinstance(stale.value, InDoubt)  # it said no: nothing was forked
        with pytest.raises(Unavailable):
            await z.fork(tmp_path / "b")
        await z.close()
        return str(stale.value), len(z.starts), len(asked(tmp_path / "log"))

    why, starts, requests = asyncio.run(go())
    assert "x.py" in why
    assert (starts, requests) == (2, 2)


def test_a_zygote_dying_with_the_request_leaves_the_launch_in_doubt(tmp_path: Path) -> None:
    async def go() -> None:
        z = fake("mute", tmp_path / "log")
        with pytest.raises(InDoubt):
            await z.fork(tmp_path / "a")
        await z.close()

    asyncio.run(go())
    assert asked(tmp_path / "log") == [str(tmp_path / "a")]


def test_a_zygote_that_keeps_failing_is_not_started_again_within_the_window(
    tmp_path: Path,
) -> None:
    now = [100.0]
    policy = RestartPolicy(max_restarts=2, window=30.0)

    async def go() -> list[int]:
        z = fake("broken", tmp_path / "log", policy=policy, clock=lambda: now[0])
        with pytest.raises(Unavailable):
            await z.fork(tmp_path / "a")
        with pytest.raises(Unavailable):  # within the back-off: not started again
            await z.fork(tmp_path / "a")
        assert len(z.starts) == 1
        for _ in range(3):
            now[0] += 1.0  # past each back-off
            with pytest.raises(Unavailable):
                await z.fork(tmp_path / "a")
        tried = len(z.starts)
        assert z.status()["health"] == "failing"
        now[0] += 31.0  # the window has passed: it is tried again
        with pytest.raises(Unavailable):
            await z.fork(tmp_path / "a")
        return [tried, len(z.starts)]

    assert asyncio.run(go()) == [2, 3]


def test_the_fork_server_is_on_by_default_off_on_request_and_never_on_windows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert wanted({}) is (sys.platform != "win32")
    assert wanted({"ROOST_ZYGOTE": "0"}) is False
    monkeypatch.setattr(sys, "platform", "win32")
    assert wanted({}) is False
