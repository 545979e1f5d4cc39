"""What a ``session.input`` event keeps of typed text (roost.actors.supervisor.keyboard)."""

from __future__ import annotations

import pytest

from roost.actors.supervisor.keyboard import logged_text


@pytest.mark.parametrize("reason", ["login", "api-key"])
def test_text_typed_into_a_credential_screen_is_kept_as_its_length(reason: str) -> None:
    seen = {"state": "attention", "reason": reason, "detail": ""}
    assert logged_text("sk-ant-secret", seen) == {"length": 13, "withheld": reason}


@pytest.mark.parametrize(
    "seen",
    [
        {},
        {"state": "ready", "reason": None},
        {"state": "attention", "reason": "trust"},
        {"state": "attention", "reason": "permission"},
        {"state": "starting", "reason": "login"},  # a reason counts only with attention
    ],
)
def test_other_text_is_kept(seen: dict[str, object]) -> None:
    assert logged_text("hello", seen) == {"text": "hello"}
