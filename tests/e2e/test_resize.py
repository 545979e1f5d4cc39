"""Resizing a live pty session: a smaller terminal keeps the rows around
the cursor, as a real terminal does, and the next input lands where the cursor is on screen."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Node


def test_shrinking_a_session_keeps_its_screen_and_cursor(node: Node, project: Path) -> None:
    node.up()
    rid = node.run("spawn", "echo", "--name", "web", "--cwd", str(project))["record"]["id"]
    node.wait_screen(rid, "echo-ready>")
    node.run("prompt", rid, "before")
    before = node.wait_screen(rid, "echo: before")
    assert node.run("resize", rid, "10x40") == {
        "rows": 10,
        "cols": 40,
        "record": rid,
        "generation": 1,
    }
    shown = node.run("show", rid, "--screen")
    assert shown["screen"] == "\n".join(line[:40].rstrip() for line in before.splitlines())
    assert shown["record"]["rows"] == 10 and shown["record"]["cols"] == 40
    node.run("send", rid, "after")
    typed = node.wait_screen(rid, "after").splitlines()
    assert typed[-1] == "echo-ready> after"  # on the prompt's row, not at column 12 of a blank
