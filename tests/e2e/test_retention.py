"""Event-log retention through the real CLI and wire: ``roost node up --retain-events N``.

What must hold (state/retention.py): a limit below 1,000 or not a number is refused with
``bad-request`` naming the flag; past the limit (plus its slack) the oldest events are trimmed,
``events.since`` then answers ``gap: true`` and ``first_seq`` for a position before them and
``gap: false`` from a retained one; ``last_seq`` never goes back; the limit is kept by a later
plain ``node up``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.conftest import Node, wait_for

LIMIT = 1000


def _since(node: Node, after: int, limit: int = 1) -> dict[str, Any]:
    with node.client() as client:
        return client.call("events.since", {"after": after, "limit": limit})


def _event_log(node: Node) -> dict[str, Any]:
    kept: dict[str, Any] = node.run("node", "status")["event_log"]
    return kept


def _write_events(node: Node, root: Path, count: int) -> int:
    """``count`` events (one ``workspace.added`` each, the fastest client write); returns the
    last_seq seen, checking that it only ever grows."""
    last: int = _since(node, 0)["last_seq"]
    with node.client() as client:
        for n in range(count):
            path = root / f"w{n}"
            path.mkdir()
            client.call("workspace.add", {"path": str(path)})
            if n % 250 == 0:
                seen: int = client.call("events.since", {"after": 0, "limit": 1})["last_seq"]
                assert seen >= last
                last = seen
    return last


def test_bad_limits_are_refused_naming_the_flag(node: Node) -> None:
    for bad in ("999", "0", "lots"):
        err = node.error("node", "up", "--retain-events", bad)
        assert err["code"] == "bad-request"
        assert "--retain-events" in err["message"]
        assert err["detail"] == {"field": "retain-events"}
    assert not node.processes()  # nothing was started


def test_old_events_are_trimmed_with_a_gap_notice_and_the_limit_is_kept(
    node: Node, tmp_path: Path
) -> None:
    assert node.up("--retain-events", str(LIMIT))["already_running"] is False
    assert _event_log(node) == {"retain_events": LIMIT, "first_seq": 1, "last_seq": 1}
    assert _since(node, 0)["gap"] is False
    busy = node.error("node", "up", "--retain-events", "5000")
    assert busy["code"] == "node-running" and busy["detail"] == {"retain_events": LIMIT}

    root = tmp_path / "dirs"
    root.mkdir()
    written = _write_events(node, root, 2 * LIMIT + 50)
    gone = wait_for(lambda: r if (r := _since(node, 0))["gap"] else None, 10.0, "a trim")
    first, last = gone["first_seq"], gone["last_seq"]
    assert first > 1 and last >= written
    assert [e["seq"] for e in gone["events"]] == [first]
    assert LIMIT <= last - first + 1 <= 2 * LIMIT
    kept = _since(node, first - 1, limit=5)
    assert kept["gap"] is False and kept["events"][0]["seq"] == first
    assert _since(node, first - 2)["gap"] is True
    assert node.run("events", "--after", "0", "--limit", "1")["gap"] is True
    status = _event_log(node)
    assert status["retain_events"] == LIMIT and status["first_seq"] >= first

    assert node.run("node", "stop")["stopped"]
    assert node.up()["already_running"] is False  # no flag: the stored limit is used
    after = _event_log(node)
    assert after["retain_events"] == LIMIT
    assert after["first_seq"] >= first and after["last_seq"] > last  # node.stopping, node.started
    assert _since(node, 0)["gap"] is True
