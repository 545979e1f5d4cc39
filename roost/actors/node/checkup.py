"""``node.doctor``: the provider checks of ``roost doctor`` in the node's own environment, and
the node's last word on them for a hub that places sessions (``node.status`` with ``providers``).

The node asks each vendor adapter (``adapter.doctor``, answered by the adapter host) at once and
gathers the answers; a provider whose adapter does not answer is reported with its error. The
latest answers are kept: ``node.status`` asked for ``providers`` says, per provider, whether its
CLI is installed, its version and its login, from checks at most ``FRESH_S`` old (older ones are
answered and checked again behind the answer; none yet: checked before it answers). A node
linked to a hub checks once as it starts, so that the first placement need not wait.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog

from roost import __version__
from roost.actors.runtime.caller import Caller
from roost.actors.runtime.peer import Handler
from roost.providers import built_in, defined, vendors
from roost.wire import protocol as p
from roost.wire.errors import RoostError

DOCTOR_TIMEOUT_S = 55.0
log = structlog.get_logger("roost.node")

FRESH_S = 600.0  # provider checks older than this are made again (a login can lapse)


async def _one(peer: Caller, provider: str) -> dict[str, Any]:
    try:
        return await peer.call(
            f"adapter/{provider}", "adapter.doctor", {}, timeout=DOCTOR_TIMEOUT_S
        )
    except RoostError as err:
        return {"provider": provider, "error": err.to_body(), "findings": []}


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """One provider's report as placement reads it: ``installed`` (its CLI found and answering
    ``--version``; the built-in ones always), ``version``, ``login`` (``logged-in``,
    ``logged-out``, ``unknown``, or None where there is no login to check) and ``problem`` (the
    first error finding, or the check's own failure)."""
    provider = str(report.get("provider"))
    if report.get("error"):
        problem = f"not checked: {report['error'].get('code')}"
        return {"installed": None, "version": None, "login": None, "problem": problem}
    errors = [f["what"] for f in report.get("findings") or [] if f.get("level") == "error"]
    installed = provider in built_in() or (not report.get("missing") and not errors)
    return {
        "installed": installed,
        "version": report.get("version"),
        "login": report.get("login"),
        "problem": errors[0] if errors else None,
    }


class ProviderChecks:
    """The node's provider checks and the last of them."""

    def __init__(self, peer: Caller) -> None:
        self.peer = peer
        self.reports: list[dict[str, Any]] | None = None
        self.checked = 0.0  # time.time() of the last check that every adapter answered
        self._running: asyncio.Task[list[dict[str, Any]]] | None = None

    async def check(self) -> list[dict[str, Any]]:
        """Every provider checked now (one check at a time: a caller during one shares it)."""
        if self._running is None or self._running.done():
            self._running = asyncio.create_task(self._check())
        return await asyncio.shield(self._running)

    async def _check(self) -> list[dict[str, Any]]:
        found = await asyncio.gather(*(_one(self.peer, prov) for prov in (*vendors(), *defined())))
        reports = list(found)
        if not any(rep.get("error") for rep in reports) or self.reports is None:
            self.reports, self.checked = reports, time.time()
        return reports

    async def latest(self) -> dict[str, Any]:
        """``node.status``'s ``providers``: each provider's ``summary`` and ``checked_s_ago``."""
        if self.reports is None:
            await self.check()
        elif time.time() - self.checked > FRESH_S and (
            self._running is None or self._running.done()
        ):
            self._running = asyncio.create_task(self._check())  # answered now, checked behind
        assert self.reports is not None
        age = round(time.time() - self.checked, 1)
        ours = {"installed": True, "version": __version__, "login": None, "problem": None}
        return {
            **{prov: {**ours, "checked_s_ago": 0.0} for prov in built_in()},
            **{
                str(rep.get("provider")): {**summary(rep), "checked_s_ago": age}
                for rep in self.reports
            },
        }

    async def at_start(self, registered: Any) -> None:
        """Once, as a node linked to a hub starts: when every adapter has registered (or after
        ``DOCTOR_TIMEOUT_S``), the first check."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DOCTOR_TIMEOUT_S
        wanted = {f"adapter/{prov}" for prov in (*vendors(), *defined())}
        while not wanted <= set(registered()) and loop.time() < deadline:
            await asyncio.sleep(0.2)  # the adapter host registers its adapters as it starts
        try:
            await self.check()
        except Exception:  # a head start, not a duty: the first placement checks again
            log.exception("provider-checks-failed")


def handler(checks: ProviderChecks) -> Handler:
    """The request handler: ``{"providers": [report, ...]}`` in ``vendors()`` order, then the
    providers the configuration file defines, checked now."""

    async def doctor(h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        return {"providers": await checks.check()}

    return doctor
