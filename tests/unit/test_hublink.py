"""A node's link to a hub (roost.actors.node.hublink): the local connection that carries a hub
client's request on to the node's own broker, against a raw ROUTER standing in for that broker."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
import zmq.asyncio

from roost.actors.node.hublink import LocalClient
from roost.wire import protocol as p


@pytest.fixture
def ctx() -> Iterator[zmq.asyncio.Context]:
    context = zmq.asyncio.Context()
    yield context
    context.destroy(linger=0)


Seen = list[tuple[p.Header, dict[str, Any]]]


async def _broker(router: zmq.asyncio.Socket, seen: Seen) -> None:
    """Answer every request at once: ``initialize`` with a version, others with their method."""
    while True:
        routing_id, header, body = await router.recv_multipart()
        h = p.Header.decode(header)
        seen.append((h, p.unpack(body)))
        reply = {"version": 1} if h.method == "initialize" else {"method": h.method}
        await router.send_multipart([routing_id, p.reply_header(h).encode(), p.pack(reply)])


async def _calls(
    ctx: zmq.asyncio.Context, tmp_path: Path, requests: list[p.Header], *, together: bool
) -> tuple[list[Any], Seen]:
    endpoint = f"ipc://{tmp_path}/node.sock"
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(endpoint)
    seen: Seen = []
    client = LocalClient(ctx, endpoint, "the-token", "hub-link/operator")
    tasks = [asyncio.create_task(client.run()), asyncio.create_task(_broker(router, seen))]
    try:
        await asyncio.sleep(0)  # both tasks start: the reader opens its socket at once
        if together:
            calls = (asyncio.wait_for(client.call(h, {"n": i}), 10) for i, h in enumerate(requests))
            results = await asyncio.gather(*calls, return_exceptions=True)
        else:
            results = [await asyncio.wait_for(client.call(h, {"n": 0}), 10) for h in requests]
        return list(results), seen
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        router.close(0)


def _request(method: str, **kw: Any) -> p.Header:
    return p.Header(kind=p.REQUEST, rid="hub:1", method=method, target="lab-a/node", **kw)


def test_the_link_initialises_once_and_forwards_to_the_node(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    session = {"id": "r1", "generation": 2}
    requests = [
        _request("session.prompt", session=session, grant="g1", op="op1"),
        _request("session.list"),
    ]
    results, seen = asyncio.run(_calls(ctx, tmp_path, requests, together=False))
    assert results == [{"method": "session.prompt"}, {"method": "session.list"}]
    assert [h.method for h, _ in seen] == ["initialize", "session.prompt", "session.list"]
    init, body = seen[0]
    assert init.target == "broker" and body["token"] == "the-token"
    prompt = seen[1][0]  # as the hub client asked, addressed to the node's own actor
    assert (prompt.target, prompt.session, prompt.grant, prompt.op) == (
        "node",
        session,
        "g1",
        "op1",
    )


def test_requests_arriving_while_the_link_initialises_are_all_answered(
    ctx: zmq.asyncio.Context, tmp_path: Path
) -> None:
    requests = [_request("session.list") for _ in range(3)]
    results, seen = asyncio.run(_calls(ctx, tmp_path, requests, together=True))
    assert results == [{"method": "session.list"}] * 3
    assert [h.method for h, _ in seen] == ["initialize"] + ["session.list"] * 3
