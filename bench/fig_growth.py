"""Figure 7, growth: figures 1 and 2 taken again at each step of live sessions (``--full``), and
the log-log slope of each series between its two largest steps (1: linear; above 1: faster than
linear). fig_session.py drives the steps and adds its own series (idle CPU, memory)."""

from __future__ import annotations

import dataclasses
import math

import fig_broker
import fig_prompt
from fig_broker import Hop
from harness import BenchNode, Mode, Row

FIG = "7 growth"
SLOPE_MAX = 1.1  # linear, with room for the noise of a shared machine
NAMES = {
    "idle": "idle CPU",
    "uss": "supervisor USS",
    "claim_rate": "node.claim throughput",
    "claim_p50": "node.claim p50",
    "prompt_p50": "prompt p50",
    "dormant_idle": "idle CPU",
}
INVERSE = {"claim_rate"}  # a rate falls as cost grows: its slope is taken of 1/rate


def paths(node: BenchNode, hop: Hop, record: str, mode: Mode) -> dict[str, float]:
    """``node.claim`` renew (against the bare hop, now) and one client's prompts on ``record``
    (as many as figure 2's one client sends)."""
    short = dataclasses.replace(mode, seconds=1.0, samples=200)
    bare = fig_broker.measure_bare(hop, short)
    claim = fig_broker.measure_node(node, short)["claim"]
    with node.client() as client:
        prompt = fig_prompt.one_client(client, record, mode.samples)
    return {
        "claim_rate": claim["rate"],
        "bare_rate": bare["rate"],
        "claim_p50": claim["p50"],
        "bare_p50": bare["p50"],
        "prompt_p50": prompt["p50"],
    }


def rows_at(level: int, got: dict[str, float]) -> list[Row]:
    at = f"{level} live"
    rate, p50 = got["claim_rate"] / got["bare_rate"], got["claim_p50"] / got["bare_p50"]
    return [
        Row(
            FIG,
            f"node.claim renew throughput, {at}, req/s",
            got["claim_rate"],
            got["bare_rate"],
            ">= 0.6x",
            rate >= 0.6,
        ),
        Row(
            FIG,
            f"node.claim renew p50, {at}, us",
            got["claim_p50"],
            got["bare_p50"],
            "<= 1.3x",
            p50 <= 1.3,
        ),
        Row(
            FIG,
            f"session.prompt accepted p50, {at}, ms",
            got["prompt_p50"],
            None,
            "<= 1.5 ms",
            got["prompt_p50"] <= 1.5,
        ),
    ]


def slope(series: dict[int, float]) -> tuple[float, int, int] | None:
    """The log-log slope between the two largest steps, and those steps."""
    levels = sorted(k for k, v in series.items() if v > 0)
    if len(levels) < 2:
        return None
    a, b = levels[-2], levels[-1]
    return math.log(series[b] / series[a]) / math.log(b / a), a, b


def slopes(by_level: dict[int, dict[str, float]], unit: str = "live") -> list[Row]:
    rows = []
    for key in [k for k in NAMES if any(k in got for got in by_level.values())]:
        series = {n: got[key] for n, got in by_level.items() if key in got}
        if key in INVERSE:
            series = {n: 1 / v for n, v in series.items() if v}
        found = slope(series)
        if found is not None:
            k, a, b = found
            cost = " (cost: 1/rate)" if key in INVERSE else ""
            name = f"{NAMES[key]}{cost} {a}->{b} {unit}, log-log slope"
            rows.append(
                Row(
                    FIG,
                    name,
                    k,
                    1.0,
                    "<= 1 (linear)",
                    k <= SLOPE_MAX,
                    f"{SLOPE_MAX} allowed for noise",
                )
            )
    return rows
