"""roost/cli/logs.py: log lines made readable, and a file followed across a rotation."""

from __future__ import annotations

import json
import os
from pathlib import Path

from roost.adapters.base import KEYS
from roost.cli.logs import Tail, last_lines, render, rotated
from roost.wire.protocol import KEY_NAMES


def line(**doc: object) -> str:
    return json.dumps(doc)


def test_a_line_reads_time_level_actor_event_and_fields() -> None:
    text = render(
        line(
            event="node-serving",
            level="info",
            timestamp="2026-12-01T11:12:13.456789Z",
            actor="node",
            pid=4,
            node_id="lab-1",
            note="two words",
        ),
        with_actor=True,
    )
    assert (
        text == '2026-12-01 11:12:13.456 INFO    [node] node-serving node_id=lab-1 note="two words"'
    )
    assert render("Traceback (most recent call last):", with_actor=False).startswith("Traceback")
    failed = render(line(event="x", level="error", exception="Traceback\n  boom"), with_actor=False)
    assert failed.endswith("\n    Traceback\n      boom")


def test_a_tail_reads_appended_lines_and_a_rotated_file_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text("a\nb\nc\n")
    tail = Tail(path)
    assert last_lines(tail, 2) == ["b", "c"]
    with path.open("a") as fh:
        fh.write("d\npart")
    assert tail.read() == ["d"]
    with path.open("a") as fh:
        fh.write("ial\n")
    assert tail.read() == ["partial"]
    os.replace(path, tmp_path / "x.log.1")
    path.write_text("new\n")
    assert tail.read() == ["new"]
    path.write_text("")  # truncated in place (copytruncate), seen before more is written
    assert tail.read() == []
    with path.open("a") as fh:
        fh.write("again\n")
    assert tail.read() == ["again"]


def test_a_tail_of_a_file_not_there_yet_waits_for_it(tmp_path: Path) -> None:
    tail = Tail(tmp_path / "later.log")
    assert tail.read() == []
    (tmp_path / "later.log").write_text("first\n")
    assert tail.read() == ["first"]


def test_the_clis_key_names_are_the_adapters_keys() -> None:
    assert sorted(KEY_NAMES) == sorted(KEYS)


def test_last_lines_reach_into_the_rotated_files_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "node.log"
    (tmp_path / "node.log.2").write_text("a\nb\n")
    (tmp_path / "node.log.1").write_text("c\nd\n")
    path.write_text("e\n")
    assert rotated(path) == [tmp_path / "node.log.2", tmp_path / "node.log.1"]
    assert last_lines(Tail(path), 4) == ["b", "c", "d", "e"]
    assert last_lines(Tail(path), 10) == ["a", "b", "c", "d", "e"]
    assert last_lines(Tail(path), 1) == ["e"]
    tail = Tail(path)
    assert last_lines(tail, 0) == []
    with path.open("a") as fh:
        fh.write("f\n")
    assert tail.read() == ["f"]  # it continues after the current file's end


def test_a_tail_reads_what_was_written_just_before_a_rotation(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text("one\n")
    tail = Tail(path)
    assert tail.read() == ["one"]
    with path.open("a") as fh:
        fh.write("two\nthr")  # appended, then rotated before the tail looked again
    os.replace(path, tmp_path / "x.log.1")
    path.write_text("four\n")
    assert tail.read() == ["two", "thr", "four"]
