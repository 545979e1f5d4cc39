"""A pty session's two early questions, answered by the adapter from screens and evidence:

* who is it? For CLIs that choose their own session id (codex, kimi), the supervisor asks the
  adapter (screen hints, the provider's session files created since the launch) until it knows;
* did a cold resume reach the same conversation? After a resume the supervisor samples the
  process tree and asks ``adapter.verify_resume`` until it answers ``resumed``,
  ``attention_required``, ``retry_fresh`` or ``resume_failed``; no verdict in time is reported as
  ``attention_required`` (resume-unverified). Nothing here ever types into the session.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import TYPE_CHECKING, Any

import structlog

from roost.actors import probe
from roost.broker.errors import RoostError

if TYPE_CHECKING:
    from roost.actors.supervisor import Supervisor

log = structlog.get_logger("roost.checks")

IDENTITY_POLL_S = 1.0
VERIFY_POLL_S = 0.5
VERIFY_DEADLINE_S = 45.0


class IdentityAndResume:
    def __init__(self, sup: Supervisor) -> None:
        self.sup = sup
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.sup.identity is None:
            self._keep(loop.create_task(self._identity_loop()))
        if self.sup.spec.get("resume") and self.sup.identity:
            self._keep(loop.create_task(self._verify_loop()))

    def _keep(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _context(self) -> dict[str, Any]:
        spec = self.sup.spec
        return {
            "mode": spec["mode"],
            "cwd": spec["cwd"],
            "env": spec["env"],
            "data_dir": spec["data_dir"],
        }

    async def discover(self) -> None:
        with contextlib.suppress(RoostError):
            found = await self.sup.peer.call(
                f"adapter/{self.sup.provider}",
                "adapter.identity",
                {**self._context(), "screen": self.sup.term.text(), "since": self.sup.launched_at},
                timeout=3.0,
            )
            if found.get("provider_session"):
                self.sup._learn(str(found["provider_session"]))

    async def _identity_loop(self) -> None:
        while self.sup.identity is None and self.sup.exit is None:
            await asyncio.sleep(IDENTITY_POLL_S)
            await self.discover()

    async def _verify_loop(self) -> None:
        sup = self.sup
        samples: deque[dict[str, Any]] = deque(maxlen=2)
        deadline = asyncio.get_running_loop().time() + VERIFY_DEADLINE_S
        verdict: dict[str, Any] = {"outcome": None}
        while asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(VERIFY_POLL_S)
            assert sup.agent is not None and sup.agent.pty is not None
            samples.append(
                probe.sample(
                    sup.agent.pid if sup.exit is None else None, sup.agent.pty.fd
                ).to_wire()
            )
            try:
                verdict = await sup.peer.call(
                    f"adapter/{sup.provider}",
                    "adapter.verify_resume",
                    {
                        "screen": sup.term.text(),
                        "provider_session": sup.identity,
                        "samples": list(samples),
                    },
                    timeout=3.0,
                )
            except RoostError:
                continue
            if verdict.get("outcome"):
                break
        if not verdict.get("outcome"):
            verdict = {
                "outcome": "attention_required",
                "reason": "resume-unverified",
                "detail": "no verdict on the resumed screen in time",
            }
        log.info("resume-verdict", record=sup.record_id, **verdict)
        sup.report("node.session.resume", {"verdict": verdict})
