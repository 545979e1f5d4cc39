"""The identity and resume checks of a supervisor: what a fork may take as its identity."""

from __future__ import annotations

from typing import Any, cast

from roost.actors.supervisor.checks import IdentityAndResume
from roost.actors.supervisor.host import Session
from roost.adapters.base import SAME_ID


class Sup:
    """The little of a supervisor the identity check reads, and what it reports."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec, self.record_id = spec, "r0123456789"
        self.reports: list[tuple[str, dict[str, Any]]] = []

    def report(self, method: str, body: dict[str, Any]) -> None:
        self.reports.append((method, body))


def checks(spec: dict[str, Any]) -> tuple[IdentityAndResume, Sup]:
    sup = Sup(spec)
    return IdentityAndResume(cast(Session, sup)), sup


def test_a_fork_never_takes_its_source_s_id_and_says_so_once() -> None:
    check, sup = checks({"fork": "src-1", "provider_session": None})
    assert check.fork == "src-1"
    assert not check.refuse_identity("new-1")
    assert check.refuse_identity("src-1") and check.refuse_identity("src-1")
    verdict = {
        "outcome": "resume_failed",
        "reason": "resume-unverified",
        "detail": SAME_ID,
        "fork": "src-1",
    }
    assert sup.reports == [("node.session.resume", {"verdict": verdict})]


def test_a_session_that_is_no_fork_takes_any_id() -> None:
    check, sup = checks({"provider_session": None})
    assert check.fork is None and not check.refuse_identity("src-1")
    assert sup.reports == []
