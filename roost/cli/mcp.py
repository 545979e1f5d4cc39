"""``roost mcp``: a Model Context Protocol server over stdio, on the official ``mcp`` SDK.

An agent CLI that takes MCP servers starts it as one and gets roost's sessions as tools
(``roost.cli.mcp_tools``): list, show, spawn, wait, prompt, key, turn, stop, resume, events. It is
just another client of the node, or of a hub: the global options (``--state-dir``, ``--connect``
with ``--server-key``/``--key-file``, ``--hub``, ``--node``, ``ROOST_TOKEN``) say which, as for
every other command, and the token or key decides its role (an observer's changes are refused
``forbidden`` by the node). It keeps nothing between calls.

The SDK (and pydantic, anyio, starlette under it) is imported here only when the command runs:
``roost --help`` and every other command start without it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from roost import __version__
from roost.cli.context import Ctx
from roost.providers import names
from roost.wire.errors import RoostError

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

INSTRUCTIONS = (
    f"roost runs AI coding-agent CLIs ({', '.join(names())}) as durable supervised sessions "
    "on a node. spawn starts one (pty: an interactive terminal; stream: headless turns), wait "
    "tells when it is ready, needs a human or ended, prompt/key type into a pty session (wait "
    "with after_seq for its answer, show with screen: true to read it), turn runs a stream turn. "
    "A session in state attention needs a human: the server never answers a login, trust or "
    "permission screen; typing into one (prompt, key) is the caller's decision. Errors start "
    "with roost's error code (not-found, forbidden, session-not-live, ...). Give mutating calls "
    "an op id to make a retry safe."
)


@click.command("mcp")
@click.pass_obj
def mcp(ctx: Ctx) -> None:
    """Serve roost's sessions as MCP tools over stdio (for an agent CLI): list, show,
    spawn, wait, prompt, key, turn, stop, resume, events, on the node (or hub) the global options
    name, under the role of its token or key."""
    import anyio

    ctx.quiet = True  # stdout is the protocol's: no progress notes
    anyio.run(serve, ctx)


async def serve(ctx: Ctx) -> None:
    from mcp.server.stdio import stdio_server

    server = build(ctx)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def build(ctx: Ctx) -> Server[Any]:
    """The MCP server whose tools call the node through ``ctx``."""
    import anyio.to_thread
    import mcp.types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

    from roost.cli import mcp_tools

    tools = [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema,
            annotations=types.ToolAnnotations(
                read_only_hint=tool.read_only,
                destructive_hint=tool.name == "stop" if not tool.read_only else None,
                open_world_hint=False,
            ),
        )
        for tool in mcp_tools.TOOLS
    ]

    async def list_tools(
        _: ServerRequestContext[Any], __: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        _: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        def blocking() -> dict[str, Any]:
            return mcp_tools.run(ctx, params.name, params.arguments)

        try:  # the client library is synchronous: in a worker thread, one connection a call
            doc = await anyio.to_thread.run_sync(blocking, abandon_on_cancel=True)
        except RoostError as err:
            error = {"code": err.code, "message": err.message, "detail": jsonable(err.detail)}
            return types.CallToolResult(
                content=[types.TextContent(text=f"{err.code}: {err.message}")],
                structured_content={"error": error},
                is_error=True,
            )
        result = jsonable(doc)
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
        )

    return Server(
        "roost",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def jsonable(doc: Any) -> Any:
    """``doc`` as JSON has it: bytes as text, anything else JSON cannot hold as its string."""
    return json.loads(json.dumps(doc, default=_text))


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)
