"""The loopback model-API stand-in (tests/fakes/model_api.py), driven with urllib."""

from __future__ import annotations

import gzip
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_api import (
    HELLO,
    LONG_END,
    LONG_WORDS,
    MCP_DONE,
    TOOL_DONE,
    ModelApi,
    long_answer,
)

MODEL_API = Path(__file__).resolve().parents[1] / "fakes" / "model_api.py"
REMINDER = "<system-reminder>\nToday is a day.\n</system-reminder>"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ModelApi]:
    server = ModelApi(log_path=tmp_path / "requests.jsonl", slow_seconds=0.6).start()
    try:
        yield server
    finally:
        server.close()


# -- client helpers ------------------------------------------------------------------------------


def post(api: ModelApi, path: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
    req = urllib.request.Request(
        api.url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer t"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), resp.read()


def get(api: ModelApi, path: str, method: str = "GET") -> tuple[int, Any]:
    req = urllib.request.Request(api.url + path, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            data = resp.read()
            return resp.status, json.loads(data) if data else None
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def sse(api: ModelApi, path: str, body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """POST and parse the SSE stream incrementally: [(event name or None, data)]."""
    req = urllib.request.Request(
        api.url + path,
        data=json.dumps({**body, "stream": True}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    events: list[tuple[str | None, Any]] = []
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        name: str | None = None
        data: list[str] = []
        for raw in resp:  # line by line, as the frames arrive
            line = raw.decode().rstrip("\r\n")
            if line.startswith("event:"):
                name = line[len("event:") :].strip()
            elif line.startswith("data:"):
                data.append(line[len("data:") :].strip())
            elif line == "" and (name or data):
                text = "\n".join(data)
                events.append((name, text if text == "[DONE]" else json.loads(text)))
                name, data = None, []
    return events


# -- Anthropic Messages --------------------------------------------------------------------------


def anthropic_text(events: list[tuple[str | None, Any]]) -> str:
    return "".join(
        d["delta"]["text"]
        for _, d in events
        if d["type"] == "content_block_delta" and d["delta"]["type"] == "text_delta"
    )


def test_anthropic_stream_event_sequence(api: ModelApi) -> None:
    body = {"model": "claude-x", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    events = sse(api, "/v1/messages?beta=true", body)
    kinds = [name for name, _ in events]
    assert kinds[:3] == ["message_start", "content_block_start", "ping"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert all(name == d["type"] for name, d in events)  # event: line matches data.type
    start = events[0][1]["message"]
    assert start["role"] == "assistant" and start["model"] == "claude-x"
    assert start["content"] == [] and start["stop_reason"] is None
    assert anthropic_text(events) == HELLO
    assert kinds.count("content_block_delta") > 1  # real deltas, not one blob
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"


def test_anthropic_non_stream_and_count_tokens(api: ModelApi) -> None:
    body = {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]}
    status, ctype, data = post(api, "/v1/messages", body)
    doc = json.loads(data)
    assert status == 200 and ctype == "application/json"
    assert doc["type"] == "message" and doc["content"] == [{"type": "text", "text": HELLO}]
    assert doc["stop_reason"] == "end_turn" and doc["usage"]["output_tokens"] > 0
    status, _, data = post(api, "/v1/messages/count_tokens", body)
    assert status == 200 and json.loads(data)["input_tokens"] >= 1


def test_anthropic_tool_round_trip(api: ModelApi) -> None:
    tools = [{"name": "Read", "input_schema": {}}, {"name": "Bash", "input_schema": {}}]
    user = {
        "role": "user",
        "content": [
            {"type": "text", "text": REMINDER},
            {"type": "text", "text": "TOOLTEST please"},
        ],
    }
    events = sse(api, "/v1/messages", {"model": "m", "messages": [user], "tools": tools})
    block = events[1][1]["content_block"]
    assert block["type"] == "tool_use" and block["name"] == "Bash" and block["input"] == {}
    partial = "".join(
        d["delta"]["partial_json"] for _, d in events if d["type"] == "content_block_delta"
    )
    assert json.loads(partial) == {"command": "echo hi"}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"

    history = [
        user,
        {"role": "assistant", "content": [{**block, "input": json.loads(partial)}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": "hi"}],
        },
    ]
    events = sse(api, "/v1/messages", {"model": "m", "messages": history, "tools": tools})
    assert anthropic_text(events) == TOOL_DONE


def test_anthropic_recall_skips_injected_context(api: ModelApi) -> None:
    history = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": REMINDER},
                {"type": "text", "text": "hello there"},
            ],
        },
        {"role": "system", "content": "# Environment"},  # claude 2.1.332 sends one of these
        {"role": "assistant", "content": [{"type": "text", "text": HELLO}]},
        {"role": "user", "content": [{"type": "text", "text": "RECALL"}]},
    ]
    events = sse(api, "/v1/messages", {"model": "m", "messages": history})
    assert anthropic_text(events) == "hello there"
    alone = [{"role": "user", "content": "RECALL"}]
    assert anthropic_text(sse(api, "/v1/messages", {"messages": alone})) == "(no earlier turn)"


# -- OpenAI Responses ----------------------------------------------------------------------------


def responses_body(*items: dict[str, Any], tools: list[str] | None = None) -> dict[str, Any]:
    return {
        "model": "mock-model",
        "input": list(items),
        "tools": [{"type": "function", "name": n, "parameters": {}} for n in tools or []],
    }


def msg(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def test_responses_stream_text(api: ModelApi) -> None:
    events = sse(api, "/v1/responses", responses_body(msg("user", "hi")))
    kinds = [name for name, _ in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    for needed in (
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_item.done",
    ):
        assert needed in kinds
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    text = "".join(d["delta"] for _, d in events if d["type"] == "response.output_text.delta")
    assert text == HELLO
    done = next(d for _, d in events if d["type"] == "response.output_item.done")["item"]
    assert done["type"] == "message" and done["content"][0]["text"] == HELLO
    completed = events[-1][1]["response"]
    assert completed["status"] == "completed" and completed["usage"]["total_tokens"] > 0
    assert completed["id"] == events[0][1]["response"]["id"]


@pytest.mark.parametrize(
    ("tools", "name", "args"),
    [
        (["exec_command", "write_stdin"], "exec_command", {"cmd": "echo hi"}),  # codex 0.171.0
        (["shell_command"], "shell_command", {"command": "echo hi"}),
        (["shell"], "shell", {"command": ["bash", "-lc", "echo hi"]}),
    ],
)
def test_responses_tool_round_trip(
    api: ModelApi, tools: list[str], name: str, args: dict[str, Any]
) -> None:
    env_ctx = msg("user", "<environment_context>\n  <cwd>/x</cwd>\n</environment_context>")
    prompt = msg("user", "TOOLTEST")
    events = sse(api, "/v1/responses", responses_body(env_ctx, prompt, tools=tools))
    call = next(d for _, d in events if d["type"] == "response.output_item.done")["item"]
    assert call["type"] == "function_call" and call["name"] == name
    assert json.loads(call["arguments"]) == args
    deltas = "".join(
        d["delta"] for _, d in events if d["type"] == "response.function_call_arguments.delta"
    )
    assert deltas == call["arguments"]
    assert events[-1][1]["response"]["output"] == [call]

    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "hi\n"}
    events = sse(api, "/v1/responses", responses_body(env_ctx, prompt, call, output, tools=tools))
    text = "".join(d["delta"] for _, d in events if d["type"] == "response.output_text.delta")
    assert text == TOOL_DONE


def test_responses_recall_and_non_stream(api: ModelApi) -> None:
    body = responses_body(
        msg("developer", "You are a coding agent."),
        msg("user", "<environment_context>\n</environment_context>"),
        msg("user", "first question"),
        msg("assistant", HELLO),
        msg("user", "RECALL"),
    )
    status, ctype, data = post(api, "/v1/responses", body)
    doc = json.loads(data)
    assert status == 200 and ctype == "application/json"
    assert doc["object"] == "response" and doc["status"] == "completed"
    assert doc["output"][0]["content"][0]["text"] == "first question"


def test_responses_json_schema_output(api: ModelApi) -> None:
    # codex's TUI asks for a task title this way after the first turn.
    schema = {
        "type": "object",
        "properties": {"title": {"type": "string", "minLength": 1, "maxLength": 36}},
        "required": ["title"],
        "additionalProperties": False,
    }
    body = responses_body(msg("user", "Generate a concise, single-line task title"))
    body["text"] = {
        "format": {"type": "json_schema", "name": "t", "strict": True, "schema": schema}
    }
    events = sse(api, "/v1/responses", body)
    text = "".join(d["delta"] for _, d in events if d["type"] == "response.output_text.delta")
    assert json.loads(text) == {"title": "Mock title"}


# -- OpenAI Chat Completions ---------------------------------------------------------------------


def chat_body(*messages: dict[str, Any], usage: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "mock-model",
        "messages": list(messages),
        "tools": [
            {"type": "function", "function": {"name": n, "parameters": {}}}
            for n in ("Read", "Bash")
        ],
    }
    if usage:
        body["stream_options"] = {"include_usage": True}
    return body


def chat_text(events: list[tuple[str | None, Any]]) -> str:
    return "".join(
        d["choices"][0]["delta"].get("content") or ""
        for _, d in events
        if d != "[DONE]" and d["choices"]
    )


def test_chat_stream_text_usage_and_done(api: ModelApi) -> None:
    events = sse(
        api, "/v1/chat/completions", chat_body({"role": "user", "content": "hi"}, usage=True)
    )
    assert events[-1] == (None, "[DONE]")
    chunks = [d for _, d in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chat_text(events) == HELLO
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


def test_chat_tool_round_trip(api: ModelApi) -> None:
    prompt = {"role": "user", "content": "TOOLTEST"}
    reminder = {"role": "user", "content": REMINDER}  # kimi appends these after the prompt
    events = sse(api, "/v1/chat/completions", chat_body(prompt, reminder))
    assert events[-1] == (None, "[DONE]")
    deltas = [tc for _, d in events[:-1] for tc in d["choices"][0]["delta"].get("tool_calls") or []]
    assert deltas[0]["id"].startswith("call_") and deltas[0]["function"]["name"] == "Bash"
    arguments = "".join(tc["function"].get("arguments", "") for tc in deltas)
    assert json.loads(arguments) == {"command": "echo hi"}
    assert {tc["index"] for tc in deltas} == {0}
    assert events[-2][1]["choices"][0]["finish_reason"] == "tool_calls"

    call = {
        "id": deltas[0]["id"],
        "type": "function",
        "function": {"name": "Bash", "arguments": arguments},
    }
    history: list[dict[str, Any]] = [
        prompt,
        reminder,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "hi\n"},
    ]
    assert chat_text(sse(api, "/v1/chat/completions", chat_body(*history))) == TOOL_DONE


def test_chat_recall_and_non_stream(api: ModelApi) -> None:
    body = chat_body(
        {"role": "system", "content": "You are Kimi."},
        {"role": "user", "content": "hello"},
        {"role": "user", "content": REMINDER},
        {"role": "assistant", "content": HELLO},
        {"role": "user", "content": [{"type": "text", "text": "RECALL"}]},
    )
    status, _, data = post(api, "/v1/chat/completions", body)
    doc = json.loads(data)
    assert status == 200 and doc["object"] == "chat.completion"
    assert doc["choices"][0]["message"] == {"role": "assistant", "content": "hello"}
    assert doc["choices"][0]["finish_reason"] == "stop"
    status, _, data = post(
        api, "/v1/chat/completions", chat_body({"role": "user", "content": "TOOLTEST"})
    )
    choice = json.loads(data)["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "ok": {"type": "boolean"},
            "kind": {"enum": ["a", "b"]},
            "tags": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        },
    }
    body = chat_body({"role": "user", "content": "classify"})
    body["response_format"] = {"type": "json_schema", "json_schema": {"schema": schema}}
    status, _, data = post(api, "/v1/chat/completions", body)
    content = json.loads(data)["choices"][0]["message"]["content"]
    assert json.loads(content) == {"n": 0, "ok": False, "kind": "a", "tags": ["Mock tags"]}
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "Bash"


# -- the rest of the surface ---------------------------------------------------------------------


def test_models_preflight_and_unknown(api: ModelApi) -> None:
    status, doc = get(api, "/v1/models")
    assert status == 200 and [m["id"] for m in doc["data"]] == ["mock-model"]
    assert doc["object"] == "list" and doc["has_more"] is False
    assert get(api, "/api/hello")[0] == 200
    assert get(api, "/api/hello", method="HEAD")[0] == 200  # claude 2.1.332's preflight
    status, doc = get(api, "/nope")
    assert status == 404 and doc["type"] == "error"


def test_bad_json_is_400(api: ModelApi) -> None:
    req = urllib.request.Request(api.url + "/v1/messages", data=b"{nope", method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 400
    assert api.requests[-1]["body"] is None and api.requests[-1]["raw"] == "{nope"


def test_gzip_and_chunked_request_bodies(api: ModelApi) -> None:
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
    try:
        conn.request(
            "POST", "/v1/messages", body=gzip.compress(body), headers={"Content-Encoding": "gzip"}
        )
        assert json.loads(conn.getresponse().read())["content"][0]["text"] == HELLO
        # Same keep-alive connection, chunked upload this time.
        conn.request("POST", "/v1/messages", body=iter([body[:10], body[10:]]), encode_chunked=True)
        assert json.loads(conn.getresponse().read())["content"][0]["text"] == HELLO
    finally:
        conn.close()
    assert [r["body"] for r in api.requests] == [json.loads(body)] * 2


def test_unsupported_content_encoding_is_415(api: ModelApi) -> None:
    req = urllib.request.Request(
        api.url + "/v1/responses", data=b"x", headers={"Content-Encoding": "zstd"}, method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 415


def test_slow_prompt_streams_over_time(api: ModelApi) -> None:
    start = time.monotonic()
    events = sse(api, "/v1/messages", {"messages": [{"role": "user", "content": "SLOW hi"}]})
    assert time.monotonic() - start >= 0.5  # slow_seconds=0.6 spread over the deltas
    assert anthropic_text(events) == HELLO


def test_long_prompt_streams_a_long_answer_slowly(api: ModelApi) -> None:
    start = time.monotonic()
    events = sse(api, "/v1/messages", {"messages": [{"role": "user", "content": "LONG please"}]})
    assert time.monotonic() - start >= 0.5  # always slow, however it is asked
    text = anthropic_text(events)
    assert text == long_answer() and text.endswith(LONG_END)
    assert len(text.split()) >= LONG_WORDS


def test_records_every_request_and_logs_jsonl(api: ModelApi, tmp_path: Path) -> None:
    post(api, "/v1/messages", {"messages": [{"role": "user", "content": "one"}]})
    get(api, "/v1/models")
    sse(api, "/v1/responses", responses_body(msg("user", "two")))
    recorded = api.requests
    assert [(r["method"], r["path"]) for r in recorded] == [
        ("POST", "/v1/messages"),
        ("GET", "/v1/models"),
        ("POST", "/v1/responses"),
    ]
    assert recorded[0]["headers"]["authorization"] == "Bearer t"
    assert recorded[0]["body"]["messages"][0]["content"] == "one"
    assert api.bodies("/v1/responses")[0]["stream"] is True
    logged = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [(r["method"], r["path"], r["body"]) for r in logged] == [
        (r["method"], r["path"], r["body"]) for r in recorded
    ]
    recorded[0]["body"] = "mutated"  # a copy: the server's record is untouched
    assert api.requests[0]["body"] != "mutated"
    api.clear()
    assert api.requests == []


def test_standalone_process_ready_file(tmp_path: Path) -> None:
    ready = tmp_path / "port"
    log = tmp_path / "log.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(MODEL_API),
            "--port",
            "0",
            "--ready-file",
            str(ready),
            "--log",
            str(log),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    try:
        deadline = time.monotonic() + 15
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "ready file never appeared"
            time.sleep(0.05)  # polling a file with a deadline
        port = int(ready.read_text())
        assert port > 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as resp:
            assert json.loads(resp.read())["data"][0]["id"] == "mock-model"
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode == 0
        assert f"http://127.0.0.1:{port}" in out.decode()
        assert json.loads(log.read_text().splitlines()[0])["path"] == "/v1/models"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_permtest_calls_a_command_that_writes(api: ModelApi) -> None:
    """PERMTEST: a tool call a CLI asks permission for (``echo hi`` is let through unasked)."""
    tools = [{"name": "Bash", "input_schema": {}}]
    user = {"role": "user", "content": [{"type": "text", "text": "PERMTEST please"}]}
    events = sse(api, "/v1/messages", {"model": "m", "messages": [user], "tools": tools})
    partial = "".join(
        d["delta"]["partial_json"] for _, d in events if d["type"] == "content_block_delta"
    )
    assert json.loads(partial) == {"command": "touch made_by_mock.txt"}


def test_mcptest_calls_the_mcp_tools_spawn_then_prompt(api: ModelApi) -> None:
    """MCPTEST: spawn (the tool named ``...__spawn``), then prompt with the record id that
    spawn's result holds, then MCP_DONE; each step after the tool result of the one before."""
    tools: list[dict[str, Any]] = [
        {"name": n, "input_schema": {}} for n in ("Bash", "mcp__x__spawn", "mcp__x__prompt")
    ]
    user = {
        "role": "user",
        "content": [{"type": "text", "text": 'MCPTEST spawn echo then prompt "hi there"'}],
    }
    history: list[dict[str, Any]] = [user]

    def step() -> dict[str, Any]:
        events = sse(api, "/v1/messages", {"model": "m", "messages": history, "tools": tools})
        block: dict[str, Any] = events[1][1]["content_block"]
        partial = "".join(
            d["delta"]["partial_json"] for _, d in events if d["type"] == "content_block_delta"
        )
        assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
        return {**block, "input": json.loads(partial)}

    def answer(call: dict[str, Any], result: Any) -> None:
        content = [{"type": "text", "text": json.dumps(result)}]
        history.append({"role": "assistant", "content": [call]})
        history.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": content}],
            }
        )

    spawn = step()
    assert (spawn["name"], spawn["input"]) == ("mcp__x__spawn", {"provider": "echo"})
    answer(spawn, {"record": {"id": "r0123456789", "provider": "echo"}})
    prompt = step()
    assert (prompt["name"], prompt["input"]) == (
        "mcp__x__prompt",
        {"id": "r0123456789", "text": "hi there"},
    )
    answer(prompt, {"accepted": True, "seq": 3})
    events = sse(api, "/v1/messages", {"model": "m", "messages": history, "tools": tools})
    assert anthropic_text(events) == MCP_DONE


def test_mcptest_without_a_record_id_says_so(api: ModelApi) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "spawn", "input": {"provider": "echo"}}
    history = [
        {"role": "user", "content": 'MCPTEST spawn echo then prompt "x"'},
        {"role": "assistant", "content": [call]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "nope"}],
        },
    ]
    events = sse(api, "/v1/messages", {"model": "m", "messages": history})
    assert anthropic_text(events).startswith("MCPTEST: no record id in the spawn result: nope")


# -- usage limits ----------------------------------------------------------------------------------


def limited(api: ModelApi, path: str, body: dict[str, Any]) -> tuple[int, Any, dict[str, Any]]:
    req = urllib.request.Request(
        api.url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def test_limittest_gets_each_vendors_usage_limit_until_it_resets(api: ModelApi) -> None:
    api.limit_seconds = 30.0
    user = [{"role": "user", "content": "LIMITTEST"}]
    code, headers, doc = limited(api, "/v1/messages", {"model": "m", "messages": user})
    reset = api.limit_until
    assert code == 429 and reset is not None and doc["error"]["type"] == "rate_limit_error"
    assert headers["anthropic-ratelimit-unified-status"] == "rejected"
    assert headers["anthropic-ratelimit-unified-reset"] == str(int(reset))
    assert 0 < int(headers["retry-after"]) <= 30
    code, headers, doc = limited(api, "/v1/responses", {"model": "m", "input": "LIMITTEST"})
    assert code == 429 and doc["error"]["type"] == "usage_limit_reached"
    assert doc["error"]["resets_at"] == int(reset) and 0 < doc["error"]["resets_in_seconds"] <= 30
    code, headers, doc = limited(api, "/v1/chat/completions", {"model": "m", "messages": user})
    assert code == 429 and doc["error"]["type"] == "rate_limit_reached_error"
    assert "retry-after" in {k.lower() for k in headers}
    api.limit_until = time.time() - 1  # reset: the same prompt is answered
    code, _, doc = limited(api, "/v1/messages", {"model": "m", "messages": user})
    assert code == 200 and doc["content"][0]["text"] == HELLO
