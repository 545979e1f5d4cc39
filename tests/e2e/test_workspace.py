"""Workspaces as a user names them: ``workspace add --name`` on a
registered path renames it, and a ``spawn --cwd`` that names nothing known says what it was given
and which workspaces there are."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Node


def test_adding_a_registered_path_with_a_name_renames_it(node: Node, project: Path) -> None:
    node.up()
    first = node.run("workspace", "add", str(project))["workspace"]
    doc = node.run("workspace", "add", str(project), "--name", "webws")
    assert doc["workspace"] == {**first, "name": "webws"}
    assert doc["created"] is False and doc["renamed"] is True
    renamed = [e for e in node.events() if e["kind"] == "workspace.renamed"]
    assert [e["data"] for e in renamed] == [
        {"id": first["id"], "path": first["path"], "from": None, "to": "webws"}
    ]
    rec = node.run("spawn", "echo", "--cwd", "webws")["record"]  # the name now works
    assert rec["cwd"] == first["path"] and rec["workspace_id"] == first["id"]


def test_a_workspace_name_taken_by_another_path_is_refused(
    node: Node, project: Path, tmp_path: Path
) -> None:
    node.up()
    node.run("workspace", "add", str(project), "--name", "webws")
    err = node.error("workspace", "add", str(tmp_path), "--name", "webws")
    assert err["code"] == "name-taken" and "webws" in err["message"]
    assert len(node.run("workspace", "ls")["workspaces"]) == 1


def test_an_unknown_cwd_names_the_value_and_the_workspaces(node: Node, project: Path) -> None:
    node.up()
    node.run("workspace", "add", str(project), "--name", "web")
    err = node.error("spawn", "echo", "--cwd", "webws")
    assert err["code"] == "bad-cwd"
    assert "'webws'" in err["message"] and f"web ({project})" in err["message"]
    assert err["detail"]["value"] == "webws"
    assert [w["name"] for w in err["detail"]["workspaces"]] == ["web"]
    assert node.run("ls")["records"] == []
