"""The real claude CLI using ``roost mcp`` as its MCP server, offline, against the loopback model
stand-in.

claude runs headless (``-p``) with only roost's server (``--mcp-config`` naming ``python -m roost
--state-dir <the node's> mcp``, ``--strict-mcp-config``) and roost's spawn and prompt tools allowed
(``--allowedTools``), and ``ENABLE_TOOL_SEARCH=false`` so that claude offers the model the MCP
tools themselves (by default 2.1.332 offers them only behind its ``ToolSearch`` tool, and a call of
one not yet searched for is refused "No such tool available"). The stand-in, given ``MCPTEST spawn
echo then prompt "..."``, calls ``mcp__roost__spawn`` and then ``mcp__roost__prompt`` with the
record id the spawn result holds. The node itself then shows the echo session and its answer to the
prompt; the stand-in's requests show the tool results reached the model.

The MCP server carries the node's test marker in its environment, and so does claude, so the node
fixture's finaliser kills them too; ``run_cli`` kills claude's process group on every way out.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import MARK, Node
from tests.fakes.model_api import MCP_DONE, ModelApi, anthropic_turns
from tests.real.harness import Cli, Run, claude_env, run_cli

pytestmark = pytest.mark.timeout(300)

PROMPTED = "hello from claude"
# what `roost mcp` needs from the test's environment: the node's state, runtime base, config
# file and test marker, and the code under test
PASSED_ON = (MARK, "ROOST_STATE_DIR", "ROOST_CONFIG", "XDG_RUNTIME_DIR", "PYTHONPATH")


def mcp_config(node: Node, path: Path) -> Path:
    """A ``--mcp-config`` file naming one stdio server, roost, as ``python -P -m roost
    --state-dir <the node's> mcp``."""
    env = {key: node.env[key] for key in PASSED_ON if node.env.get(key)}
    if "PYTHONPATH" not in env:  # run the code of this checkout, wherever roost is installed
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    server = {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-P", "-m", "roost", "--state-dir", str(node.state_dir), "mcp"],
        "env": env,
    }
    path.write_text(json.dumps({"mcpServers": {"roost": server}}))
    return path


def blocks(run: Run, role: str, kind: str) -> list[dict[str, Any]]:
    """The content blocks of type ``kind`` in claude's ``role`` messages of its stream-json."""
    return [
        block
        for event in run.events
        if event.get("type") == role
        for block in event["message"]["content"]
        if isinstance(block, dict) and block.get("type") == kind
    ]


def test_claude_spawns_and_prompts_an_echo_session_through_roost_mcp(
    node: Node, claude: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    node.up()
    # ENABLE_TOOL_SEARCH=false: the MCP tools go in the request's tools (by default claude defers
    # them behind its ToolSearch tool, loaded only once the model searched for them). claude -p
    # waits for the server to connect before its first request, up to MCP_TIMEOUT ms.
    env = {
        **claude_env(tmp_path / "homes", model_api, cwd),
        "ENABLE_TOOL_SEARCH": "false",
        "MCP_TIMEOUT": "60000",
        MARK: node.mark,
    }
    config = mcp_config(node, tmp_path / "mcp.json")
    args = [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--mcp-config",
        str(config),
        "--strict-mcp-config",
        "--allowedTools",
        "mcp__roost__spawn,mcp__roost__prompt",
        "--",
        f'MCPTEST spawn echo then prompt "{PROMPTED}"',
    ]
    run = run_cli(claude, args, env, cwd, timeout=180)
    assert run.rc == 0, run.describe()
    init = next(e for e in run.events if e.get("subtype") == "init")
    servers = [(s["name"], s["status"]) for s in init["mcp_servers"]]
    assert servers == [("roost", "connected")], run.describe()
    results = [e for e in run.events if e.get("type") == "result"]
    assert len(results) == 1 and results[0]["is_error"] is False, run.describe()
    assert results[0]["result"] == MCP_DONE, run.describe()

    # claude called spawn, then prompt with the id spawn answered
    uses = blocks(run, "assistant", "tool_use")
    assert [u["name"] for u in uses] == ["mcp__roost__spawn", "mcp__roost__prompt"], uses
    outcomes = blocks(run, "user", "tool_result")
    assert len(outcomes) == 2 and not any(o.get("is_error") for o in outcomes), outcomes
    assert uses[0]["input"] == {"provider": "echo"}
    rid = uses[1]["input"]["id"]
    assert uses[1]["input"] == {"id": rid, "text": PROMPTED}

    # the node has that echo session, in claude's working directory, and it got the prompt
    listed = {r["id"]: r for r in node.run("ls")["records"]}
    assert rid in listed and listed[rid]["provider"] == "echo", listed
    assert node.record(rid)["cwd"] == str(cwd)
    node.wait_screen(rid, f"echo: {PROMPTED}", timeout=30)

    # the tool results reached the model: a later request carries the spawn result (the record's
    # id) and the last one the prompt's too
    requests = [b for b in model_api.bodies("/v1/messages") if b.get("tools")]
    seen = [[r for t in anthropic_turns(b) for r in t.tool_results] for b in requests]
    assert [len(s) for s in seen if s] == [1, 2], seen
    spawned = json.loads(seen[-1][0])
    assert spawned["record"]["id"] == rid and spawned["record"]["provider"] == "echo"
    assert json.loads(seen[-1][1])["accepted"] is True, seen[-1][1]
