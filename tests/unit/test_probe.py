"""The supervisor's process probe (supervisor/probe.py) walks down the agent's own tree: the same
descendants psutil finds by reading every process, without reading every process."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from roost.actors.supervisor import probe

TREE = "sleep 30 & (sleep 30 & sleep 30 & wait) & wait"


@pytest.fixture
def tree() -> Iterator[psutil.Process]:
    proc = subprocess.Popen(["bash", "-c", TREE])
    root = psutil.Process(proc.pid)
    try:
        deadline = time.monotonic() + 10
        while len(root.children(recursive=True)) < 4:  # sleep, subshell, its two sleeps
            assert time.monotonic() < deadline, "the tree did not start in time"
            time.sleep(0.01)
        yield root
    finally:
        for child in root.children(recursive=True):
            child.kill()
        proc.kill()
        proc.wait(10)


@pytest.mark.skipif(sys.platform != "linux", reason="the walk reads Linux's /proc")
def test_the_walk_finds_what_psutil_finds(tree: psutil.Process) -> None:
    walked = [p.pid for p in probe.descendants_of(tree)]
    assert sorted(walked) == sorted(p.pid for p in tree.children(recursive=True))
    assert len(walked) == len(set(walked)) == 4


@pytest.mark.skipif(sys.platform != "linux", reason="the walk reads Linux's /proc")
def test_the_walk_reads_no_other_process(
    tree: psutil.Process, monkeypatch: pytest.MonkeyPatch
) -> None:
    def every_process(*_: object) -> None:
        raise AssertionError("read every process on the machine")

    monkeypatch.setattr(psutil, "_ppid_map", every_process)
    monkeypatch.setattr(psutil, "process_iter", every_process)
    assert len(probe.descendants_of(tree)) == 4
    evidence = probe.sample(tree.pid, None)
    assert evidence.agent is not None and len(evidence.descendants) == 4


def test_without_children_files_it_falls_back_to_psutil(
    tree: psutil.Process, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe, "_children_of", lambda pid: None)
    assert sorted(p.pid for p in probe.descendants_of(tree)) == sorted(
        p.pid for p in tree.children(recursive=True)
    )
