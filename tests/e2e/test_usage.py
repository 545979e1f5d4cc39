"""Tokens and cost through a real node: stream turns of the echo agent, whose results report
synthetic usage (a token per byte of the prompt in and of the answer out, a micro-dollar per
token), kept per turn, shown by ``show``, ``ls`` and the ``session.turn`` event, and summed by
``roost usage``."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import Node
from tests.e2e.test_cli_edges import text

pytestmark = pytest.mark.timeout(120)


def echo_usage(prompt: str) -> dict[str, float]:
    """What the echo agent reports for a turn of ``prompt`` (roost.adapters.echo_agent)."""
    tokens_in, tokens_out = len(prompt.encode()), len(f"echo: {prompt}".encode())
    return {
        "input": tokens_in,
        "output": tokens_out,
        "cache_read": 0,
        "cache_write": 0,
        "cost_usd": (tokens_in + tokens_out) / 1e6,
    }


def summed(*prompts: str) -> dict[str, float]:
    total = {"input": 0.0, "output": 0.0, "cache_read": 0.0, "cache_write": 0.0, "cost_usd": 0.0}
    for prompt in prompts:
        for key, value in echo_usage(prompt).items():
            total[key] += value
    return total


def same(got: dict[str, float], want: dict[str, float]) -> bool:
    return got.keys() == want.keys() and all(got[k] == pytest.approx(want[k]) for k in want)


def test_stream_turns_usage_is_kept_shown_and_summed(node: Node) -> None:
    node.up()
    node.run("spawn", "echo", "--mode", "stream", "--name", "counted")
    node.run("spawn", "echo", "--mode", "stream", "--name", "other")
    prompts = ("hello there", "and a second turn")
    for prompt in prompts:
        done = node.run("turn", "counted", prompt, "--wait")
        assert done["turn"]["state"] == "completed"
        assert same(done["turn"]["result"]["usage"], echo_usage(prompt))
    node.run("turn", "other", "x", "--wait")

    ends = [e for e in node.events() if e["kind"] == "session.turn"]
    assert [e["data"]["usage"]["input"] for e in ends] == [11, 17, 1]
    shown = node.run("show", "counted")
    assert same(shown["usage"], summed(*prompts))
    listed = {r["name"]: r for r in node.run("ls")["records"]}
    assert same(listed["counted"]["usage"], summed(*prompts))
    assert same(listed["other"]["usage"], summed("x"))

    doc = node.run("usage")
    assert same(doc["total"], summed(*prompts, "x")) and doc["since"] is None
    assert [(s["name"], s["reports"]) for s in doc["session"]] == [("counted", 2), ("other", 1)]
    assert [p["provider"] for p in doc["provider"]] == ["echo"]
    assert len(doc["day"]) == 1 and same(doc["day"][0]["usage"], summed(*prompts, "x"))
    assert same(node.run("usage", "--since", "1h")["total"], summed(*prompts, "x"))
    assert node.run("usage", "--since", "2999-01-01")["session"] == []

    shown_text = text(node, "show", "counted").stdout
    assert "usage:            28 in · 40 out · $0.0001" in shown_text
    table = text(node, "usage", "--since", "7d")
    assert table.returncode == 0
    assert "by session" in table.stdout and "counted" in table.stdout and "total" in table.stdout

    node.run("stop", "other")
    node.run("forget", "other")  # a forgotten session still counts, under its name
    assert [s["name"] for s in node.run("usage")["session"]] == ["counted", "other"]


def test_a_bad_since_is_a_clear_bad_request(node: Node) -> None:
    node.up()
    err = node.error("usage", "--since", "last week")
    assert err["code"] == "bad-request" and err["detail"] == {"field": "since"}
    assert "7d" in err["message"] and "ISO date" in err["message"]
    assert text(node, "usage").stdout.strip() == "no usage reported"
