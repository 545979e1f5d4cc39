"""The dashboard's model (roost/cli/board.py): marks, activity, filter and rows, as plain data."""

from __future__ import annotations

import os
from typing import Any

import pytest

from roost.cli.board import PAD, Board, ago, fit, plain, short_path, usage_cell
from roost.cli.tui_forms import spawn_body
from roost.wire.errors import RoostError


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


def widths(layout: list[tuple[str, int]]) -> int:
    return sum(w + PAD for _, w in layout)


def test_columns_fit_their_content_and_give_way_in_order_keeping_the_state_whole() -> None:
    board = Board()
    board.load([rec("r1", name="web"), rec("r2", "attention", attention="permission")])
    board.update(rec("r3", "attention", name="x" * 40, attention="permission"))
    keys = board.visible()
    wide = board.layout(keys, 200.0, 200)
    assert [label for label, _ in wide] == list(board.columns())
    assert dict(wide)["STATE"] == len("attention (permission)") and dict(wide)[""] == 1
    assert dict(wide)["NAME"] == 24  # capped: the rest is cut with …
    narrow = board.layout(keys, 200.0, 78)
    assert widths(narrow) <= 78
    assert [label for label, _ in narrow] == [  # CWD, then ID, gave way
        "",
        "NAME",
        "PROVIDER",
        "MODE",
        "STATE",
        "ACTIVITY",
        "AGE",
        "LAST",
    ]
    assert dict(narrow)["STATE"] == len("attention (permission)")
    smaller = board.layout(keys, 200.0, 60)
    assert [label for label, _ in smaller] == ["", "NAME", "STATE", "ACTIVITY", "LAST"]
    tiny = board.layout(keys, 200.0, 40)
    assert [label for label, _ in tiny] == ["", "NAME", "STATE"]  # the state, whole, even here
    row = [str(c) for c in board.cells(("", "r3"), 200.0, narrow)]
    assert row[0] == "!" and row[1].endswith("…") and row[4] == "attention (permission)"


def test_through_a_hub_the_node_column_gives_way_after_the_others() -> None:
    board = Board(hub=True)
    board.load([rec("r1", node="lab-a")])
    labels = [label for label, _ in board.layout(board.visible(), 200.0, 36)]
    assert labels == ["NODE", "", "NAME", "STATE", "ACTIVITY"]


def test_a_node_that_does_not_answer_leaves_active_states_unknown() -> None:
    board = Board()
    board.load([rec("r1"), rec("r2", "dormant")])
    board.stale = True
    assert cells(board, "r1")[5:7] == ["live?", "?"]
    assert cells(board, "r2")[5] == "dormant"  # nothing can move it while the node is away
    board.stale = False
    assert cells(board, "r1")[5:7] == ["live", "ready"]


def test_names_are_drawn_at_the_width_they_are_counted() -> None:
    assert plain("\u2764\ufe0f web") == "\u2764 web"  # no variation selector
    assert plain("a\u200db") == "ab" and plain("tab\there") == "tab here"
    assert plain("e\u0301") == "\u00e9"  # combined, not dropped
    assert fit("abcdef", 4) == "abc…" and fit("abc", 4) == "abc"


def test_the_spawn_form_becomes_a_spawn_body_or_says_which_field_is_wrong() -> None:
    values = {"provider": "echo ", "name": "", "cwd": "/srv", "mode": "", "worktree": "+"}
    body = spawn_body({**values, "env": "A=1 B=x=y", "size": "30x90"}, {"A": "0", "C": "3"})
    assert body == {
        "provider": "echo",
        "name": None,
        "cwd": "/srv",
        "env": {"A": "1", "B": "x=y", "C": "3"},
        "mode": "pty",
        "rows": 30,
        "cols": 90,
        "worktree": True,
    }
    assert spawn_body({**values, "worktree": "fix/login"})["worktree"] == "fix/login"
    assert "worktree" not in spawn_body({**values, "worktree": " "})
    for field, value in (("env", "NOPE"), ("size", "big"), ("mode", "tty")):
        with pytest.raises(RoostError) as err:
            spawn_body({**values, field: value})
        assert err.value.code == "bad-request" and err.value.detail == {"field": field}


def test_the_usage_column_follows_the_events_and_gives_way_first() -> None:
    board = Board()
    used = {"input": 40000, "output": 2000, "cache_read": 6000, "cache_write": 200}
    board.load([rec("r1", usage={**used, "cost_usd": 0.2134}), rec("r2", mode="stream")])
    key1, key2 = board.visible()
    row = dict(zip(board.columns(), board.row(key1, 200.0), strict=True))
    assert row["USAGE"].plain == "48.2k $0.21"
    assert dict(zip(board.columns(), board.row(key2, 200.0), strict=True))["USAGE"].plain == "-"
    turn = {"status": "completed", "usage": {**used, "cost_usd": 0.01}}
    board.touch(key2, {"kind": "session.turn", "ts": 150.0, "data": turn})
    board.touch(key2, {"kind": "session.turn", "ts": 160.0, "data": turn})
    assert usage_cell(board.entries[key2].record["usage"]) == "96.4k $0.02"
    total = {"input": 5, "output": 1, "cache_read": 0, "cache_write": 0}
    board.touch(key1, {"kind": "session.usage", "ts": 170.0, "data": {"total": total}})
    board.update(rec("r1"))  # session.show's record has no usage: the last known stays
    assert usage_cell(board.entries[key1].record["usage"]) == "6"
    wide = [label for label, _ in board.layout([key1, key2], 200.0, 200)]
    assert wide[-1] == "USAGE"
    assert "USAGE" not in [label for label, _ in board.layout([key1, key2], 200.0, 80)]
