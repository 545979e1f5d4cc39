"""Which records a restore resumes, and how an outcome is read from the record afterwards."""

from __future__ import annotations

from typing import Any

from roost.actors.node.restore import choose, outcome
from roost.actors.state.records import Record


def _rec(rid: str, **kw: Any) -> Record:
    return Record(id=rid, name=None, provider="echo", mode="pty", cwd="/w", **kw)


def test_only_policy_resume_and_never_without_a_provider_session() -> None:
    chosen, skipped = choose(
        [
            _rec("r1", restore_policy="resume", provider_session="s1"),
            _rec("r2", restore_policy="never", provider_session="s2"),
            _rec("r3", restore_policy="resume"),  # no id: never a fresh conversation
            _rec("r4", restore_policy="resume", provider_session="s4"),
        ]
    )
    assert [r.id for r in chosen] == ["r1", "r4"]  # in the order given
    assert [(r.id, why) for r, why in skipped] == [("r3", "no-provider-session")]


def test_the_default_policy_is_never() -> None:
    assert choose([_rec("r1", provider_session="s1")]) == ([], [])


def test_outcomes() -> None:
    assert outcome(_rec("r", state="live"), {"outcome": "resumed"}) == {"outcome": "resumed"}
    assert outcome(_rec("r", state="attention", attention="login"), None) == {
        "outcome": "attention",
        "reason": "login",
    }
    failed = outcome(_rec("r", state="attention"), {"outcome": "resume_failed", "reason": "x"})
    assert failed == {"outcome": "resume_failed", "reason": "x"}
    assert outcome(_rec("r", state="dormant"), None) == {
        "outcome": "resume_failed",
        "reason": "exited",
    }
