"""``roost logs`` over rotated logs (process.py LogFile rotates at a size): ``--lines`` reaches
into the rotated files, and ``--follow`` loses no line across rotations, including the lines
written just before one."""

from __future__ import annotations

import json
from pathlib import Path

from roost.actors.runtime.process import LogBound, LogFile
from tests.e2e.conftest import JsonLines, Node, wait_for

BOUND = LogBound(4000, 2)


def _write(log: LogFile, numbers: range) -> None:
    for n in numbers:
        doc = {"event": "tick", "n": n, "level": "info", "timestamp": f"2026-01-01T00:00:{n:05d}"}
        print(json.dumps(doc), file=log, flush=True)


def _logs(node: Node) -> Path:
    logs = node.state_dir / "logs"
    logs.mkdir(parents=True, mode=0o700)
    return logs


def test_logs_lines_reach_into_the_rotated_files(node: Node) -> None:
    log = LogFile(_logs(node) / "state.log", BOUND)
    _write(log, range(200))  # ~16 KB: the current file and two rotated ones, the rest dropped
    assert (node.state_dir / "logs" / "state.log.2").exists()
    in_current = len((node.state_dir / "logs" / "state.log").read_text().splitlines())
    lines = node.run("logs", "--lines", str(in_current + 10))["lines"]
    assert [x["n"] for x in lines] == list(range(200 - in_current - 10, 200))


def test_logs_follow_loses_no_line_across_rotations(node: Node) -> None:
    log = LogFile(_logs(node) / "node.log", BOUND)
    _write(log, range(1))
    follower = JsonLines(node.env, "logs", "--follow", "--lines", "1")
    seen: list[int] = []
    try:
        assert follower.get()["n"] == 0
        seen.append(0)
        first = 1
        for _ in range(3):  # each round crosses the bound: lines before and after a rotation
            upto = first + 60
            _write(log, range(first, upto))

            def caught_up(upto: int = upto) -> bool:
                seen.extend(x["n"] for x in follower.drain(0.1))
                return bool(seen) and seen[-1] == upto - 1

            wait_for(caught_up, 10, f"line {upto - 1} followed")
            first = upto
    finally:
        follower.close()
    assert seen == list(range(first))
    assert (node.state_dir / "logs" / "node.log.2").exists()  # it did rotate, twice or more
