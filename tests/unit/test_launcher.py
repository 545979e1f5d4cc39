"""Starting supervisors and judging their liveness (roost.actors.node.launcher): the zygote
first, a spec in doubt taken back, start times as psutil gives them."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from roost.actors.node import launcher as launching
from tests import kit
from tests.unit.test_zygote_client import asked, fake


def test_a_spec_in_doubt_is_taken_back_unless_a_supervisor_took_it(tmp_path: Path) -> None:
    spec = tmp_path / "spec-1.msgpack"
    spec.write_bytes(b"spec")
    back = launching.take_back(spec)
    assert back is not None and back.read_bytes() == b"spec" and not spec.exists()
    assert launching.take_back(spec) is None  # gone: a supervisor has read and removed it


def test_the_launcher_uses_the_zygote_and_takes_back_a_spec_in_doubt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[Path] = []

    def popen(path: Path) -> int:  # the usual start, recorded instead of run
        started.append(path)
        return 77

    async def go() -> list[int | None]:
        ok = launching.Launcher(tmp_path, fake("ok", tmp_path / "log"))
        mute = launching.Launcher(tmp_path, fake("mute", tmp_path / "log2"))
        monkeypatch.setattr(mute, "_popen", popen)
        try:
            spec = kit.launch_spec(record_id="r", instance_id="i1")
            return [await ok.start(ok.prepare(spec)), await mute.start(mute.prepare(spec))]
        finally:
            await ok.close()
            await mute.close()

    assert asyncio.run(go()) == [4000, 77]
    (asked_path,) = asked(tmp_path / "log2")
    assert not os.path.exists(asked_path)  # taken back: no supervisor forked for it can read it
    assert started and started[0].read_bytes() and started[0] != Path(asked_path)


def test_start_times_match_psutil_and_a_zombie_or_another_process_is_not_running() -> None:
    me = psutil.Process()
    # the boot time in whole seconds may have stepped by one between the two reads
    assert launching.process_started(me.pid) == pytest.approx(me.create_time(), abs=1.01)
    assert launching.still_running(me.pid, me.create_time())
    assert launching.still_running(me.pid, me.create_time() + 1.0)  # as after a btime step
    assert not launching.still_running(me.pid, me.create_time() - 5)  # a reused pid
    assert not launching.still_running(None, None)
    child = subprocess.Popen([sys.executable, "-c", "pass"])  # exits; not reaped: a zombie
    deadline = time.monotonic() + 30
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    assert not launching.still_running(child.pid, None)
    child.wait()
    assert launching.process_started(child.pid) is None
