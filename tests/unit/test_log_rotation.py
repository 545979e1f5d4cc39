"""roost/actors/runtime/process.py LogFile: logs rotate at a size and stay bounded in total."""

from __future__ import annotations

import json
from pathlib import Path

from roost.actors.runtime.process import NODE_LOG, SUPERVISOR_LOG, LogBound, LogFile

BOUND = LogBound(2000, 2)


def _write(log: LogFile, first: int, count: int) -> None:
    for n in range(first, first + count):
        print(json.dumps({"event": "tick", "n": n, "pad": "x" * 40}), file=log, flush=True)


def _numbers(path: Path) -> list[int]:
    return [json.loads(line)["n"] for line in path.read_text().splitlines()]


def test_a_log_past_its_bound_rotates_and_stays_bounded_in_total(tmp_path: Path) -> None:
    path = tmp_path / "node.log"
    log = LogFile(path, BOUND)
    _write(log, 0, 1000)  # ~70 KB through a 2 KB bound
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["node.log", "node.log.1", "node.log.2"]
    line = 80
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= BOUND.total + line
    for old in ("node.log.1", "node.log.2"):
        assert BOUND.max_bytes <= (tmp_path / old).stat().st_size <= BOUND.max_bytes + line
    kept = _numbers(tmp_path / "node.log.2") + _numbers(tmp_path / "node.log.1") + _numbers(path)
    assert kept == list(range(1000 - len(kept), 1000))  # the newest lines, none lost between


def test_a_writer_that_finds_the_file_rotated_by_another_follows_it(tmp_path: Path) -> None:
    path = tmp_path / "supervisor.log"
    first, second = LogFile(path, BOUND), LogFile(path, BOUND)
    count = 0
    while path.stat().st_size < BOUND.max_bytes:  # up to the bound: first's next line rotates
        _write(first, count, 1)
        count += 1
    _write(first, count, 1)
    _write(second, count + 1, 1)  # its descriptor is on the rotated file: it reopens instead
    assert sorted(p.name for p in tmp_path.iterdir()) == ["supervisor.log", "supervisor.log.1"]
    assert _numbers(path) == [count, count + 1]
    assert _numbers(tmp_path / "supervisor.log.1") == list(range(count))


def test_the_bounds_are_what_the_docs_say() -> None:
    assert (NODE_LOG.max_bytes, NODE_LOG.keep) == (10 * 1024 * 1024, 3)
    assert (SUPERVISOR_LOG.max_bytes, SUPERVISOR_LOG.keep) == (2 * 1024 * 1024, 2)
    docs = (Path(__file__).parents[2] / "docs" / "OPERATIONS.md").read_text()
    assert "10 MiB" in docs and "2 MiB" in docs
