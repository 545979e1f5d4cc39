"""``make bench`` does not rot: its smallest run (``--quick --only broker``) measures against a
real node and prints and writes the table with its columns. Figures are not asserted: these are
benchmarks, and a slow machine must not fail ``make test``. The same for the lab at scale
(``bench/bench_lab.py``), at its smallest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Node
from tests.e2e.netns import Hosts

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = ["figure", "measure", "roost", "baseline", "ratio", "target", "met"]


def test_quick_broker_run_prints_and_writes_the_table(node: Node, tmp_path: Path) -> None:
    out = tmp_path / "table.json"
    readme = (ROOT / "bench" / "README.md").read_text()
    proc = subprocess.run(
        [sys.executable, "bench/run.py", "--quick", "--only", "broker", "--out", str(out)],
        cwd=ROOT,
        env=node.env,  # the fixture's marker: its finaliser kills anything the run left
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n", 1)[0].split() == COLUMNS
    doc = json.loads(out.read_text())
    assert doc["columns"] == COLUMNS
    assert doc["mode"] == "quick" and doc["machine"]["cores"] >= 1
    assert len(doc["load_before"]) == 3
    names = [row["measure"] for row in doc["rows"]]
    assert any(n.startswith("ping throughput") for n in names), names
    assert any(n.startswith("node.claim renew p50") for n in names), names
    for row in doc["rows"]:
        assert row["figure"] == "1 broker"
        assert isinstance(row["roost"], float) and row["roost"] > 0, row
        assert set(row) >= {"measure", "roost", "baseline", "ratio", "target", "met"}
    assert (ROOT / "bench" / "README.md").read_text() == readme, "--only must not rewrite it"
    assert not node.processes(), "the run left processes behind"


def test_lab_bench_smallest_run_reports_every_part_and_leaves_nothing() -> None:
    """``bench/bench_lab.py`` (a hub and nodes in network namespaces; not in ``make bench``) at
    its smallest: every part of the report is there, nothing is left running. No figure is
    asserted."""
    why = Hosts.why_not()
    if why:
        pytest.skip(why)
    args = ["--nodes", "2", "--sessions", "4", "--list-reps", "3", "--json"]
    proc = subprocess.run(
        [sys.executable, "bench/bench_lab.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert "error" not in doc, doc["error"]
    assert doc["nodes"] == 2 and doc["sessions"] == 4
    assert set(doc["spawn"]) >= {"p50_ms", "p99_ms", "total_s"}
    assert doc["list"]["records"] == 4 and doc["list"]["reps"] == 3
    assert doc["events"]["expected"] == 4  # received is a figure: not asserted
    assert set(doc["hub"]) >= {"cpu_s", "rss_mib_peak"} and "cpu_s" in doc["nodes_total"]
    assert set(doc["restart"]) >= {"all_linked_after_kill_s", "all_linked_after_answer_heartbeats"}
    assert doc["left_running"] == 0
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert doc["netns_prefix"] not in namespaces, namespaces  # its namespaces are gone
