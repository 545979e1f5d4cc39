"""The ``echo`` provider: roost's built-in agent, with identity assigned up front."""

from __future__ import annotations

import re
import sys
import uuid
from pathlib import Path
from typing import Any

from roost.adapters import stream_json
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
from roost.adapters.evidence import Evidence

AGENT = str(Path(__file__).with_name("echo_agent.py"))


def agent_argv(*args: str) -> list[str]:
    """The echo agent's command: its file, run without site (it needs only the standard library,
    and site's import hooks would cost each session's start more than the agent itself)."""
    return [sys.executable, "-S", AGENT, *args]


# what the agent says of its session at the start: "session ID" or "resumed ID (N turns)"
SHOWN = re.compile(r"^(?:session (\S+)|resumed (\S+) \(\d+ turns\))$", re.MULTILINE)


def _forked(source: str, new: str) -> list[str]:
    return ["--resume", source, "--fork-session", "--session-id", new]


class EchoAdapter(Adapter):
    provider = "echo"

    def _env(self, ctx: LaunchContext) -> dict[str, str]:
        if "ROOST_ECHO_HOME" in ctx.env:
            return {}
        return {"ROOST_ECHO_HOME": str(Path(ctx.data_dir))}

    def fresh(self, ctx: LaunchContext) -> Launch:
        session_id = str(uuid.uuid4())
        argv = agent_argv("--session-id", session_id)
        return Launch(argv=argv, env=self._env(ctx), provider_session=session_id)

    def resume(self, provider_session: str, ctx: LaunchContext) -> Launch:
        argv = agent_argv("--resume", provider_session)
        return Launch(argv=argv, env=self._env(ctx), provider_session=provider_session)

    def fork(self, provider_session: str, ctx: LaunchContext) -> Launch:
        """As claude's: ``--resume SRC --fork-session --session-id NEW`` copies SRC's history
        into NEW's file and continues there."""
        new = str(uuid.uuid4())
        argv = agent_argv(*_forked(provider_session, new))
        return Launch(argv=argv, env=self._env(ctx), provider_session=new)

    def fork_turn(
        self, source: str, provider_session: str | None, text: str, ctx: LaunchContext
    ) -> Launch:
        new = provider_session or str(uuid.uuid4())
        argv = agent_argv(*self._prompt(text, ctx), *_forked(source, new))
        return Launch(argv=argv, env=self._env(ctx), provider_session=new)

    def shown_session(self, screen: str) -> str | None:
        found = [a or b for a, b in SHOWN.findall(screen)]
        return found[-1] if found else None

    def turn(
        self, provider_session: str | None, text: str, ctx: LaunchContext, *, first: bool
    ) -> Launch:
        provider_session = provider_session or str(uuid.uuid4())
        flag = "--session-id" if first else "--resume"
        argv = agent_argv(*self._prompt(text, ctx), flag, provider_session)
        return Launch(argv=argv, env=self._env(ctx), provider_session=provider_session)

    @staticmethod
    def _prompt(text: str, ctx: LaunchContext) -> list[str]:
        # ROOST_ECHO_PROMPT_ATTACHED=1 (tests): the text inside an argument, so that no plan
        # holds for any text and each turn's acceptance asks the adapter host
        attached = ctx.env.get("ROOST_ECHO_PROMPT_ATTACHED") == "1"
        prompt = [f"--print={text}"] if attached else ["-p", text]
        return [*prompt, "--output-format", "stream-json"]

    def parse(self, line: str, stream: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        if stream == "stderr":
            return super().parse(line, stream)
        return stream_json.parse_line(line)

    def classify(
        self, screen: str, *, exited: bool, evidence: Evidence | None = None
    ) -> Classification:
        if exited:
            return Classification(EXITED)
        last = last_line(screen)
        if last.startswith(PROMPT.rstrip()):
            return Classification(READY)
        if not last:
            return Classification(STARTING)
        return Classification(BUSY)
