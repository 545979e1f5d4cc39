"""The restart policy of the node's child actors (roost.actors.runtime.children.decide)."""

from __future__ import annotations

import pytest

from roost.actors.runtime.children import RestartPolicy, decide

POLICY = RestartPolicy(max_restarts=5, window=30.0, backoff_base=0.1, backoff_max=5.0)


def test_first_restart_waits_the_base_delay() -> None:
    assert decide([], 100.0, POLICY) == pytest.approx(0.1)


def test_back_off_doubles_with_each_recent_restart() -> None:
    delays = [decide([100.0] * n, 100.0, POLICY) for n in range(5)]
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6])


def test_back_off_is_capped() -> None:
    policy = RestartPolicy(max_restarts=100, window=30.0, backoff_base=0.1, backoff_max=5.0)
    assert decide([100.0] * 6, 100.0, policy) == pytest.approx(5.0)
    assert decide([100.0] * 60, 100.0, policy) == pytest.approx(5.0)


def test_intensity_limit_gives_none() -> None:
    restarts = [90.0, 92.0, 94.0, 96.0, 98.0]
    assert decide(restarts, 100.0, POLICY) is None
    assert decide([*restarts, 99.0], 100.0, POLICY) is None


def test_restarts_outside_the_window_do_not_count() -> None:
    old = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    assert decide(old, 100.0, POLICY) == pytest.approx(0.1)
    assert decide([*old, 95.0], 100.0, POLICY) == pytest.approx(0.2)


def test_a_restart_exactly_one_window_ago_has_aged_out() -> None:
    assert decide([70.0], 100.0, POLICY) == pytest.approx(0.1)
    assert decide([70.5], 100.0, POLICY) == pytest.approx(0.2)


def test_limit_lifts_once_restarts_age_out() -> None:
    restarts = [0.0, 1.0, 2.0, 3.0, 4.0]
    assert decide(restarts, 10.0, POLICY) is None
    assert decide(restarts, 30.5, POLICY) == pytest.approx(0.1 * 2**4)
    assert decide(restarts, 34.5, POLICY) == pytest.approx(0.1)
