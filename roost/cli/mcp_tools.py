"""The tools of ``roost mcp``: their input schemas, descriptions and what each asks the node.

Nothing here imports the MCP SDK: each tool is a plain function from its arguments to a JSON
document, over the client library, as a CLI command is (``roost.cli.mcp`` serves them). Every call
opens its own connection to the node (or hub) with the global options' ``Ctx``, so the server holds
no state of its own; a RoostError the node answers, or one made here, is raised as it is, and the
server turns it into a tool error that starts with its code.

A record in state ``attention`` needs a human (a login, trust or permission screen, a usage limit):
results that hold a record say so with ``needs_human`` and ``attention`` (the reason). No tool
answers such a screen by itself; only ``prompt`` and ``key`` type into a session, and only when
the caller calls them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from roost.cli.context import Ctx
from roost.cli.readiness import READY_TIMEOUT_S, outcome, wait_ready
from roost.client.client import Client
from roost.providers import MODES, ON_LIMIT, RESTORE_POLICIES, names
from roost.wire.errors import RoostError
from roost.wire.protocol import KEY_NAMES

LAUNCH_TIMEOUT_S = 60.0  # spawn and resume: the node waits up to 20 s for the supervisor
WAIT_MAX_S = 600.0  # the longest wait a tool call takes
TURN_SLICE_S = 20.0  # session.turn.wait is asked in slices: the client's deadline is longer
RECHECK_S = 1.0

Args = dict[str, Any]
Handler = Callable[[Ctx, Args], dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    properties: dict[str, Any]
    required: tuple[str, ...]
    handler: Handler
    read_only: bool

    @property
    def input_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": self.properties,
            "required": list(self.required),
            "additionalProperties": False,
        }


ID = {
    "type": "string",
    "minLength": 1,
    "description": "the record: its id (r and 10 hex digits) or its name",
}
OP = {
    "type": "string",
    "minLength": 1,
    "maxLength": 128,
    "description": "operation id (any string you choose, a UUID is good): a retry with the same "
    "op runs nothing again and answers the first call's outcome (duplicate: true)",
}
TEXT = {"type": "string", "maxLength": 262_144}


def timeout_s(default: float, what: str) -> dict[str, Any]:
    return {
        "type": "number",
        "minimum": 0,
        "maximum": WAIT_MAX_S,
        "default": default,
        "description": f"seconds to wait at most for {what}",
    }


# --- the handlers ------------------------------------------------------------------------------


def human(record: dict[str, Any]) -> dict[str, Any]:
    """``needs_human`` and ``attention`` of a record: the state ``attention`` and its reason."""
    needs = record.get("state") == "attention"
    return {
        "needs_human": needs,
        "attention": (record.get("attention") or "attention") if needs else None,
    }


def with_record(doc: dict[str, Any]) -> dict[str, Any]:
    """A reply that holds a record, with whether that record needs a human."""
    record = doc.get("record")
    return {**doc, **human(record)} if isinstance(record, dict) else doc


def call(ctx: Ctx, method: str, body: Args, *, op: str = "", timeout: float | None = None) -> Any:
    with ctx.client() as client:
        return client.call(method, body, op=op, timeout=timeout)


def list_(ctx: Ctx, args: Args) -> dict[str, Any]:
    doc = call(ctx, "session.list", {})
    records = [{**r, **human(r)} for r in doc.get("records") or []]
    waiting = [r["id"] for r in records if r["needs_human"]]
    return {**doc, "records": records, "needs_human": waiting}


def show(ctx: Ctx, args: Args) -> dict[str, Any]:
    return with_record(
        call(ctx, "session.show", {"id": args["id"], "screen": bool(args.get("screen"))})
    )


def spawn(ctx: Ctx, args: Args) -> dict[str, Any]:
    from roost.config import load  # the config file's [spawn] defaults, as `roost spawn` reads

    defaults = load()
    cwd = args.get("cwd") or os.getcwd()
    if os.path.isdir(cwd):
        cwd = os.path.abspath(cwd)
    body: dict[str, Any] = {
        "provider": args["provider"],
        "cwd": cwd,
        "env": {**defaults.spawn_env(), **(args.get("env") or {})},
        "mode": args.get("mode") or defaults.spawn_mode()[0],
        "restore": args.get("restore") or defaults.spawn_restore()[0],
        "on_limit": args.get("on_limit") or defaults.spawn_on_limit()[0],
    }
    if args.get("name"):
        body["name"] = args["name"]
    size = defaults.spawn_size()[0]
    if size:
        rows, _, cols = size.partition("x")
        body.update(rows=int(rows), cols=int(cols))
    doc = call(ctx, "session.spawn", body, op=args.get("op", ""), timeout=LAUNCH_TIMEOUT_S)
    return with_record(doc)


def prompt(ctx: Ctx, args: Args) -> dict[str, Any]:
    body = {"id": args["id"], "text": args["text"]}
    doc: dict[str, Any] = call(ctx, "session.prompt", body, op=args.get("op", ""))
    return doc


def key(ctx: Ctx, args: Args) -> dict[str, Any]:
    body = {"id": args["id"], "keys": list(args["keys"])}
    doc: dict[str, Any] = call(ctx, "session.key", body, op=args.get("op", ""))
    return doc


def stop(ctx: Ctx, args: Args) -> dict[str, Any]:
    grace_ms = int(args.get("grace_ms", 3000))
    body = {"id": args["id"], "grace_ms": grace_ms}
    doc = call(ctx, "session.stop", body, op=args.get("op", ""), timeout=grace_ms / 1000 + 30)
    return with_record(doc)


def resume(ctx: Ctx, args: Args) -> dict[str, Any]:
    body = {"id": args["id"]}
    doc = call(ctx, "session.resume", body, op=args.get("op", ""), timeout=LAUNCH_TIMEOUT_S)
    return with_record(doc)


def events(ctx: Ctx, args: Args) -> dict[str, Any]:
    query: dict[str, Any] = {
        "after": int(args.get("after", 0)),
        "limit": int(args.get("limit", 100)),
    }
    if args.get("id"):
        query["id"] = args["id"]
    doc: dict[str, Any] = call(ctx, "events.since", query)
    return doc


def turn(ctx: Ctx, args: Args) -> dict[str, Any]:
    text, turn_id = args.get("text"), args.get("turn_id")
    if text is None and not args.get("wait"):
        raise RoostError(
            "bad-request",
            "give text to start a turn, or wait: true to wait for one",
            {"field": "text"},
        )
    if text is not None and turn_id:
        raise RoostError(
            "bad-request",
            "turn_id names a turn to wait for: give text or turn_id, not both",
            {"field": "turn_id"},
        )
    with ctx.client() as client:
        doc: dict[str, Any] = {}
        if text is not None:
            doc = client.call(
                "session.turn",
                {"id": args["id"], "text": text},
                op=args.get("op", ""),
                timeout=LAUNCH_TIMEOUT_S,
            )
            if not args.get("wait"):
                return doc
            turn_id = doc.get("turn")
        deadline = time.monotonic() + float(args.get("timeout", 300.0))
        ref = doc.get("record") or args["id"]
        waited = wait_turn(client, ref, turn_id, deadline)
    doc = {**doc, "turn_id": waited["turn"]["id"], **waited}
    if waited["ended"]:
        result = waited["turn"].get("result") or {}
        doc["output"] = result.get("result")
    else:
        doc["note"] = "the turn goes on; call turn again with wait: true and its turn_id"
    return doc


def wait_turn(client: Client, ref: str, turn_id: str | None, deadline: float) -> dict[str, Any]:
    """``session.turn.wait`` in slices until the turn ends or the deadline passes."""
    body: dict[str, Any] = {"id": ref}
    if turn_id:
        body["turn"] = turn_id
    while True:
        left = max(0.0, deadline - time.monotonic())
        slice_s = min(left, TURN_SLICE_S)
        reply: dict[str, Any] = client.call(
            "session.turn.wait", {**body, "timeout_ms": int(slice_s * 1000)}, timeout=slice_s + 10
        )
        if reply["ended"] or time.monotonic() >= deadline:
            return reply
        body["turn"] = reply["turn"]["id"]


def wait(ctx: Ctx, args: Args) -> dict[str, Any]:
    deadline_s = float(args.get("timeout", READY_TIMEOUT_S))
    with ctx.client() as client:
        record = client.call("session.show", {"id": args["id"]})["record"]
        if "after_seq" in args and record.get("mode") == "stream":
            raise RoostError(
                "bad-request",
                "after_seq waits for a pty turn; a stream session's turn: turn with wait: true",
                {"field": "after_seq"},
            )
        if "after_seq" in args:
            found, record = wait_turn_end(client, record, int(args["after_seq"]), deadline_s)
        else:
            try:
                found, record = "ready", wait_ready(client, record, deadline_s)
            except RoostError as err:
                if err.detail.get("outcome") not in ("attention", "exited", "timeout"):
                    raise
                found, record = err.detail["outcome"], err.detail["record"]
    return {"outcome": found, **human(record), "record": record}


def wait_turn_end(
    client: Client, record: dict[str, Any], after: int, deadline_s: float
) -> tuple[str, dict[str, Any]]:
    """Wait for the end of a pty turn begun after seq ``after`` (a ``session.classified`` event
    with ``turn_end``), for the record to need a human, or to end; the deadline: ``timeout``."""
    rid = str(record["id"])
    stream = client.subscribe(f"e/{rid}/")  # first, then read: nothing falls between
    end = time.monotonic() + deadline_s
    cursor, ended = after, False
    try:
        while True:
            for page in client.event_pages({"id": rid, "after": cursor, "limit": 1000}):
                for event in page["events"]:
                    cursor = max(cursor, int(event["seq"]))
                    data = event.get("data") or {}
                    ended = ended or (
                        event["kind"] == "session.classified" and bool(data.get("turn_end"))
                    )
            record = client.call("session.show", {"id": rid})["record"]
            found = outcome(record)
            if found in ("attention", "exited"):
                return str(found), record
            if ended:
                return "ready", record
            left = end - time.monotonic()
            if left <= 0:
                return "timeout", record
            stream.recv(timeout=min(left, RECHECK_S))
    finally:
        stream.close()


# --- the tools ---------------------------------------------------------------------------------

HUMAN_NOTE = (
    " A record in state attention needs a human (login, trust, permission, usage limit, ...): the "
    "result says needs_human: true and attention: <reason>. Nothing answers such a screen for you."
)

TOOLS: tuple[Tool, ...] = (
    Tool(
        "list",
        "List every session record of the node (or hub): id, name, provider, mode, state "
        "(starting, live, attention, stopping, dormant, failed), generation, activity (the "
        "screen's last classification: starting, ready, busy, attention, ...). needs_human lists "
        "the ids of records that wait for a human." + HUMAN_NOTE,
        {},
        (),
        list_,
        True,
    ),
    Tool(
        "show",
        "One session record; with screen: true also the session's current visible screen (a pty "
        "session's terminal as text, or a stream session's virtual screen), its cursor and "
        "classification. A record that is not running has last_screen instead." + HUMAN_NOTE,
        {
            "id": ID,
            "screen": {
                "type": "boolean",
                "default": False,
                "description": "include the current screen",
            },
        },
        ("id",),
        show,
        True,
    ),
    Tool(
        "spawn",
        "Start a new supervised session of an agent CLI. It answers once the agent runs (state "
        "live, activity starting), before its screen is read: call wait next to know whether it "
        "is ready, needs a human or ended. The config file's [spawn] defaults apply as for "
        "`roost spawn`." + HUMAN_NOTE,
        {
            "provider": {
                "type": "string",
                "minLength": 1,
                "description": f"the agent CLI: {', '.join(names())}, or one the node's "
                "config file defines",
            },
            "cwd": {
                "type": "string",
                "minLength": 1,
                "description": "the working directory: a registered workspace (id, name or path) "
                "or an absolute directory on the node's machine; default: the working directory "
                "of this MCP server's process",
            },
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": 128,
                "description": "a "
                "display name, unique on the node; tools take it in place of the id",
            },
            "mode": {
                "type": "string",
                "enum": list(MODES),
                "description": "pty (an interactive "
                "terminal: prompt, key, show screen) or stream (headless turns: turn); "
                "default pty",
            },
            "env": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "extra environment variables for the agent",
            },
            "restore": {
                "type": "string",
                "enum": list(RESTORE_POLICIES),
                "description": "after "
                "a reboot the node resumes the session (resume) or leaves it dormant "
                "(never, the default)",
            },
            "on_limit": {
                "type": "string",
                "enum": list(ON_LIMIT),
                "description": "at a usage "
                "limit screen: report it (wait, the default) or type the provider's "
                "continue prompt once the reset time has passed (continue)",
            },
            "op": OP,
        },
        ("provider",),
        spawn,
        False,
    ),
    Tool(
        "wait",
        "Wait until a session is ready for input, needs a human, or has ended, at most timeout "
        "seconds. outcome is ready, attention (needs_human: true, attention: the reason), exited "
        "(the record is dormant or failed) or timeout (the record as it is still). Without "
        "after_seq it waits for the session to be ready (right after spawn or resume; a stream "
        "session is ready once live). With after_seq (the seq that prompt or key answered) it "
        "waits for the end of the pty turn that input began: the agent has answered and is ready "
        "again. For stream-mode turns use turn with wait: true.",
        {
            "id": ID,
            "after_seq": {
                "type": "integer",
                "minimum": 0,
                "description": "the seq of an input "
                "(prompt's or key's answer): wait for the end of the turn it began",
            },
            "timeout": timeout_s(READY_TIMEOUT_S, "the outcome"),
        },
        ("id",),
        wait,
        True,
    ),
    Tool(
        "prompt",
        "Type text into a pty session and submit it (as if typed and Enter pressed). accepted "
        "means durable: the input is committed and will be typed once, in order; the answer's seq "
        "is what wait's after_seq takes. This types into the session whatever its state, also "
        "into a screen that waits for a human (attention: a permission or login question): "
        "answering such a screen is the caller's decision, never the server's.",
        {"id": ID, "text": {**TEXT, "description": "the text to type and submit"}, "op": OP},
        ("id", "text"),
        prompt,
        False,
    ),
    Tool(
        "key",
        "Press named keys in a pty session, in order (enter submits). Like prompt, this types "
        "into the session whatever its state, a screen that waits for a human included: that is "
        "the caller's decision. The answer's seq is what wait's after_seq takes.",
        {
            "id": ID,
            "keys": {
                "type": "array",
                "minItems": 1,
                "maxItems": 64,
                "items": {"type": "string", "enum": list(KEY_NAMES)},
                "description": "key names, pressed in order",
            },
            "op": OP,
        },
        ("id", "keys"),
        key,
        False,
    ),
    Tool(
        "turn",
        "Run a turn of a stream-mode session (a headless run of the agent in the same "
        "conversation): give text. It answers once the turn is accepted (durable), with its turn "
        "id; with wait: true it waits until the turn ends (completed, failed or interrupted) and "
        "returns the turn with its result (output: the agent's final text). wait: true without "
        "text waits for the turn turn_id, or the session's latest turn. If the wait's timeout "
        "passes first, ended is false and the turn goes on.",
        {
            "id": ID,
            "text": {**TEXT, "description": "the prompt of the turn"},
            "wait": {"type": "boolean", "default": False, "description": "wait for the turn's end"},
            "turn_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": 64,
                "description": "with wait and no text: the turn to wait for (default the latest)",
            },
            "timeout": timeout_s(300.0, "the turn's end (with wait)"),
            "op": OP,
        },
        ("id",),
        turn,
        False,
    ),
    Tool(
        "stop",
        "Stop a live session: SIGTERM, then SIGKILL after grace_ms. The record becomes dormant "
        "and keeps its provider session id, so resume continues the same conversation. Stopping "
        "a record that is not running returns it unchanged.",
        {
            "id": ID,
            "grace_ms": {
                "type": "integer",
                "minimum": 0,
                "maximum": 60000,
                "default": 3000,
                "description": "milliseconds between SIGTERM and SIGKILL",
            },
            "op": OP,
        },
        ("id",),
        stop,
        False,
    ),
    Tool(
        "resume",
        "Cold-resume a dormant (or failed) record by its provider session id, in its cwd with its "
        "env, as a new generation: the same conversation continues. Call wait next, as after "
        "spawn." + HUMAN_NOTE,
        {"id": ID, "op": OP},
        ("id",),
        resume,
        False,
    ),
    Tool(
        "events",
        "The node's durable event log after a sequence number, oldest first (record.state, "
        "session.input, session.classified, session.output, session.turn, ...). Page on with "
        "after set to the last seq returned while more is true; gap: true says events were "
        "dropped by retention.",
        {
            "after": {
                "type": "integer",
                "minimum": 0,
                "default": 0,
                "description": "only events with a larger seq",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 5000,
                "default": 100,
                "description": "at most this many events",
            },
            "id": {**ID, "description": "only the events of this record (id or name)"},
        },
        (),
        events,
        True,
    ),
)
BY_NAME = {tool.name: tool for tool in TOOLS}


# --- the arguments -----------------------------------------------------------------------------

JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def checked(tool: Tool, args: Args | None) -> Args:
    """The arguments, checked against the tool's schema (the keywords its schemas use); a
    mismatch is ``bad-request`` naming the field."""
    args = dict(args or {})
    for name in tool.required:
        if name not in args:
            raise RoostError("bad-request", f"{tool.name} needs {name}", {"field": name})
    for name, value in args.items():
        schema = tool.properties.get(name)
        if schema is None:
            raise RoostError(
                "bad-request", f"{tool.name} takes no argument {name!r}", {"field": name}
            )
        if value is None and name not in tool.required:
            continue
        if problem := mismatch(schema, value):
            raise RoostError("bad-request", f"{name}: {problem}", {"field": name})
    return {k: v for k, v in args.items() if v is not None}


def mismatch(schema: dict[str, Any], value: Any) -> str:
    """Why ``value`` does not fit ``schema``; empty when it does."""
    kind = schema.get("type")
    if kind and (
        not isinstance(value, JSON_TYPES[kind])
        or (isinstance(value, bool) and kind in ("integer", "number"))
    ):
        return f"must be a {kind}"
    if "enum" in schema and value not in schema["enum"]:
        return f"must be one of {', '.join(map(str, schema['enum']))}"
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and not schema.get("minimum", value) <= value <= schema.get("maximum", value):
        return f"must be between {schema.get('minimum')} and {schema.get('maximum')}"
    if isinstance(value, str | list):
        if len(value) < schema.get("minLength", schema.get("minItems", 0)):
            return "is too short"
        if len(value) > schema.get("maxLength", schema.get("maxItems", len(value))):
            return "is too long"
    if isinstance(value, list) and "items" in schema:
        for item in value:
            if problem := mismatch(schema["items"], item):
                return f"each item {problem}"
    if isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        for item in value.values():
            if problem := mismatch(schema["additionalProperties"], item):
                return f"each value {problem}"
    return ""


def run(ctx: Ctx, name: str, args: Args | None) -> dict[str, Any]:
    """Call the tool ``name``: its result, or a RoostError."""
    tool = BY_NAME.get(name)
    if tool is None:
        raise RoostError(
            "bad-request", f"no tool {name!r}; the tools: {', '.join(BY_NAME)}", {"field": "name"}
        )
    return tool.handler(ctx, checked(tool, args))
