"""The Node.js client (clients/node, written from docs/PROTOCOL.md alone) against a real node.

The script connects, spawns an echo session, sees its prompt answered on screen and its
`session.input` event on the SUB socket, disconnects, lets a second connection prompt and rename,
reconnects and catches up with `events.since`, then stops the session. Python checks the outcome.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Node

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "node"
SCRIPT = CLIENT / "test" / "e2e.mjs"
NODE_BIN = shutil.which("node")

pytestmark = [
    pytest.mark.skipif(NODE_BIN is None, reason="the `node` binary (Node.js) is not installed"),
    pytest.mark.skipif(
        not (CLIENT / "node_modules").is_dir(),
        reason="clients/node/node_modules is absent: run `npm ci --prefix clients/node`",
    ),
]


def test_node_client_end_to_end(node: Node, tmp_path: Path) -> None:
    node.up()
    workdir = tmp_path / "work"
    workdir.mkdir()
    assert NODE_BIN is not None
    proc = subprocess.run(
        [NODE_BIN, str(SCRIPT), str(node.state_dir), str(workdir)],
        env=node.env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"rc={proc.returncode} out={proc.stdout!r} err={proc.stderr!r}"
    summary: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["ok"] is True and summary["screen_has_answer"] is True
    assert summary["errors"] == {code: code for code in summary["errors"]}
    assert set(summary["errors"]) == {
        "unauthorized",
        "unknown-method",
        "not-found",
        "stale-generation",
    }
    last: int = summary["last_seq"]
    missed: list[int] = summary["missed_seqs"]
    assert missed == list(range(last + 1, last + 1 + len(missed)))
    assert {"session.input", "record.renamed"} <= set(summary["missed_kinds"])

    # From Python: the record is dormant under its new name, and the log holds what the client saw
    rid: str = summary["record"]
    rec = node.record(rid)
    assert rec["state"] == "dormant" and rec["active"] is None
    assert rec["name"] == summary["renamed"] and rec["generation"] == 1
    events = node.events()
    by_seq = {e["seq"]: e for e in events}
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    inputs = [
        (e["seq"], e["data"]["input"], e["data"]["text"])
        for e in events
        if e["kind"] == "session.input" and e["record"] == rid
    ]
    assert inputs == [
        (summary["prompt_seq"], "prompt", "hello from node"),
        (summary["second_seq"], "prompt", "second prompt from node"),
    ]
    renamed = by_seq[summary["rename_seq"]]
    assert renamed["kind"] == "record.renamed" and renamed["record"] == rid
    assert renamed["data"] == {"from": summary["name"], "to": summary["renamed"]}
    # exactly the events that happened while the client was away, as the log has them
    assert [by_seq[s]["kind"] for s in missed] == summary["missed_kinds"]
    assert by_seq[summary["dormant_seq"]]["kind"] == "record.state"
    assert by_seq[summary["dormant_seq"]]["data"]["to"] == "dormant"
    assert summary["filled_seqs"] == list(range(last + 1, summary["dormant_seq"] + 1))
