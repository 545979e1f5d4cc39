"""Offline stand-in for the vendors' model APIs, on loopback, for driving the real CLIs.

It speaks just enough of three wire protocols for claude, codex and kimi to run end to end
with no network; only the model's words are fake:

* Anthropic Messages -- ``POST /v1/messages`` (SSE when ``"stream": true``, else one JSON
  message), ``POST /v1/messages/count_tokens``; claude's start-up preflight ``GET /api/hello``.
* OpenAI Responses -- ``POST /v1/responses`` (SSE; used by codex).
* OpenAI Chat Completions -- ``POST /v1/chat/completions`` (SSE chunks + ``[DONE]``; used by kimi
  with an ``openai`` provider).
* ``GET /v1/models`` (both vendors' list shapes merged into one document).

The "model" is a few rules applied to the request's conversation:

* The last user turn carries a tool result -> ``"Tool said hi."``.
* The last user text contains ``TOOLTEST`` -> one shell tool call running ``echo hi``
  (Anthropic ``tool_use``, Responses ``function_call``, Chat ``tool_calls``); the tool is chosen
  from the request's own ``tools`` list so the call matches what that CLI offers.
* ``PERMTEST`` -> the same, running ``touch made_by_mock.txt``: a command that writes, so a CLI in
  a mode that asks first shows its permission prompt (``echo hi`` is let through unasked).
* ``APPROVETEST`` -> the same, running ``touch`` of a file outside the working directory and, for
  codex, asking for the sandbox to be lifted (``sandbox_permissions: "require_escalated"``): a
  command codex asks a person about even in its default mode.
* ``MCPTEST spawn PROVIDER then prompt "TEXT"`` -> calls of an MCP server's tools, one a request,
  each tool picked from the request's ``tools`` by the end of its name (``mcp__roost__spawn``,
  ``roost__spawn`` or ``spawn``): first ``spawn`` with ``{"provider": PROVIDER}``; once its
  result is back, ``prompt`` with ``{"id": ID, "text": TEXT}``, ID being the record id read from
  that result (``record.id`` of its JSON, as roost's ``spawn`` tool answers); once that result is
  back, the text ``MCP_DONE``. The first rule (a tool result -> ``"Tool said hi."``) does not
  apply to these prompts.
* ``RECALL`` -> the text of the previous user prompt found in the request's history (proves the
  CLI resent the earlier turn).
* ``LIMITTEST`` -> the vendor's usage-limit answer (HTTP 429 with its error body and reset
  headers, ``limit_body``) until the limit resets ``limit_seconds`` after the first such request
  (``ModelApi.limit_reset``); after the reset the prompt gets the normal answer. Anthropic: a
  ``rate_limit_error`` with ``anthropic-ratelimit-unified-*`` headers (status ``rejected``, the
  reset as epoch seconds, the ``five_hour`` claim) and ``retry-after``; OpenAI Responses (codex):
  ``usage_limit_reached`` with ``plan_type``, ``resets_at`` and ``resets_in_seconds``; Chat
  Completions (kimi): Moonshot's ``rate_limit_reached_error`` with ``retry-after``.
* ``SLOW`` -> the normal answer, streamed slowly (``slow_seconds`` in all), for busy screens.
* ``LONG`` -> a long answer (``LONG_WORDS`` words, numbered sentences ending ``End of the long
  answer.``), always streamed slowly: a CLI printing text for a while, for busy screens.
* Otherwise -> ``"Hello from the mock."``.
* A request for JSON-schema output (e.g. codex's TUI title request) gets a sample document
  valid for the schema instead of text.

Every streamed answer's end is noted: ``ModelApi.last_byte_at(text)`` is the wall-clock time the
last answer saying ``text`` sent its last byte, for tests that time what a CLI does after it.

Every request is recorded (``ModelApi.requests``; with ``--log FILE`` also appended to a JSONL
file) so tests can assert on what the CLI sent.

Run standalone::

    python tests/fakes/model_api.py --port 0 --ready-file F [--log requests.jsonl]

(writes the chosen port to F once serving), or in-process::

    api = ModelApi().start()   # port 0 unless given
    api.url                    # http://127.0.0.1:PORT
    api.requests               # list of recorded requests (copies)
    api.close()

What the real CLIs send (observed with claude 2.1.332, codex 0.171.0, kimi 2.1.0; the setup
for each is in tests/real/harness.py):

* claude: ``HEAD /api/hello`` (preflight), then per turn one ``POST /v1/messages?beta=true``
  with ``stream: true``, ``Authorization: Bearer $ANTHROPIC_AUTH_TOKEN``,
  ``x-claude-code-session-id: <session uuid>``, ``anthropic-version: 2023-06-01``. ``messages``
  carries the whole history on resume; user turns are lists of text blocks where
  ``<system-reminder>`` blocks precede the prompt, and there is also a ``role: "system"``
  message ("# Environment ...") inside ``messages``. Tools: ``Bash`` with ``{"command"}``, the
  result returns as a ``tool_result`` block (``content: "hi"``).
* codex: ``POST /v1/responses`` (``stream: true``, ``Accept: text/event-stream``,
  ``Authorization: Bearer $CODEX_API_KEY``, headers ``session-id``/``thread-id`` = thread id,
  ``x-codex-turn-metadata`` JSON). ``input`` = developer messages, a user
  ``<environment_context>`` message, then the prompts (``input_text``) and prior assistant
  messages/function calls. The shell tool is ``exec_command`` (``{"cmd"}``); its output comes
  back as ``function_call_output`` whose ``output`` is text ending ``Output:\nhi\n``. It reads
  the finished item from ``response.output_item.done`` and needs ``response.completed``. The TUI
  also sends a title request with ``text.format`` json_schema ``{"title": string}``.
  With the built-in ``openai`` provider it first tries a WebSocket ``GET /v1/responses``.
* kimi: ``POST /v1/chat/completions`` (``stream: true``, ``stream_options.include_usage``,
  ``Authorization: Bearer <api_key>``, ``prompt_cache_key`` = session id). ``messages`` = system,
  then user prompt strings, each followed by extra user messages holding ``<system-reminder>``
  notes. Tool ``Bash`` (``{"command"}``); the result returns as ``role: "tool"`` with content
  ``"Wall time: ...\nhi\n"``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
import uuid
import zlib
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any

JSON = dict[str, Any]

HELLO = "Hello from the mock."
TOOL_DONE = "Tool said hi."
MCP_DONE = "MCP tools said their piece."
MCPTEST = re.compile(r'MCPTEST spawn (\S+) then prompt "([^"]*)"')
TOOL_COMMAND = "echo hi"
PERM_COMMAND = "touch made_by_mock.txt"
APPROVE_COMMAND = "touch ../outside_by_mock.txt"
APPROVE_REASON = "Mock wants to write outside the workspace"
MODEL = "mock-model"
# Usage every answer reports beside its input tokens (estimated from the request's size): fixed,
# non-zero figures, so a test can tell each kind of token apart in what a CLI reports back.
OUTPUT_TOKENS = 10
CACHE_READ_TOKENS = 7
CACHE_WRITE_TOKENS = 5
LONG_WORDS = 2400
LONG_END = "End of the long answer."


def long_answer(words: int = LONG_WORDS) -> str:
    """About ``words`` words in numbered ten-word sentences, then ``LONG_END``."""
    sentences = [
        f"Sentence {n} of the long answer keeps the stream going on." for n in range(words // 10)
    ]
    return " ".join([*sentences, LONG_END])


# Prefixes of user-role text that CLIs inject as context rather than as the person's prompt
# (claude's <system-reminder> blocks, codex's <environment_context>/<user_instructions>/
# "# AGENTS.md instructions" messages, kimi's <system> notes). RECALL skips them.
_INJECTED = re.compile(
    r"^\s*(<[a-z_\-]+[\s>]|# AGENTS\.md instructions|<INSTRUCTIONS>|Caveat: )", re.IGNORECASE
)


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def _chunks(text: str) -> list[str]:
    """Split text into word-ish pieces (``"Hello "``, ``"from "``...) so deltas are real deltas."""
    parts = re.findall(r"\S+\s*|\s+", text)
    return parts or [""]


# -- the conversation, normalised across the three APIs ------------------------------------------


class Turn:
    """One message of the request's history: role plus its text parts and tool traffic."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.texts: list[str] = []
        self.tool_results: list[str] = []

    @property
    def prompt(self) -> str:
        """The person's text: the parts that are not injected context, joined."""
        own = [t for t in self.texts if t.strip() and not _INJECTED.match(t)]
        return "\n".join(own).strip()

    @property
    def all_text(self) -> str:
        return "\n".join(self.texts)


