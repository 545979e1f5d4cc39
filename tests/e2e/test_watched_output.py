"""A session's output is published only while someone subscribes to it: the broker's XPUB
sockets see the subscriptions and tell the session's supervisor, which publishes nothing while
nobody watches (the transcript and screen take every byte either way) and publishes again for a
subscriber, who reads from the transcript what came before it was heard. Through a hub, a node's
link relays only the output the hub's clients subscribe to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.conftest import Node, wait_for
from tests.e2e.test_reboot import _spawned, _talked


def _output(node: Node) -> int:
    return int(node.run("node", "status")["broker"]["output"])


def _spawn(node: Node, project: Path, name: str) -> str:
    return str(_spawned(node, name, project)["id"])


def test_output_is_published_only_while_someone_subscribes(node: Node, tmp_path: Path) -> None:
    node.up()
    rid = _spawn(node, tmp_path, "watched")

    def unwatched(text: str) -> bool:  # a prompt's answer is not published
        before = _output(node)
        _talked(node, rid, text)
        return _output(node) == before

    wait_for(lambda: unwatched("nobody"), 15, "output not published while nobody watches")
    with node.client() as client:
        client.initialize()
        stream = client.subscribe(f"o/{rid}")
        got: list[dict[str, Any]] = []
        try:

            def heard(n: list[int] = [0]) -> bool:  # noqa: B006 - a counter across tries
                n[0] += 1
                _talked(node, rid, f"seen {n[0]}")
                while (message := stream.recv(0.3)) is not None:
                    got.append(message[1])
                return any(b"echo: seen" in m["data"] for m in got)

            wait_for(heard, 15, "the subscriber's output")
            transcript = client.call("session.transcript", {"id": rid, "limit": 500_000})
            for message in got:  # what it heard is the transcript's, byte for byte
                offset, data = message["offset"], message["data"]
                assert transcript["data"][offset : offset + len(data)] == data
        finally:
            stream.close()
    wait_for(lambda: unwatched("gone"), 15, "output not published once the subscriber left")


def test_a_session_that_nobody_watches_keeps_every_byte(node: Node, tmp_path: Path) -> None:
    """Unwatched, the terminal is read at a slower pace; every answer is still on the screen
    and in the transcript, and nothing is published."""
    node.up()
    rid = _spawn(node, tmp_path, "unwatched")
    for i in range(5):
        node.run("prompt", rid, f"line {i}")
        node.wait_screen(rid, f"echo: line {i}")
    with node.client() as client:
        data = client.call("session.transcript", {"id": rid, "limit": 500_000})["data"]
    assert all(f"echo: line {i}".encode() in data for i in range(5))
    assert _output(node) == 0
