"""A provider the configuration file defines: any agent CLI in a PTY, by its ``ProviderSpec``.

Everything roost knows of such a CLI is in its table (``roost.provider_spec``): the argv of a
fresh launch and of a resume, where the session id comes from, and the screen patterns that
classify it. Reading a screen, the attention patterns come first (a question drawn over the
prompt must not read as ready), then ``busy``, then ``ready``; a shell in the foreground that is
not the CLI is ``shell``, anything else ``starting``. It runs in pty mode only: a CLI's headless
output has no shape roost could know from a table.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import uuid
from pathlib import Path

from roost.adapters.base import (
    ATTENTION,
    BUSY,
    EXITED,
    READY,
    SHELL,
    STARTING,
    Adapter,
    Classification,
    Launch,
    LaunchContext,
)
from roost.adapters.evidence import SHELLS, Evidence
from roost.provider_spec import ProviderSpec
from roost.wire.messages import Mode

TEXT_READ = 65536  # how much of a session file the id is looked for in
FILES_LOOKED_AT = 200  # the newest files of the glob, at most, looked into


class GenericAdapter(Adapter):
    """The adapter of one ``[providers.<name>]`` table."""

    modes: tuple[Mode, ...] = ("pty",)

    def __init__(self, spec: ProviderSpec) -> None:
        self.spec = spec
        self.provider = spec.name
        self.submit_delay_s = spec.submit_delay_s

    @property
    def install(self) -> str:
        return self.spec.install

    # -- launches -----------------------------------------------------------------------------

    def _argv(self, extra: tuple[str, ...], ctx: LaunchContext, **fields: str) -> list[str]:
        command = os.path.expanduser(self.spec.command)
        values = {"cwd": ctx.cwd, **fields}
        return [command, *(a.format_map(values) for a in (*self.spec.args, *extra))]

    def fresh(self, ctx: LaunchContext) -> Launch:
        """With no id source of the CLI's own, roost makes the id (given as ``{new_id}`` where
        ``fresh`` asks for it)."""
        new_id = str(uuid.uuid4()) if self.spec.assigns_id else None
        argv = self._argv(self.spec.fresh, ctx, new_id=new_id or "")
        return Launch(argv=argv, provider_session=new_id)

    def resume(self, provider_session: str, ctx: LaunchContext) -> Launch:
        argv = self._argv(self.spec.resume, ctx, id=provider_session)
        return Launch(argv=argv, provider_session=provider_session)

    # -- screens ------------------------------------------------------------------------------

    def classify(
        self, screen: str, *, exited: bool, evidence: Evidence | None = None
    ) -> Classification:
        if exited:
            return Classification(EXITED)
        for reason, pattern in self.spec.attention:
            if found := pattern.search(screen):
                return Classification(ATTENTION, reason, _line_of(screen, found))
        if self.spec.busy is not None and self.spec.busy.search(screen):
            return Classification(BUSY)
        if self.spec.ready is not None and self.spec.ready.search(screen):
            return Classification(READY)
        if evidence is not None and evidence.agent is not None:
            fg = evidence.foreground()
            if fg is not None and fg.pid != evidence.agent.pid and fg.name in SHELLS:
                return Classification(SHELL, None, fg.name)
        return Classification(STARTING)

    # -- identity -----------------------------------------------------------------------------

    def discover_identity(self, screen: str, ctx: LaunchContext, *, since: float) -> str | None:
        if self.spec.id_screen is not None:
            found = self.spec.id_screen.findall(screen)
            return str(found[-1]) if found else None
        if self.spec.id_file is not None:
            return self._file_identity(ctx, since)
        return None

    def home(self, env: dict[str, str]) -> str:
        """The CLI's home: ``home_env`` of the launch environment, else ``~/home_dir``, else
        the user's home."""
        if self.spec.home_env and env.get(self.spec.home_env):
            return env[self.spec.home_env]
        user = env.get("HOME") or os.path.expanduser("~")
        return os.path.join(user, self.spec.home_dir) if self.spec.home_dir else user

    def _file_identity(self, ctx: LaunchContext, since: float) -> str | None:
        """The id in the newest file of the pattern written since the launch."""
        where = self.spec.id_file
        assert where is not None
        values = {
            "home": self.home(ctx.env),
            "cwd": ctx.cwd,
            "cwd_sha256": hashlib.sha256(ctx.cwd.encode()).hexdigest(),
        }
        root = Path(os.path.expanduser(where.dir.format_map(values)))
        for path in _newest(root, where.glob.format_map(values), since):
            text = path.relative_to(root).as_posix() if where.search == "path" else _head(path)
            if found := where.regex.search(text):
                return found.group(1)
        return None


def _newest(root: Path, glob: str, since: float) -> list[Path]:
    """The files under ``root`` matching ``glob`` changed at ``since`` or later, newest first."""
    stamped = []
    with contextlib.suppress(OSError, ValueError):  # no such folder yet; a bad glob
        for path in root.glob(glob):
            with contextlib.suppress(OSError):  # gone meanwhile
                mtime = path.stat().st_mtime
                if mtime >= since and path.is_file():
                    stamped.append((mtime, path))
    stamped.sort(reverse=True)
    return [path for _, path in stamped[:FILES_LOOKED_AT]]


def _head(path: Path) -> str:
    try:
        with path.open("rb") as f:
            return f.read(TEXT_READ).decode("utf-8", "replace")
    except OSError:
        return ""


def _line_of(screen: str, found: re.Match[str]) -> str:
    """The screen line where a pattern matched, for the attention's detail."""
    start = screen.rfind("\n", 0, found.start()) + 1
    end = screen.find("\n", found.start())
    return screen[start : end if end >= 0 else len(screen)].strip()[:200]
