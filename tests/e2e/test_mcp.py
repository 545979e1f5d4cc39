"""``roost mcp``: the MCP server over stdio, driven by the SDK's own stdio client against a real
node. The server is a process of its own (``python -m roost --state-dir ... mcp``) with the node's
test marker in its environment, so the node fixture's finaliser kills it too when a test fails;
the stdio client ends it (stdin closed, then the process tree killed) on every way out."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from tests.e2e.conftest import FAKES, Node

TOOLS = {"list", "show", "spawn", "wait", "prompt", "key", "turn", "stop", "resume", "events"}
MUTATING = {"spawn", "prompt", "key", "turn", "stop", "resume"}
DEADLINE_S = 90.0  # one test's conversation with the server, whole


@asynccontextmanager
async def served(
    node: Node, cwd: Path, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with ``roost --state-dir <node's> mcp`` run in ``cwd``; its
    stderr goes to a file beside ``cwd``, printed when the test fails."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-P", "-m", "roost", "--state-dir", str(node.state_dir), "mcp"],
        env=env or node.env,
        cwd=cwd,
    )
    errlog = cwd.parent / f"{cwd.name}.mcp-stderr"
    with errlog.open("w") as err:
        try:
            async with (
                stdio_client(params, errlog=err) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                yield session
        except BaseException:
            err.flush()
            print(errlog.read_text(), file=sys.stderr)
            raise


def run(node: Node, cwd: Path, body: Callable[[ClientSession], Awaitable[None]]) -> None:
    async def main() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with served(node, cwd) as session:
                await body(session)

    anyio.run(main)


async def ok(session: ClientSession, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """The tool's structured result; fails on a tool error."""
    result = await session.call_tool(tool, args)
    assert not result.is_error, (tool, args, text(result))
    doc: dict[str, Any] = result.structured_content
    assert json.loads(text(result)) == doc  # the same document as text, for clients without
    return doc


