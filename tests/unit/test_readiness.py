"""The outcomes ``--wait-ready`` waits for (roost.cli.readiness.outcome)."""

from __future__ import annotations

import pytest

from roost.cli.readiness import outcome


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"state": "live", "mode": "pty", "activity": "starting"}, None),
        ({"state": "live", "mode": "pty", "activity": "busy"}, None),
        ({"state": "live", "mode": "pty", "activity": None}, None),
        ({"state": "starting", "mode": "pty", "activity": None}, None),
        ({"state": "live", "mode": "pty", "activity": "ready"}, "ready"),
        ({"state": "live", "mode": "stream", "activity": None}, "ready"),
        ({"state": "attention", "mode": "pty", "activity": "attention"}, "attention"),
        ({"state": "dormant", "mode": "pty", "activity": None}, "exited"),
        ({"state": "failed", "mode": "stream", "activity": None}, "exited"),
    ],
)
def test_outcome(record: dict[str, object], expected: str | None) -> None:
    assert outcome(record) == expected
