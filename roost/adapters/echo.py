"""The ``echo`` provider: roost's built-in agent, with identity assigned up front."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from roost.adapters.base import (
    BUSY,
    EXITED,
    READY,
    STARTING,
    Adapter,
    Classification,
    Launch,
    LaunchContext,
    last_line,
)
from roost.adapters.echo_agent import PROMPT

AGENT_MODULE = "roost.adapters.echo_agent"


class EchoAdapter(Adapter):
    provider = "echo"

    def _env(self, ctx: LaunchContext) -> dict[str, str]:
        if "ROOST_ECHO_HOME" in ctx.env:
            return {}
        return {"ROOST_ECHO_HOME": str(Path(ctx.data_dir))}

    def fresh(self, ctx: LaunchContext) -> Launch:
        session_id = str(uuid.uuid4())
        argv = [sys.executable, "-m", AGENT_MODULE, "--session-id", session_id]
        return Launch(argv=argv, env=self._env(ctx), provider_session=session_id)

    def resume(self, provider_session: str, ctx: LaunchContext) -> Launch:
        argv = [sys.executable, "-m", AGENT_MODULE, "--resume", provider_session]
        return Launch(argv=argv, env=self._env(ctx), provider_session=provider_session)

    def classify(self, screen: str, *, exited: bool) -> Classification:
        if exited:
            return Classification(EXITED)
        last = last_line(screen)
        if last.startswith(PROMPT.rstrip()):
            return Classification(READY)
        if not last:
            return Classification(STARTING)
        return Classification(BUSY)
