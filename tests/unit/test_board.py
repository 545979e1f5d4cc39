"""The dashboard's model (roost/cli/board.py): marks, activity, filter and rows, as plain data."""

from __future__ import annotations

import os
from typing import Any

from roost.cli.board import Board, ago, short_path


def rec(rid: str, state: str = "live", **kw: Any) -> dict[str, Any]:
    base = {
        "id": rid,
        "name": f"n-{rid}",
        "provider": "echo",
        "mode": "pty",
        "cwd": "/srv/app",
        "state": state,
        "activity": "ready",
        "attention": None,
        "created": 100.0,
        "updated": 110.0,
    }
    return {**base, **kw}


def cells(board: Board, rid: str, now: float = 200.0, node: str = "") -> list[str]:
    return [str(cell) for cell in board.row((node, rid), now)]


def test_a_record_that_enters_attention_is_marked_once_until_seen() -> None:
    board = Board()
    board.load([rec("r1"), rec("r2", "attention", attention="trust")])
    assert cells(board, "r2")[0] == ""  # already waiting when the dashboard started: not new
    assert board.update(rec("r1", "attention", activity="attention", attention="permission"))
    row = cells(board, "r1")
    assert row[0] == "!" and row[5] == "attention (permission)" and row[6] == "waiting"
    assert not board.update(rec("r1", "attention", activity="attention", attention="permission"))
    board.seen(("", "r1"))
    assert cells(board, "r1")[0] == ""
    assert board.update(rec("r1", "attention", attention="login"))  # another reason: new again
    assert not board.update(rec("r1", "live"))
    assert cells(board, "r1")[0] == ""  # no longer waiting: no mark


def test_a_record_first_seen_in_attention_is_new() -> None:
    board = Board()
    board.load([])
    assert board.update(rec("r9", "attention", attention="trust"))
    assert cells(board, "r9")[0] == "!"


def test_activity_reads_the_classification_or_the_stream_turn() -> None:
    board = Board()
    board.load([rec("p", activity="busy"), rec("s", mode="stream", activity=None)])
    board.load([rec("d", "dormant", activity="ready")])
    assert cells(board, "p")[6] == "working" and cells(board, "d")[6] == "-"
    assert cells(board, "s")[6] == "ready"
    start = {"kind": "session.input", "ts": 150.0, "data": {"input": "turn", "turn": "t1"}}
    board.touch(("", "s"), start)
    assert cells(board, "s")[6] == "working"
    assert cells(board, "s")[9] == "50s"  # last activity: the newest event about it
    board.touch(("", "s"), {"kind": "session.turn", "ts": 160.0, "data": {"status": "completed"}})
    assert cells(board, "s")[6] == "ready" and cells(board, "s", now=220.0)[9] == "1m"


def test_the_filter_keeps_the_rows_every_word_matches() -> None:
    board = Board()
    board.load([rec("r1", name="web"), rec("r2", name="api", provider="codex", created=50.0)])
    board.load([rec("r3", "dormant", name="docs", cwd="/srv/docs")])
    assert board.visible() == [("", "r2"), ("", "r1"), ("", "r3")]  # by creation
    board.filter = "CODEX"
    assert board.visible() == [("", "r2")]
    board.filter = "srv dormant"
    assert board.visible() == [("", "r3")]
    board.filter = "nothing-like-it"
    assert board.visible() == []


def test_through_a_hub_rows_lead_with_the_node_and_keys_tell_nodes_apart() -> None:
    board = Board(hub=True)
    board.load([rec("r1", node="lab-b"), rec("r1", node="lab-a", name="other")])
    assert board.visible() == [("lab-a", "r1"), ("lab-b", "r1")]
    assert board.columns()[0] == "NODE" and cells(board, "r1", node="lab-a")[:3] == [
        "lab-a",
        "",
        "other",
    ]
    board.remove(("lab-a", "r1"))
    assert board.visible() == [("lab-b", "r1")]


def test_ages_and_paths_fit_their_columns() -> None:
    assert [ago(s) for s in (0, 59.9, 60, 3599, 3600, 86400 * 3, -5)] == [
        "0s",
        "59s",
        "1m",
        "59m",
        "1h",
        "3d",
        "0s",
    ]
    home = os.path.expanduser("~")
    assert short_path(os.path.join(home, "src", "app")) == "~/src/app"
    long = "/srv/" + "x" * 40 + "/app"
    assert short_path(long) == "…" + long[-27:] and len(short_path(long)) == 28
