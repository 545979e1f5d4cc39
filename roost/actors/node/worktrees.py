"""Git worktrees for sessions (``spawn --worktree``): one new worktree per record, on a new branch
made from the repository's HEAD; what the session changed against that base; removal only when
nothing is uncommitted.

The worktree of a repository ``<parent>/<repo>`` lives beside it, in
``<parent>/<repo>.worktrees/<branch>``: outside the repository (so it never shows up in the
repository's own ``git status``), next to it (so people find it), on the same filesystem. The
record keeps ``{repo, path, branch, base}``. All git work runs here, in the node, with a deadline;
git's own words go back in ``detail.git`` when it refuses.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from roost.actors.state.records import Record
from roost.wire.errors import RoostError
from roost.wire.messages import Worktree

GIT_TIMEOUT_S = 30.0
PATCH_LIMIT = 512 * 1024  # characters of patch text in a diff reply; the rest is cut (truncated)
BRANCH_PREFIX = "roost/"
_SLUG = re.compile(r"[^a-z0-9._-]+")


def requested(body: dict[str, Any]) -> str | None:
    """The spawn body's ``worktree``: None (no worktree), "" (a branch named after the record)
    or the branch to create."""
    value = body.get("worktree")
    if value is None or value is False:
        return None
    if value is True:
        return ""
    if not isinstance(value, str) or len(value) > 200:
        raise RoostError(
            "bad-request",
            "field 'worktree' must be true or a branch name of at most 200 characters",
            {"field": "worktree"},
        )
    return value


def default_branch(name: str | None, record_id: str) -> str:
    """``roost/<name as a slug>``, or ``roost/<record id>`` for a name with nothing usable."""
    slug = _SLUG.sub("-", (name or "").lower()).strip("-.")[:60]
    return BRANCH_PREFIX + (slug or record_id)


def worktree_dir(repo: str, branch: str) -> Path:
    top = Path(repo)
    return top.parent / f"{top.name}.worktrees" / branch


async def git(cwd: str, *args: str, check: bool = True) -> tuple[int, str, str]:
    """Run git in ``cwd``; returns (exit code, stdout, stderr). ``check``: a non-zero exit is
    ``worktree-failed`` with git's stderr in ``detail.git``."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError:
        raise RoostError("worktree-failed", "git is not installed on the node") from None
    try:
        out, err = await asyncio.wait_for(proc.communicate(), GIT_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise RoostError("worktree-failed", f"git {args[0]} did not finish in time") from None
    code = proc.returncode or 0
    stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace").strip()
    if check and code != 0:
        raise RoostError(
            "worktree-failed", f"git {args[0]} failed: {_first_line(stderr)}", {"git": stderr}
        )
    return code, stdout, stderr


def _first_line(text: str) -> str:
    return (text.splitlines() or ["(no message)"])[-1][:300]


async def toplevel(path: str) -> tuple[str, str]:
    """The repository that holds ``path`` and ``path`` relative to it; ``not-a-repository``
    when there is none."""
    code, out, _ = await git(path, "rev-parse", "--show-toplevel", "--show-prefix", check=False)
    if code != 0:
        raise RoostError(
            "not-a-repository",
            f"--worktree needs a git repository, and {path} is not in one",
            {"field": "cwd", "cwd": path},
        )
    lines = out.splitlines()
    return lines[0], (lines[1] if len(lines) > 1 else "")


async def create(path: str, branch: str) -> tuple[Worktree, str]:
    """A new worktree of the repository holding ``path``, on the new ``branch`` from HEAD.
    Returns the record's ``worktree`` and the directory the session runs in (``path``'s place
    inside the new worktree)."""
    repo, inside = await toplevel(path)
    code, _, _ = await git(repo, "check-ref-format", "--branch", branch, check=False)
    if code != 0:
        raise RoostError(
            "bad-request", f"{branch!r} is not a valid branch name", {"field": "worktree"}
        )
    code, _, _ = await git(
        repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False
    )
    if code == 0:  # e.g. kept by `forget --remove-worktree`, with the name's default branch
        delete = f"git -C {shlex.quote(repo)} branch -D {shlex.quote(branch)}"
        raise RoostError(
            "worktree-failed",
            f"branch {branch!r} already exists in {repo} (a forgotten session's branch is kept"
            f" with its commits): name another with `--worktree BRANCH`, or delete it first if"
            f" nothing on it is wanted: `{delete}`",
            {"branch": branch, "repo": repo, "fix": delete},
        )
    code, out, _ = await git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    if code != 0:
        raise RoostError("worktree-failed", f"{repo} has no commit to branch from")
    base = out.strip()
    target = worktree_dir(repo, branch)
    if target.exists():
        raise RoostError("worktree-failed", f"{target} already exists", {"path": str(target)})
    target.parent.mkdir(parents=True, exist_ok=True)
    await git(repo, "worktree", "add", "-b", branch, str(target), base)
    worktree: Worktree = {"repo": repo, "path": str(target), "branch": branch, "base": base}
    return worktree, str(target / inside) if inside else str(target)


async def discard_unless_kept(worktree: Worktree, found: Awaitable[object]) -> None:
    """A spawn that failed: its fresh worktree (and branch) goes unless its record was kept
    (``found``, the record's lookup, answers); a kept ``failed`` record keeps it for ``forget
    --remove-worktree``."""
    try:
        await found
        return
    except RoostError as err:
        if err.code != "not-found":
            return
    repo = str(worktree["repo"])
    await git(repo, "worktree", "remove", "--force", str(worktree["path"]), check=False)
    await git(repo, "branch", "-D", str(worktree["branch"]), check=False)


def of(record: Record) -> Worktree:
    """The record's worktree, or ``no-worktree``."""
    if record.worktree is None:
        raise RoostError(
            "no-worktree",
            f"record {record.id} was not spawned with --worktree",
            {"record": record.id},
        )
    return record.worktree


async def uncommitted(worktree: Worktree) -> list[str]:
    """``git status --porcelain`` of the worktree: one ``XY path`` line per file not committed
    (untracked files included)."""
    _, out, _ = await git(
        str(worktree["path"]), "status", "--porcelain=v1", "--untracked-files=all"
    )
    return [line for line in out.splitlines() if line.strip()]


async def remove(worktree: Worktree) -> dict[str, Any]:
    """Remove a clean worktree (its branch and commits stay in the repository); refused with
    ``worktree-dirty`` naming what is uncommitted. A worktree directory already gone is pruned."""
    repo, path = str(worktree["repo"]), str(worktree["path"])
    if not Path(path).is_dir():
        await git(repo, "worktree", "prune", check=False)
        return {**worktree, "removed": True, "was_missing": True}
    dirty = await uncommitted(worktree)
    if dirty:
        shown = ", ".join(_porcelain(line) for line in dirty[:5]) + (" ..." * (len(dirty) > 5))
        raise RoostError(
            "worktree-dirty",
            f"the worktree {path} has {len(dirty)} uncommitted change(s): {shown}; commit or "
            "discard them first (nothing was removed or forgotten)",
            {"uncommitted": dirty[:200], "count": len(dirty), "path": path},
        )
    await git(repo, "worktree", "remove", path)
    _prune_empty(Path(path).parent, worktree_dir(repo, ""))
    return {**worktree, "removed": True, "was_missing": False}


def _porcelain(line: str) -> str:
    """``" M a.txt"`` as ``a.txt (modified)``."""
    code = line[:2]
    what = "untracked" if code == "??" else PORCELAIN.get(code.strip()[:1], code.strip())
    return f"{line[3:]} ({what})"


PORCELAIN = {"M": "modified", "A": "added", "D": "deleted", "R": "renamed", "U": "unmerged"}


def _prune_empty(directory: Path, top: Path) -> None:
    """Remove the directories a branch with slashes left empty, up to ``<repo>.worktrees``."""
    while directory != top.parent and top in (directory, *directory.parents):
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent


async def diff(worktree: Worktree) -> dict[str, Any]:
    """What the session changed against its base: commits since, every file changed (committed or
    not, untracked included) and one patch of it all."""
    path, base = str(worktree["path"]), str(worktree["base"])
    if not Path(path).is_dir():
        raise RoostError("worktree-failed", f"the worktree {path} is gone", {"path": path})
    _, head, _ = await git(path, "rev-parse", "HEAD")
    _, log, _ = await git(path, "log", "--format=%H%x09%s", f"{base}..HEAD")
    commits = [
        dict(zip(("sha", "subject"), line.split("\t", 1), strict=False))
        for line in log.splitlines()
    ]
    _, names, _ = await git(path, "diff", "--name-status", "--no-renames", base)
    files = [
        {"status": s, "path": p} for s, _, p in (ln.partition("\t") for ln in names.splitlines())
    ]
    _, others, _ = await git(path, "ls-files", "--others", "--exclude-standard")
    untracked = [line for line in others.splitlines() if line]
    files += [{"status": "?", "path": name} for name in untracked]
    _, patch, _ = await git(path, "diff", "--no-renames", base)
    for name in untracked:  # exit 1 means "they differ", which a new file always does
        _, more, _ = await git(path, "diff", "--no-index", "--", os.devnull, name, check=False)
        patch += more
    return {
        **worktree,
        "head": head.strip(),
        "commits": commits,
        "files": files,
        "uncommitted": await uncommitted(worktree),
        "patch": patch[:PATCH_LIMIT],
        "truncated": len(patch) > PATCH_LIMIT,
    }
