"""The pure parts of roost.actors.node.worktrees: what a spawn asks for, the default branch name,
where a worktree lives, and how an uncommitted file is named in a refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from roost.actors.node import worktrees as wt
from roost.wire.errors import RoostError


def test_requested() -> None:
    assert wt.requested({}) is None
    assert wt.requested({"worktree": None}) is None
    assert wt.requested({"worktree": True}) == ""
    assert wt.requested({"worktree": "feature/x"}) == "feature/x"
    with pytest.raises(RoostError) as info:
        wt.requested({"worktree": 3})
    assert info.value.code == "bad-request" and info.value.detail == {"field": "worktree"}


@pytest.mark.parametrize(
    ("name", "branch"),
    [
        ("Fix Login", "roost/fix-login"),
        ("release: v2.1!", "roost/release-v2.1"),
        ("日本", "roost/r0123456789"),
        (None, "roost/r0123456789"),
    ],
)
def test_default_branch(name: str | None, branch: str) -> None:
    assert wt.default_branch(name, "r0123456789") == branch


def test_worktrees_live_beside_the_repository() -> None:
    assert wt.worktree_dir("/src/app", "roost/a") == Path("/src/app.worktrees/roost/a")


def test_uncommitted_files_are_named_with_their_status() -> None:
    assert wt._porcelain("?? notes.txt") == "notes.txt (untracked)"
    assert wt._porcelain(" M src/a.py") == "src/a.py (modified)"
    assert wt._porcelain("A  new.py") == "new.py (added)"
