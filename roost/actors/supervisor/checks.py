"""A pty session's two early questions, answered by the adapter from screens and evidence:

* who is it? For CLIs that choose their own session id (codex, kimi), the supervisor asks the
  adapter (screen hints, the provider's session files created since the launch) until it knows;
* did a cold resume reach the same conversation? After a resume the supervisor samples the
  process tree and asks ``adapter.verify_resume`` until it answers ``resumed``,
  ``attention_required``, ``retry_fresh`` or ``resume_failed``; no verdict in time is reported as
  ``attention_required`` (resume-unverified). A CLI that exits before a verdict gets one at
  once (``resume_failed``: ``exited``, or ``stopped`` when the operator stopped it first),
  reported before its exit. Until the verdict, the input gate holds
  (the node commits no input): typed into a CLI still loading (or failing to load) the
  conversation, it would be lost after ``accepted``. Nothing here ever types into the session.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

import structlog

from roost.actors.runtime.process import logged_crash
from roost.actors.supervisor import probe
from roost.actors.supervisor.host import Session
from roost.adapters.base import SAME_ID
from roost.wire.errors import RoostError

log = structlog.get_logger("roost.checks")

IDENTITY_POLL_S = 1.0
VERIFY_POLL_S = 0.5
VERIFY_DEADLINE_S = 45.0
SETTLE_S = 5.0  # how long an exit waits for the verdict to be reported first
TITLE_CAP = 1024


class IdentityAndResume:
    def __init__(self, sup: Session) -> None:
        self.sup = sup
        self._tasks: set[asyncio.Task[None]] = set()
        self.verdict = asyncio.Event()  # set once a resume has its verdict (or needs none)
        self._checking = False
        self._refused = False  # a fork's source id came back (reported once)
        self._exited = asyncio.Event()
        self._stopped = False  # the operator stopped the session (not the CLI failing)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.sup.identity is None:
            self._keep(loop.create_task(self._identity_loop()))
        if (self.sup.spec.get("resume") and self.sup.identity) or self.fork:
            self._checking = True
            self._keep(loop.create_task(self._verify_loop()))
        else:
            self.verdict.set()

    @property
    def fork(self) -> str | None:
        """A fork's source provider session (None: not a fork)."""
        return self.sup.spec.get("fork")

    def refuse_identity(self, found: str) -> bool:
        """True when ``found`` may not be this session's id: a fork's source's own id (the CLI
        continued the source instead of copying it), which is reported as the fork's failure
        and never adopted."""
        if not self.fork or found != self.fork:
            return False
        if not self._refused:
            self._refused = True
            log.warning("fork-same-identity", record=self.sup.record_id)
            self._report(
                {"outcome": "resume_failed", "reason": "resume-unverified", "detail": SAME_ID}
            )
        return True

    def _report(self, verdict: dict[str, Any]) -> None:
        if self.fork:
            verdict = {**verdict, "fork": self.fork}
        self.sup.report("node.session.resume", {"verdict": verdict})

    @property
    def pending(self) -> bool:
        """A resume whose verdict is not reported yet (only once ``start`` began checking)."""
        return self._checking and not self.verdict.is_set()

    async def settled_verdict(self) -> None:
        """Until the resume has its verdict (at once when none is awaited)."""
        await self.verdict.wait()

    def on_exit(self) -> None:
        self._exited.set()

    def on_stop(self) -> None:
        """The session is being stopped on request: an exit before the verdict is reported as
        stopped, not as the CLI failing to resume."""
        self._stopped = True

    async def settled(self) -> None:
        """After the agent exited: the verdict reported (or a bounded wait for it)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.verdict.wait(), SETTLE_S)

    def view(self) -> dict[str, Any]:
        """What a classification needs besides the screen: title, identity, launch, context."""
        return {
            "title": self.sup.term.title()[:TITLE_CAP],
            "provider_session": self.sup.identity,
            "since": self.sup.launched_at,
            **self._context(),
        }

    def _keep(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(logged_crash)

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
                self.sup.learn(str(found["provider_session"]))

    async def _identity_loop(self) -> None:
        while self.sup.identity is None and self.sup.exit is None:
            await asyncio.sleep(IDENTITY_POLL_S)
            await self.discover()

    async def _verify_loop(self) -> None:
        try:
            await self._verify()
        except Exception:  # a silent end would leave input held and the exit waiting
            log.exception("resume-check-failed", record=self.sup.record_id)
            self.verdict.set()
            raise

    async def _verify(self) -> None:
        sup = self.sup
        samples: deque[dict[str, Any]] = deque(maxlen=2)
        deadline = asyncio.get_running_loop().time() + VERIFY_DEADLINE_S
        verdict: dict[str, Any] = {"outcome": None}
        while (
            asyncio.get_running_loop().time() < deadline
            and not verdict.get("outcome")
            and not self._refused
        ):
            with contextlib.suppress(TimeoutError):  # an exit wakes the loop at once
                await asyncio.wait_for(self._exited.wait(), VERIFY_POLL_S)
            exited = sup.exit is not None
            assert sup.agent is not None and sup.agent.pty is not None
            samples.append(
                probe.sample(None if exited else sup.agent.pid, sup.agent.pty.fd).to_wire()
            )
            verdict = await self._ask(list(samples)) or verdict
            if exited and verdict.get("outcome") in (None, "resume_failed"):
                # the operator's stop ended it, not the CLI failing to load the conversation
                reason = "stopped" if self._stopped else verdict.get("reason") or "exited"
                verdict = {**verdict, "outcome": "resume_failed", "reason": reason}
                verdict.setdefault("detail", "")
        if not verdict.get("outcome"):
            verdict = {
                "outcome": "attention_required",
                "reason": "resume-unverified",
                "detail": "no verdict on the resumed screen in time",
            }
        if not self._refused:  # else already reported, as the fork's failure
            log.info("resume-verdict", record=sup.record_id, **verdict)
            self._report(verdict)
        self.verdict.set()

    async def _ask(self, samples: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The adapter's verdict on the screen as it stands; None if it did not answer."""
        sup = self.sup
        try:
            verdict: dict[str, Any] = await sup.peer.call(
                f"adapter/{sup.provider}",
                "adapter.verify_resume",
                {
                    "screen": sup.term.text(),
                    "provider_session": sup.identity,
                    "samples": samples,
                    **({"fork": self.fork} if self.fork else {}),
                    **self._context(),
                },
                timeout=3.0,
            )
        except RoostError:
            return None
        return verdict
