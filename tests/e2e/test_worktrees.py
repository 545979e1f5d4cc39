"""Sessions in git worktrees: ``spawn --worktree``, ``diff``, ``forget --remove-worktree``.

A real repository in the test's tmp dir, the real node running git; the echo agent's own working
directory shows where the session runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.e2e.conftest import Node

pytestmark = pytest.mark.timeout(60)

IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **IDENTITY},
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return proc.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "app"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("hello\n")
    (path / "src").mkdir()
    (path / "src" / "main.py").write_text("print('hi')\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "first")
    return path


def test_spawn_in_a_worktree_diff_and_refused_removal(node: Node, repo: Path) -> None:
    node.up()
    head = git(repo, "rev-parse", "HEAD").strip()
    rec = node.run("spawn", "echo", "--name", "Fix Login", "--cwd", str(repo), "--worktree")[
        "record"
    ]
    wt = repo.parent / "app.worktrees" / "roost" / "fix-login"
    assert rec["worktree"] == {
        "repo": str(repo),
        "path": str(wt),
        "branch": "roost/fix-login",
        "base": head,
    }
    assert rec["cwd"] == str(wt)
    listed = node.run("ls")["records"]
    assert [r["worktree"]["path"] for r in listed] == [str(wt)]
    assert git(wt, "rev-parse", "--abbrev-ref", "HEAD").strip() == "roost/fix-login"
    assert psutil.Process(rec["active"]["agent_pid"]).cwd() == str(wt)
    assert git(repo, "status", "--porcelain") == ""  # the repository itself is untouched

    (wt / "README").write_text("hello\nchanged\n")
    (wt / "notes.txt").write_text("new file\n")
    doc = node.run("diff", "Fix Login")
    assert doc["base"] == head and doc["head"] == head and doc["commits"] == []
    assert {(f["status"], f["path"]) for f in doc["files"]} == {("M", "README"), ("?", "notes.txt")}
    assert "+changed" in doc["patch"] and "+new file" in doc["patch"]
    git(wt, "add", "README")
    git(wt, "commit", "-qm", "change the readme")
    doc = node.run("diff", rec["id"])
    assert [c["subject"] for c in doc["commits"]] == ["change the readme"]
    assert "+changed" in doc["patch"] and doc["uncommitted"] == ["?? notes.txt"]

    node.run("stop", rec["id"])
    err = node.error("forget", rec["id"], "--remove-worktree")
    assert err["code"] == "worktree-dirty"
    assert err["detail"]["uncommitted"] == ["?? notes.txt"]
    assert "notes.txt (untracked)" in err["message"]
    assert wt.is_dir() and node.record(rec["id"])["state"] == "dormant"  # nothing was done

    (wt / "notes.txt").unlink()
    gone = node.run("forget", rec["id"], "--remove-worktree")
    assert gone["forgotten"] and gone["worktree"]["removed"]
    assert not wt.exists() and not (repo.parent / "app.worktrees").exists()
    assert "roost/fix-login" in git(repo, "branch", "--list", "roost/fix-login")  # work kept


def test_named_branch_removed_when_clean_and_kept_without_the_flag(node: Node, repo: Path) -> None:
    node.up()
    a = node.run("spawn", "echo", "--cwd", str(repo / "src"), "--worktree", "feature/a")["record"]
    wt = repo.parent / "app.worktrees" / "feature" / "a"
    assert a["worktree"]["branch"] == "feature/a" and a["cwd"] == str(wt / "src")
    node.run("stop", a["id"])
    assert node.run("forget", a["id"], "--remove-worktree")["worktree"]["removed"]
    assert not wt.exists()

    b = node.run("spawn", "echo", "--mode", "stream", "--cwd", str(repo), "--worktree", "b")
    node.run("stop", b["record"]["id"])
    kept = node.run("forget", b["record"]["id"])
    assert kept["worktree"] is None and (repo.parent / "app.worktrees" / "b").is_dir()


def test_bad_repository_path_and_taken_branch(node: Node, repo: Path, tmp_path: Path) -> None:
    node.up()
    plain = tmp_path / "plain"
    plain.mkdir()
    err = node.error("spawn", "echo", "--cwd", str(plain), "--worktree")
    assert err["code"] == "not-a-repository" and err["detail"]["field"] == "cwd"
    git(repo, "branch", "taken")
    err = node.error("spawn", "echo", "--cwd", str(repo), "--worktree", "taken")
    assert err["code"] == "worktree-failed" and "already exists" in err["message"]
    err = node.error("spawn", "echo", "--cwd", str(repo), "--worktree", "bad..name")
    assert err["code"] == "bad-request" and err["detail"]["field"] == "worktree"
    assert node.run("ls")["records"] == []  # no record left behind by a refused spawn
    rec = node.run("spawn", "echo", "--cwd", str(repo))["record"]
    assert rec["worktree"] is None
    assert node.error("diff", rec["id"])["code"] == "no-worktree"
    node.run("stop", rec["id"])
    assert node.error("forget", rec["id"], "--remove-worktree")["code"] == "no-worktree"


def test_worktree_refusals_leave_nothing_and_say_what_to_do(
    node: Node, repo: Path, tmp_path: Path
) -> None:
    """``--worktree`` on a directory outside any repository registers no workspace; the branch
    that ``forget --remove-worktree`` keeps blocks the name's reuse with what to do about it."""
    node.up()
    plain = tmp_path / "plain"
    plain.mkdir()
    assert node.error("spawn", "echo", "--cwd", str(plain), "--worktree")["code"] == (
        "not-a-repository"
    )
    assert node.run("workspace", "ls")["workspaces"] == []
    rid = node.run("spawn", "echo", "--name", "fix", "--cwd", str(repo), "--worktree")["record"]
    node.run("stop", "fix")
    proc = subprocess.run(
        [sys.executable, "-m", "roost", "forget", "fix", "--remove-worktree"],
        env=node.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"git -C {repo} branch -D roost/fix" in proc.stdout, proc.stdout
    err = node.error("spawn", "echo", "--name", "fix", "--cwd", str(repo), "--worktree")
    assert err["code"] == "worktree-failed" and err["detail"]["branch"] == "roost/fix", err
    assert f"git -C {repo} branch -D roost/fix" in err["message"], err
    assert "--worktree BRANCH" in err["message"] and err["detail"]["fix"], err
    git(repo, "branch", "-D", "roost/fix")
    again = node.run("spawn", "echo", "--name", "fix", "--cwd", str(repo), "--worktree")
    assert again["record"]["worktree"]["branch"] == "roost/fix" and again["record"]["id"] != rid


def test_a_name_taken_takes_its_fresh_worktree_with_it(node: Node, repo: Path) -> None:
    node.up()
    node.run("spawn", "echo", "--name", "one", "--cwd", str(repo), "--worktree", "first")
    err = node.error("spawn", "echo", "--name", "one", "--cwd", str(repo), "--worktree", "second")
    assert err["code"] == "name-taken"
    assert not (repo.parent / "app.worktrees" / "second").exists()
    assert git(repo, "branch", "--list", "second") == ""