async def refused(session: ClientSession, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """The tool error's structured ``error`` ({code, message, detail}); its text starts with
    the code."""
    result = await session.call_tool(tool, args)
    assert result.is_error, (tool, args, result.structured_content)
    error: dict[str, Any] = result.structured_content["error"]
    assert text(result).startswith(f"{error['code']}: "), text(result)
    return error


def text(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return work


def test_the_tools_and_their_input_schemas(node: Node, tmp_path: Path) -> None:
    node.up()

    async def body(session: ClientSession) -> None:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        for name, tool in tools.items():
            schema = tool.input_schema
            assert schema["type"] == "object" and schema["additionalProperties"] is False, name
            assert set(schema["required"]) <= set(schema["properties"]), name
            for prop in schema["properties"].values():
                assert prop.get("type") and prop.get("description"), (name, prop)
            assert tool.description and len(tool.description) > 80, name
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is (name not in MUTATING), name
            assert ("op" in schema["properties"]) is (name in MUTATING), name
        assert tools["spawn"].input_schema["required"] == ["provider"]
        assert "working directory of this MCP server" in json.dumps(tools["spawn"].input_schema)
        assert tools["prompt"].input_schema["required"] == ["id", "text"]
        keys = tools["key"].input_schema["properties"]["keys"]
        assert "enter" in keys["items"]["enum"] and keys["minItems"] == 1
        assert "needs_human" in (tools["show"].description or "")
        assert "caller's decision" in (tools["prompt"].description or "")
        # arguments outside the schema are refused bad-request, naming the field
        wrong = await refused(session, "show", {"id": "x", "screan": True})
        assert wrong["code"] == "bad-request" and wrong["detail"]["field"] == "screan"
        wrong = await refused(session, "key", {"id": "x", "keys": ["entr"]})
        assert wrong["code"] == "bad-request" and wrong["detail"]["field"] == "keys"
        wrong = await refused(session, "spawn", {})
        assert wrong["detail"]["field"] == "provider"

    run(node, workdir(tmp_path), body)


def test_an_echo_session_spawned_prompted_read_stopped_and_resumed(
    node: Node, tmp_path: Path
) -> None:
    node.up()
    work = workdir(tmp_path)

    async def body(session: ClientSession) -> None:
        spawned = await ok(session, "spawn", {"provider": "echo", "name": "helper"})
        record = spawned["record"]
        assert record["state"] == "live" and spawned["needs_human"] is False
        assert record["cwd"] == str(work)  # no cwd given: the server's own
        rid = record["id"]
        ready = await ok(session, "wait", {"id": "helper", "timeout": 30})
        assert ready["outcome"] == "ready" and ready["record"]["activity"] == "ready"
        listed = await ok(session, "list", {})
        assert [r["id"] for r in listed["records"]] == [rid] and listed["needs_human"] == []
        assert listed["records"][0]["needs_human"] is False

        typed = await ok(session, "prompt", {"id": "helper", "text": "hello from mcp"})
        assert typed["accepted"] is True and typed["record"] == rid
        answered = await ok(session, "wait", {"id": rid, "after_seq": typed["seq"], "timeout": 30})
        assert answered["outcome"] == "ready", answered
        shown = await ok(session, "show", {"id": "helper", "screen": True})
        assert "echo: hello from mcp" in shown["screen"], shown["screen"]
        assert shown["needs_human"] is False and shown["attention"] is None
        plain = await ok(session, "show", {"id": rid})
        assert "screen" not in plain or plain["screen"] is None
        pressed = await ok(session, "key", {"id": rid, "keys": ["enter"]})
        assert pressed["seq"] > typed["seq"]

        log = await ok(session, "events", {"id": rid, "after": 0, "limit": 1000})
        inputs = [e["data"] for e in log["events"] if e["kind"] == "session.input"]
        assert inputs[0]["input"] == "prompt" and inputs[0]["text"] == "hello from mcp"
        page = await ok(session, "events", {"after": 0, "limit": 1})
        assert len(page["events"]) == 1 and page["more"] is True

        stopped = await ok(session, "stop", {"id": "helper", "grace_ms": 500})
        assert stopped["record"]["state"] == "dormant"
        gone = await refused(session, "prompt", {"id": rid, "text": "anyone?"})
        assert gone["code"] == "session-not-live"
        resumed = await ok(session, "resume", {"id": "helper"})
        assert resumed["record"]["generation"] == 2 and resumed["record"]["state"] == "live"
        again = await ok(session, "wait", {"id": rid, "timeout": 30})
        assert again["outcome"] == "ready"
        await ok(session, "stop", {"id": rid, "grace_ms": 500})
        ended = await ok(session, "wait", {"id": rid, "timeout": 5})
        assert ended["outcome"] == "exited" and ended["record"]["state"] == "dormant"

    run(node, work, body)
    assert node.record("helper")["state"] == "dormant"  # the CLI sees what the tools did


def test_a_stream_turn_waited_for_and_an_unknown_record(node: Node, tmp_path: Path) -> None:
    node.up()
    work = workdir(tmp_path)

    async def body(session: ClientSession) -> None:
        spawned = await ok(
            session, "spawn", {"provider": "echo", "mode": "stream", "cwd": str(work)}
        )
        rid = spawned["record"]["id"]
        ready = await ok(session, "wait", {"id": rid, "timeout": 30})
        assert ready["outcome"] == "ready"
        turn = await ok(
            session, "turn", {"id": rid, "text": "stream me", "wait": True, "op": "turn-op-1"}
        )
        assert turn["ended"] is True and turn["turn"]["state"] == "completed", turn
        assert turn["output"] == "echo: stream me" and turn["turn_id"].startswith("t")
        again = await ok(session, "turn", {"id": rid, "text": "other", "op": "turn-op-1"})
        assert again["duplicate"] is True and again["turn"] == turn["turn_id"]

        started = await ok(session, "turn", {"id": rid, "text": "later"})
        assert started["accepted"] is True and started["turn"] != turn["turn_id"]
        latest = await ok(session, "turn", {"id": rid, "wait": True, "timeout": 30})
        assert latest["turn_id"] == started["turn"] and latest["output"] == "echo: later"

        for tool, args in (
            ("show", {"id": "r0000000000"}),
            ("prompt", {"id": "no-such-session", "text": "x"}),
            ("wait", {"id": "no-such-session"}),
            ("events", {"id": "no-such-session"}),
        ):
            error = await refused(session, tool, args)
            assert error["code"] == "not-found", (tool, error)
        mode = await refused(session, "prompt", {"id": rid, "text": "x"})
        assert mode["code"] == "bad-request" and mode["detail"]["field"] == "mode"
        pty_only = await refused(session, "wait", {"id": rid, "after_seq": 0})
        assert pty_only["code"] == "bad-request" and pty_only["detail"]["field"] == "after_seq"

    run(node, work, body)


def test_a_repeated_op_id_answers_the_first_outcome(node: Node, tmp_path: Path) -> None:
    node.up()
    work = workdir(tmp_path)

    async def body(session: ClientSession) -> None:
        args = {"provider": "echo", "name": "once", "cwd": str(work), "op": "spawn-op-1"}
        first = await ok(session, "spawn", args)
        repeat = await ok(session, "spawn", args)
        assert repeat["duplicate"] is True and repeat["record"]["id"] == first["record"]["id"]
        assert len((await ok(session, "list", {}))["records"]) == 1
        await ok(session, "wait", {"id": "once", "timeout": 30})
        typed = await ok(session, "prompt", {"id": "once", "text": "one", "op": "prompt-op-1"})
        retry = await ok(session, "prompt", {"id": "once", "text": "two", "op": "prompt-op-1"})
        assert retry["duplicate"] is True and retry["seq"] == typed["seq"]
        log = await ok(session, "events", {"id": "once", "limit": 1000})
        texts = [e["data"]["text"] for e in log["events"] if e["kind"] == "session.input"]
        assert texts == ["one"]  # the retry typed nothing

    run(node, work, body)


def test_an_observer_token_reads_and_is_refused_forbidden(node: Node, tmp_path: Path) -> None:
    node.up()
    work = workdir(tmp_path)
    rid = node.run("spawn", "echo", "--name", "watched", "--cwd", str(work))["record"]["id"]
    observer = {**node.env, "ROOST_TOKEN": (node.state_dir / "observer-token").read_text()}

    async def main() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with served(node, work, env=observer) as session:
                listed = await ok(session, "list", {})
                assert [r["id"] for r in listed["records"]] == [rid]
                for tool, args in (
                    ("spawn", {"provider": "echo", "cwd": str(work)}),
                    ("prompt", {"id": rid, "text": "x"}),
                    ("stop", {"id": rid}),
                ):
                    error = await refused(session, tool, args)
                    assert error["code"] == "forbidden", (tool, error)

    anyio.run(main)
    assert [r["id"] for r in node.run("ls")["records"]] == [rid]
    assert node.record(rid)["state"] == "live"


def test_a_session_that_needs_a_human_is_reported_and_left_alone(
    node: Node, tmp_path: Path
) -> None:
    """A login screen: wait's outcome is attention, every result that holds the record says
    needs_human with the reason, and nothing is typed into it."""
    node.up()
    work = workdir(tmp_path)
    env = {
        "ROOST_CLAUDE_BIN": str(FAKES / "claude"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-config"),
        "FAKE_CLAUDE_SCREEN": "login",
    }

    async def body(session: ClientSession) -> None:
        spawned = await ok(session, "spawn", {"provider": "claude", "name": "cc", "env": env})
        rid = spawned["record"]["id"]
        waited = await ok(session, "wait", {"id": "cc", "timeout": 30})
        assert waited["outcome"] == "attention", waited
        assert waited["needs_human"] is True and waited["attention"] == "login"
        listed = await ok(session, "list", {})
        assert listed["needs_human"] == [rid] and listed["records"][0]["needs_human"] is True
        shown = await ok(session, "show", {"id": rid, "screen": True})
        assert shown["needs_human"] is True and shown["attention"] == "login"
        log = await ok(session, "events", {"id": rid, "limit": 1000})
        assert not [e for e in log["events"] if e["kind"] == "session.input"]
        await ok(session, "stop", {"id": rid, "grace_ms": 500})

    run(node, work, body)


def test_a_scoped_token_gives_the_agent_only_the_sessions_it_spawns(
    node: Node, tmp_path: Path
) -> None:
    node.up()
    work = workdir(tmp_path)
    theirs = node.run("spawn", "echo", "--name", "theirs", "--cwd", str(work))["record"]["id"]
    token = node.run("token", "new", "--scope", "own", "--name", "agent")
    scoped = {**node.env, "ROOST_TOKEN": token["token"]}

    async def main() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with served(node, work, env=scoped) as session:
                assert (await ok(session, "list", {}))["records"] == []
                mine = (await ok(session, "spawn", {"provider": "echo", "name": "mine"}))["record"]
                assert mine["owner"] == token["id"]
                listed = await ok(session, "list", {})
                assert [r["id"] for r in listed["records"]] == [mine["id"]]
                for tool, args in (
                    ("show", {"id": theirs}),
                    ("prompt", {"id": theirs, "text": "x"}),
                    ("stop", {"id": theirs}),
                    ("events", {"id": theirs}),
                ):
                    error = await refused(session, tool, args)
                    assert error["code"] == "forbidden" and error["detail"]["record"] == theirs

    anyio.run(main)
    assert node.record(theirs)["state"] == "live"
