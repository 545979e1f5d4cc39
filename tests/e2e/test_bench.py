"""``make bench`` does not rot: its smallest run (``--quick --only broker``) measures against a
real node and prints and writes the table with its columns. Figures are not asserted: these are
benchmarks, and a slow machine must not fail ``make test``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import Node

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