def _text_of(content: Any) -> list[str]:
    """Texts in a content value: a string or a list of typed parts (any of the three APIs)."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
    return out


def anthropic_turns(body: JSON) -> list[Turn]:
    turns: list[Turn] = []
    for msg in body.get("messages") or []:
        turn = Turn(str(msg.get("role", "")))
        content = msg.get("content")
        if isinstance(content, str):
            turn.texts.append(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                kind = part.get("type")
                if kind == "text" and isinstance(part.get("text"), str):
                    turn.texts.append(part["text"])
                elif kind == "tool_result":
                    turn.tool_results.append("\n".join(_text_of(part.get("content"))))
        turns.append(turn)
    return turns


def responses_turns(body: JSON) -> list[Turn]:
    raw = body.get("input")
    if isinstance(raw, str):
        t = Turn("user")
        t.texts.append(raw)
        return [t]
    turns: list[Turn] = []
    for item in raw or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            turn = Turn(str(item.get("role", "")))
            turn.texts.extend(_text_of(item.get("content")))
            turns.append(turn)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            turn = Turn("assistant")
            turns.append(turn)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            turn = Turn("tool")
            out = item.get("output")
            turn.tool_results.append(out if isinstance(out, str) else json.dumps(out))
            turns.append(turn)
    return turns


def chat_turns(body: JSON) -> list[Turn]:
    turns: list[Turn] = []
    for msg in body.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        turn = Turn(str(msg.get("role", "")))
        if turn.role == "tool":
            turn.tool_results.append("\n".join(_text_of(msg.get("content"))))
        else:
            turn.texts.extend(_text_of(msg.get("content")))
        turns.append(turn)
    return turns


class Reply:
    """What the stand-in model decided to say: text, one shell tool call, or one call of a named
    tool (``call``: the end of the tool's name and its arguments; see ``named_call``)."""

    def __init__(
        self,
        text: str | None = None,
        tool: bool = False,
        slow: bool = False,
        command: str = TOOL_COMMAND,
        limit: bool = False,
        escalate: bool = False,
        call: tuple[str, JSON] | None = None,
    ) -> None:
        self.call = call
        self.limit = limit
        self.text = text
        self.tool = tool or call is not None
        self.slow = slow
        self.command = command
        self.escalate = escalate  # codex: the call asks to run outside the sandbox


def decide(turns: list[Turn]) -> Reply:
    """The stand-in's whole "intelligence", shared by the three APIs."""
    planned = mcp_step(turns)
    if planned is not None:
        return planned
    # A tool result after the last user prompt means the CLI ran our tool call: wrap up.
    for turn in reversed(turns):
        if turn.tool_results:
            return Reply(TOOL_DONE)
        if turn.role == "user" and turn.prompt:
            break
    prompts = [t.prompt for t in turns if t.role == "user" and t.prompt]
    last = prompts[-1] if prompts else ""
    if not last:  # nothing but injected context: look at everything the user role said
        users = [t.all_text for t in turns if t.role == "user"]
        last = users[-1] if users else ""
    if "TOOLTEST" in last:
        return Reply(tool=True)
    if "LIMITTEST" in last:
        return Reply(HELLO, limit=True)
    if "PERMTEST" in last:
        return Reply(tool=True, command=PERM_COMMAND)
    if "APPROVETEST" in last:
        return Reply(tool=True, command=APPROVE_COMMAND, escalate=True)
    if "RECALL" in last:
        earlier = prompts[-2] if len(prompts) >= 2 else "(no earlier turn)"
        return Reply(earlier)
    if "LONG" in last:
        return Reply(long_answer(), slow=True)
    return Reply(HELLO, slow="SLOW" in last)


def mcp_step(turns: list[Turn]) -> Reply | None:
    """The next step of an ``MCPTEST`` prompt (the last user prompt), None for any other prompt:
    ``spawn``, then ``prompt`` of the record that spawn answered, then ``MCP_DONE``; counted by
    the tool results that came back since the prompt."""
    at = next(
        (i for i in range(len(turns) - 1, -1, -1) if turns[i].role == "user" and turns[i].prompt),
        None,
    )
    found = MCPTEST.search(turns[at].prompt) if at is not None else None
    if at is None or found is None:
        return None
    provider, text = found.groups()
    results = [r for turn in turns[at + 1 :] for r in turn.tool_results]
    if not results:
        return Reply(call=("spawn", {"provider": provider}))
    if len(results) == 1:
        record = record_id(results[0])
        if record is None:
            return Reply(f"MCPTEST: no record id in the spawn result: {results[0][:500]}")
        return Reply(call=("prompt", {"id": record, "text": text}))
    return Reply(MCP_DONE)


def record_id(result: str) -> str | None:
    """The record id in a tool result: ``record.id`` (or ``id``) of its JSON document."""
    try:
        doc = json.loads(result)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    record = doc.get("record")
    rid = record.get("id") if isinstance(record, dict) else doc.get("id")
    return rid if isinstance(rid, str) and rid else None


def named_call(names: Iterable[str], suffix: str) -> str:
    """The offered tool called ``suffix`` or whose name ends with ``__suffix`` (an MCP server's
    tool as the CLI names it, e.g. claude's ``mcp__roost__spawn``); ``suffix`` if none is."""
    offered = list(names)
    return next((n for n in offered if n == suffix or n.endswith(f"__{suffix}")), suffix)


def tool_call(body: JSON, api: str, reply: Reply) -> tuple[str, JSON]:
    """The name and arguments of the tool call ``reply`` makes, from the request's tools."""
    if reply.call is not None:
        suffix, args = reply.call
        return named_call(tool_names(body), suffix), dict(args)
    return shell_call(tool_names(body), api, reply.command)


def structured(body: JSON, reply: Reply) -> Reply:
    """Honour a requested JSON-schema output (Responses ``text.format``, Chat
    ``response_format``) with a sample document; e.g. codex's TUI asks for
    ``{"title": ...}`` in a side request after the first turn."""
    fmt = (body.get("text") or {}).get("format") or {}
    schema = fmt.get("schema") if fmt.get("type") == "json_schema" else None
    chat_fmt = body.get("response_format") or {}
    if schema is None and chat_fmt.get("type") == "json_schema":
        schema = (chat_fmt.get("json_schema") or {}).get("schema")
    if not isinstance(schema, dict) or reply.tool:
        return reply
    return Reply(json.dumps(sample_for_schema(schema)), slow=reply.slow, limit=reply.limit)


LIMIT_MESSAGE = "You have reached your usage limit."


def limit_body(
    api: str, reset: float, now: float | None = None
) -> tuple[int, dict[str, str], JSON]:
    """The HTTP status, headers and JSON body of ``api``'s usage-limit answer, resetting at the
    epoch second ``reset``."""
    at = int(reset)
    wait = str(max(0, at - int(now if now is not None else time.time())))
    if api == "anthropic":
        headers = {
            "anthropic-ratelimit-unified-status": "rejected",
            "anthropic-ratelimit-unified-reset": str(at),
            "anthropic-ratelimit-unified-representative-claim": "five_hour",
            "anthropic-ratelimit-unified-5h-status": "rejected",
            "anthropic-ratelimit-unified-5h-reset": str(at),
            "anthropic-ratelimit-unified-5h-utilization": "1.0",
            "retry-after": wait,
            "x-should-retry": "false",
        }
        return 429, headers, _error("rate_limit_error", LIMIT_MESSAGE)
    if api == "responses":
        error = {
            "type": "usage_limit_reached",
            "message": "The usage limit has been reached",
            "plan_type": "plus",
            "resets_at": at,
            "resets_in_seconds": int(wait),
        }
        return 429, {"retry-after": wait}, {"error": error}
    error = {"message": LIMIT_MESSAGE, "type": "rate_limit_reached_error"}
    return 429, {"retry-after": wait}, {"error": error}


def sample_for_schema(schema: Any, name: str = "value") -> Any:
    """A small document valid for common JSON schemas (objects, strings, numbers, enums...)."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return sample_for_schema(schema[key][0], name)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: sample_for_schema(v, k) for k, v in props.items()}
    if kind == "array":
        return [sample_for_schema(schema.get("items"), name)] * int(schema.get("minItems", 0))
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "string":
        text = f"Mock {name}"
        return text[: schema.get("maxLength", len(text))].ljust(schema.get("minLength", 0), "x")
    return None


def tool_names(body: JSON) -> list[str]:
    """Names of the tools a request offers, whatever the API's tool shape."""
    names: list[str] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        name = tool.get("name")
        if name is None and isinstance(tool.get("function"), dict):
            name = tool["function"].get("name")
        if isinstance(name, str):
            names.append(name)
    return names


def shell_call(names: Iterable[str], api: str, command: str = TOOL_COMMAND) -> tuple[str, JSON]:
    """Pick the request's shell tool and build arguments that run ``command``.

    claude calls it ``Bash`` ({"command"}); kimi calls it ``Bash`` too. codex 0.171.0 offers
    ``exec_command`` ({"cmd"}, unified exec) and/or ``shell_command`` ({"command": str}); older
    codex offered ``shell`` ({"command": [argv]}).
    """
    offered = list(names)
    by_lower = {n.lower(): n for n in offered}
    if api == "responses":
        if "exec_command" in offered:
            return "exec_command", {"cmd": command}
        if "shell_command" in offered:
            return "shell_command", {"command": command}
        if "shell" in offered or not offered:
            return "shell", {"command": ["bash", "-lc", command]}
    for want in ("bash", "shell", "run_shell_command", "shell_command"):
        if want in by_lower:
            return by_lower[want], {"command": command}
    return "Bash", {"command": command}


# -- the server ----------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, api: ModelApi, port: int) -> None:
        self.api = api
        super().__init__((api.host, port), _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    # -- plumbing --------------------------------------------------------------------------------

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.api.verbose:
            sys.stderr.write("model_api: " + (format % args) + "\n")

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
            raw = bytes(data)
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        enc = self.headers.get("Content-Encoding", "").lower()
        if enc in ("gzip", "x-gzip"):
            raw = zlib.decompress(raw, 16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            raw = zlib.decompress(raw)
        elif enc not in ("", "identity"):
            # No CLI seen so far compresses request bodies (codex only *accepts* zstd), and the
            # stdlib has no zstd before 3.14: refuse loudly rather than guess.
            raise ValueError(f"unsupported Content-Encoding {enc!r}")
        return raw

    def _record(self, body: Any, raw: bytes) -> None:
        self.server.api._record(
            {
                "time": time.time(),
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body,
                "raw": None if body is not None or not raw else raw.decode("utf-8", "replace"),
            }
        )

    def _send_json(self, status: int, doc: Any) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", _new_id("req_"))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _stream(self, frames: Iterator[bytes], slow_seconds: float = 0.0, said: str = "") -> None:
        """Send an SSE body chunk by chunk (HTTP/1.1 chunked), flushing each frame; with
        ``slow_seconds`` the frames are spread over that long (SLOW prompts)."""
        body = list(frames)
        delay = slow_seconds / len(body) if body else 0.0
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", _new_id("req_"))
        self.end_headers()
        try:
            for n, frame in enumerate(body, 1):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                self.wfile.flush()
                if n == len(body):
                    self.server.api.streamed(said)  # the answer's last byte has gone
                elif delay:
                    time.sleep(delay)  # SLOW prompts: make the stream take a while
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the CLI hung up (e.g. interrupted)
            self.close_connection = True

    # -- routing ---------------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self._record(None, b"")
        self._send_json(200, {})

    def do_GET(self) -> None:
        self._record(None, b"")
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/models"):
            self._send_json(200, _models())
        elif path.endswith("/api/hello") or path.endswith("/oauth/hello") or path in ("", "/"):
            # claude's preflight only needs a 200 here.
            self._send_json(200, {"message": "hello"})
        else:
            self._send_json(404, _error("not_found_error", f"no route for GET {self.path}"))

    def do_POST(self) -> None:
        try:
            raw = self._read_body()
        except (ValueError, zlib.error) as err:
            self._record(None, b"")
            self._send_json(415, _error("invalid_request_error", str(err)))
            return
        try:
            body: Any = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        self._record(body, raw)
        if not isinstance(body, dict):
            self._send_json(400, _error("invalid_request_error", "body is not a JSON object"))
            return
        path = self.path.split("?")[0].rstrip("/")
        api = self.server.api
        if path.endswith("/messages/count_tokens"):
            self._send_json(200, {"input_tokens": _estimate_tokens(body)})
        elif path.endswith("/messages"):
            self._anthropic(body, api.slow_seconds)
        elif path.endswith("/responses"):
            self._responses(body, api.slow_seconds)
        elif path.endswith("/chat/completions"):
            self._chat(body, api.slow_seconds)
        else:
            # Telemetry and the like (e.g. claude's /api/event_logging/batch): accept quietly.
            self._send_json(200, {})

    # -- Anthropic Messages ----------------------------------------------------------------------

    def _limited(self, reply: Reply, api: str) -> bool:
        """Answer a ``LIMITTEST`` prompt with ``api``'s usage-limit 429 while the limit holds."""
        reset = self.server.api.limit_reset() if reply.limit else None
        if reset is None:
            return False
        status, headers, doc = limit_body(api, reset)
        data = json.dumps(doc).encode()
        self.send_response(status)
        for name, value in {**headers, "Content-Type": "application/json"}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", _new_id("req_"))
        self.end_headers()
        self.wfile.write(data)
        return True

    def _anthropic(self, body: JSON, slow_seconds: float) -> None:
        reply = decide(anthropic_turns(body))
        if self._limited(reply, "anthropic"):
            return
        model = str(body.get("model") or MODEL)
        msg_id = _new_id("msg_mock_")
        usage_in = _estimate_tokens(body)
        if reply.tool:
            name, args = tool_call(body, "anthropic", reply)
            block: JSON = {"type": "tool_use", "id": _new_id("toolu_mock_"), "name": name}
            content: list[JSON] = [{**block, "input": args}]
            stop = "tool_use"
        else:
            text = reply.text or ""
            content = [{"type": "text", "text": text}]
            stop = "end_turn"
        usage = {
            "input_tokens": usage_in,
            "output_tokens": OUTPUT_TOKENS,
            "cache_creation_input_tokens": CACHE_WRITE_TOKENS,
            "cache_read_input_tokens": CACHE_READ_TOKENS,
        }
        self.server.api.reported("anthropic", self.headers, body, usage)
        message: JSON = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            self._send_json(200, message)
            return

        def frames() -> Iterator[bytes]:
            start = {**message, "content": [], "stop_reason": None, "usage": {**usage}}
            start["usage"]["output_tokens"] = 1
            yield _sse({"type": "message_start", "message": start}, "message_start")
            if reply.tool:
                args_json = json.dumps(content[0]["input"])
                yield _sse(
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {**block, "input": {}},
                    },
                    "content_block_start",
                )
                half = len(args_json) // 2
                for piece in (args_json[:half], args_json[half:]):
                    delta = {"type": "input_json_delta", "partial_json": piece}
                    yield _sse(
                        {"type": "content_block_delta", "index": 0, "delta": delta},
                        "content_block_delta",
                    )
            else:
                yield _sse(
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                    "content_block_start",
                )
                yield _sse({"type": "ping"}, "ping")
                for piece in _chunks(reply.text or ""):
                    delta = {"type": "text_delta", "text": piece}
                    yield _sse(
                        {"type": "content_block_delta", "index": 0, "delta": delta},
                        "content_block_delta",
                    )
            yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
            yield _sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": OUTPUT_TOKENS},
                },
                "message_delta",
            )
            yield _sse({"type": "message_stop"}, "message_stop")

        self._stream(frames(), slow_seconds if reply.slow else 0.0, said=reply.text or "")

    # -- OpenAI Responses ------------------------------------------------------------------------

    def _responses(self, body: JSON, slow_seconds: float) -> None:
        reply = structured(body, decide(responses_turns(body)))
        if self._limited(reply, "responses"):
            return
        model = str(body.get("model") or MODEL)
        resp_id = _new_id("resp_mock_")
        item_id = _new_id("msg_mock_" if not reply.tool else "fc_mock_")
        if reply.tool:
            name, args = tool_call(body, "responses", reply)
            if reply.escalate:
                args.update(sandbox_permissions="require_escalated", justification=APPROVE_REASON)
            args_json = json.dumps(args)
            item: JSON = {
                "id": item_id,
                "type": "function_call",
                "status": "completed",
                "call_id": _new_id("call_mock_"),
                "name": name,
                "arguments": args_json,
            }
        else:
            text = reply.text or ""
            item = {
                "id": item_id,
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        usage = {
            "input_tokens": _estimate_tokens(body),
            "input_tokens_details": {"cached_tokens": CACHE_READ_TOKENS},
            "output_tokens": OUTPUT_TOKENS,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": _estimate_tokens(body) + OUTPUT_TOKENS,
        }
        self.server.api.reported("responses", self.headers, body, usage)
        response: JSON = {
            "id": resp_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": model,
            "output": [item],
            "usage": usage,
        }
        if not body.get("stream"):
            self._send_json(200, response)
            return

        def frames() -> Iterator[bytes]:
            # codex needs response.created ... response.output_item.done ... response.completed;
            # it takes the finished item from output_item.done and ends the turn on completed
            # (a stream closed without response.completed is retried as "stream disconnected").
            seq = iter(range(1_000_000))
            pending = {**response, "status": "in_progress", "output": [], "usage": None}

            def ev(kind: str, **fields: Any) -> bytes:
                return _sse({"type": kind, "sequence_number": next(seq), **fields}, kind)

            yield ev("response.created", response=pending)
            yield ev("response.in_progress", response=pending)
            if reply.tool:
                added = {**item, "status": "in_progress", "arguments": ""}
                yield ev("response.output_item.added", output_index=0, item=added)
                yield ev(
                    "response.function_call_arguments.delta",
                    item_id=item_id,
                    output_index=0,
                    delta=item["arguments"],
                )
                yield ev(
                    "response.function_call_arguments.done",
                    item_id=item_id,
                    output_index=0,
                    arguments=item["arguments"],
                )
            else:
                text = reply.text or ""
                added = {**item, "status": "in_progress", "content": []}
                yield ev("response.output_item.added", output_index=0, item=added)
                empty = {"type": "output_text", "text": "", "annotations": []}
                where = {"item_id": item_id, "output_index": 0, "content_index": 0}
                yield ev("response.content_part.added", **where, part=empty)
                for piece in _chunks(text):
                    yield ev("response.output_text.delta", **where, delta=piece)
                yield ev("response.output_text.done", **where, text=text)
                yield ev("response.content_part.done", **where, part=item["content"][0])
            yield ev("response.output_item.done", output_index=0, item=item)
            yield ev("response.completed", response=response)

        self._stream(frames(), slow_seconds if reply.slow else 0.0, said=reply.text or "")

    # -- OpenAI Chat Completions -----------------------------------------------------------------

    def _chat(self, body: JSON, slow_seconds: float) -> None:
        reply = structured(body, decide(chat_turns(body)))
        if self._limited(reply, "chat"):
            return
        model = str(body.get("model") or MODEL)
        chat_id = _new_id("chatcmpl-mock-")
        created = int(time.time())
        usage = {
            "prompt_tokens": _estimate_tokens(body),
            "prompt_tokens_details": {"cached_tokens": CACHE_READ_TOKENS},
            "completion_tokens": OUTPUT_TOKENS,
            "total_tokens": _estimate_tokens(body) + OUTPUT_TOKENS,
        }
        self.server.api.reported("chat", self.headers, body, usage)
        call: JSON | None = None
        if reply.tool:
            name, args = tool_call(body, "chat", reply)
            call = {
                "id": _new_id("call_mock_"),
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        finish = "tool_calls" if call else "stop"
        if not body.get("stream"):
            message: JSON = {"role": "assistant", "content": None if call else reply.text}
            if call:
                message["tool_calls"] = [call]
            self._send_json(
                200,
                {
                    "id": chat_id,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                },
            )
            return

        def chunk(delta: JSON, finish_reason: str | None = None) -> bytes:
            return _sse(
                {
                    "id": chat_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                }
            )

        def frames() -> Iterator[bytes]:
            yield chunk({"role": "assistant", "content": ""})
            if call:
                fn = call["function"]
                head = {"index": 0, "id": call["id"], "type": "function"}
                yield chunk({"tool_calls": [{**head, "function": {"name": fn["name"]}}]})
                args_json = fn["arguments"]
                half = len(args_json) // 2
                for piece in (args_json[:half], args_json[half:]):
                    yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            else:
                for piece in _chunks(reply.text or ""):
                    yield chunk({"content": piece})
            yield chunk({}, finish)
            if (body.get("stream_options") or {}).get("include_usage"):
                yield _sse(
                    {
                        "id": chat_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": usage,
                    }
                )
            yield b"data: [DONE]\n\n"

        self._stream(frames(), slow_seconds if reply.slow else 0.0, said=reply.text or "")


def _sse(doc: JSON, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(doc)}\n\n".encode()


def _estimate_tokens(body: JSON) -> int:
    return max(1, len(json.dumps(body.get("messages") or body.get("input") or "")) // 4)


def _error(kind: str, message: str) -> JSON:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _models() -> JSON:
    # One list that satisfies both vendors' shapes (OpenAI: object/owned_by/created;
    # Anthropic: type/display_name/created_at/has_more).
    entry = {
        "id": MODEL,
        "object": "model",
        "type": "model",
        "created": 0,
        "created_at": "2026-01-01T00:00:00Z",
        "owned_by": "mock",
        "display_name": "Mock Model",
    }
    return {"object": "list", "data": [entry], "has_more": False, "first_id": MODEL}


# -- the public object ---------------------------------------------------------------------------


class ModelApi:
    """The stand-in as an object: ``start()`` on a loopback port, ``close()`` to stop."""

    def __init__(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        log_path: str | os.PathLike[str] | None = None,
        slow_seconds: float = 5.0,
        verbose: bool = False,
        limit_seconds: float = 60.0,
    ) -> None:
        self.host = host
        self.limit_seconds = limit_seconds
        self.limit_until: float | None = None
        self.slow_seconds = slow_seconds
        self.verbose = verbose
        self._log_path = Path(log_path) if log_path is not None else None
        self._lock = threading.Lock()
        self._requests: list[JSON] = []
        self._usage: list[JSON] = []
        self.ends: list[tuple[float, str]] = []  # each streamed answer: its last byte's time, text
        self._server = _Server(self, port)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Base URL without a path (claude wants this; codex and kimi want ``url + "/v1"``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def requests(self) -> list[JSON]:
        """Every request so far, oldest first: method, path, headers (lower-case), body."""
        with self._lock:
            return [dict(r) for r in self._requests]

    def bodies(self, path_suffix: str) -> list[JSON]:
        """JSON bodies of the POSTs whose path ends with ``path_suffix`` (query ignored)."""
        return [
            r["body"]
            for r in self.requests
            if r["method"] == "POST"
            and r["path"].split("?")[0].rstrip("/").endswith(path_suffix)
            and isinstance(r["body"], dict)
        ]

    def limit_reset(self) -> float | None:
        """The epoch time the usage limit resets while it holds (the first ``LIMITTEST`` request
        starts it, ``limit_seconds`` long), None once it has reset."""
        with self._lock:
            now = time.time()
            if self.limit_until is None:
                self.limit_until = now + self.limit_seconds
            return self.limit_until if now < self.limit_until else None

    def streamed(self, said: str) -> None:
        with self._lock:
            self.ends.append((time.time(), said))

    def last_byte_at(self, said: str = HELLO) -> float | None:
        """When the last streamed answer saying ``said`` sent its last byte (None: none did)."""
        with self._lock:
            return next((t for t, text in reversed(self.ends) if text == said), None)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
            self._usage.clear()

    def reported(self, api: str, headers: Any, body: JSON, usage: JSON) -> None:
        """Keep the usage one answer reported (``api``: anthropic, responses or chat), with the
        request's headers and whether it offered tools (a CLI's side requests, a title or a
        quota check, offer none), for ``usage_reported``."""
        entry = {
            "api": api,
            "headers": {k.lower(): v for k, v in headers.items()},
            "tools": bool(body.get("tools")),
        }
        with self._lock:
            self._usage.append({**entry, "usage": json.loads(json.dumps(usage))})

    @property
    def usage_reported(self) -> list[JSON]:
        """The usage of every answer so far, oldest first: ``{api, headers, tools, usage}``."""
        with self._lock:
            return [dict(u) for u in self._usage]

    def _record(self, entry: JSON) -> None:
        with self._lock:
            self._requests.append(entry)
            if self._log_path is not None:
                with self._log_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry) + "\n")

    def start(self) -> ModelApi:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="model-api", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever(poll_interval=0.05)

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> ModelApi:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0, help="0 = any free port (default)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--ready-file", help="write the chosen port here once serving")
    parser.add_argument("--log", help="append every request as one JSON line to this file")
    parser.add_argument("--slow-seconds", type=float, default=5.0, help="stream time for SLOW")
    parser.add_argument("--verbose", action="store_true", help="log each request to stderr")
    parser.add_argument(
        "--limit-seconds", type=float, default=60.0, help="how long LIMITTEST's usage limit holds"
    )
    args = parser.parse_args(argv)
    api = ModelApi(
        args.port, args.host, args.log, args.slow_seconds, args.verbose, args.limit_seconds
    )

    def stop(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=api._server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.ready_file:
        tmp = Path(args.ready_file + ".tmp")
        tmp.write_text(f"{api.port}\n")
        tmp.replace(args.ready_file)  # atomic: a reader never sees a half-written port
    print(f"model_api: serving on {api.url}", flush=True)
    try:
        api.serve_forever()
    finally:
        api._server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
