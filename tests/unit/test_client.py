"""The client library's pipelined log reader (``Client.event_pages``) against a fake node: a real
ROUTER socket under the test's tmp dir, answered by a thread from a list of events."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from roost.cli import events as events_cli
from roost.cli.context import Ctx
from roost.client.client import Client, _decoded
from roost.wire import protocol as p
from roost.wire.errors import RoostError

Answer = Callable[[dict[str, Any]], tuple[str, dict[str, Any]]]


class FakeNode:
    """Answers ``events.since`` from ``log`` (pages of the asked ``limit``, ``more`` as the node
    says it), or as ``answer`` says; keeps every request body, in the order they came."""

    def __init__(self, endpoint: str, log: list[dict[str, Any]]) -> None:
        self.log = log
        self.requests: list[dict[str, Any]] = []
        self.answer: Answer = self.page
        self._sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(endpoint)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def page(self, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        after, limit = body["after"], body["limit"]
        events = [e for e in self.log if e["seq"] > after]
        doc = {"more": len(events) > limit, "last_seq": len(self.log), "gap": False}
        return p.RESPONSE, {**doc, "events": events[:limit], "first_seq": 1}

    def _serve(self) -> None:
        while not self._stop.is_set():
            if not self._sock.poll(50):
                continue
            peer, header, body = self._sock.recv_multipart()
            request = p.Header.decode(header)
            self.requests.append(p.unpack(body))
            kind, doc = self.answer(self.requests[-1])
            reply = p.Header(kind=kind, rid=request.rid, method=request.method)
            self._sock.send_multipart([peer, reply.encode(), p.pack(doc)])

    def wait_requests(self, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.requests) < n:
            assert time.monotonic() < deadline, f"{len(self.requests)} requests, not {n}"
            time.sleep(0.01)  # polling the server thread's list, with the deadline above
        return self.requests

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close(0)


def events(n: int) -> list[dict[str, Any]]:
    return [
        {"seq": s, "ts": 1.5, "kind": "k", "record": "r1", "generation": 1, "data": {"n": s}}
        for s in range(1, n + 1)
    ]


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[FakeNode, Client]]:
    endpoint = f"ipc://{tmp_path}/router"
    node = FakeNode(endpoint, events(23))
    client = Client(endpoint, "token", timeout=10.0)
    try:
        yield node, client
    finally:
        client.close()
        node.close()


def test_pages_come_in_order_none_missing_or_repeated_the_next_asked_for_early(
    fake: tuple[FakeNode, Client],
) -> None:
    node, client = fake
    pages = client.event_pages({"after": 0, "limit": 5})
    first = next(pages)
    assert [e["seq"] for e in first["events"]] == [1, 2, 3, 4, 5]
    # pipelined: the request for page 2 went out before page 1 was handed over
    assert node.wait_requests(2)[1] == {"after": 5, "limit": 5}
    seqs = [e["seq"] for page in [first, *pages] for e in page["events"]]
    assert seqs == list(range(1, 24))
    assert [r["after"] for r in node.requests] == [0, 5, 10, 15, 20]  # none after the last


def test_a_record_filter_and_a_short_last_page_are_kept(fake: tuple[FakeNode, Client]) -> None:
    node, client = fake
    node.log = [e for e in node.log if e["seq"] % 3 == 0]  # a record's events: seqs apart
    pages = list(client.event_pages({"after": 2, "limit": 3, "id": "r1"}))
    assert [[e["seq"] for e in page["events"]] for page in pages] == [[3, 6, 9], [12, 15, 18], [21]]
    assert [r["after"] for r in node.requests] == [2, 9, 18]
    assert all(r["id"] == "r1" for r in node.requests)


@pytest.mark.parametrize("code", ["durable-state-damaged", "not-initialized"])
def test_an_error_reply_midway_comes_after_the_pages_before_it(
    fake: tuple[FakeNode, Client], code: str
) -> None:
    """A damaged row, or a node that restarted mid-read (its broker forgot the connection):
    the pages before it are read, then the error is raised where the next page would be."""
    node, client = fake

    def answer(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if body["after"] >= 10:
            return p.ERROR, RoostError(code, "no").to_body()
        return node.page(body)

    node.answer = answer
    seen: list[int] = []
    with pytest.raises(RoostError) as err:
        for page in client.event_pages({"after": 0, "limit": 5}):
            seen += [e["seq"] for e in page["events"]]
    assert err.value.code == code and seen == list(range(1, 11))
    assert len(node.requests) == 3


def test_stopping_early_leaves_no_stale_page_for_the_next_call(
    fake: tuple[FakeNode, Client],
) -> None:
    node, client = fake
    pages = client.event_pages({"after": 0, "limit": 5})
    next(pages)
    assert isinstance(pages, Generator)
    pages.close()  # page 2 is in flight
    node.wait_requests(2)
    assert [e["seq"] for e in client.call("events.since", {"after": 20, "limit": 5})["events"]] == [
        21,
        22,
        23,
    ]


def test_a_node_without_more_ends_on_a_short_page(fake: tuple[FakeNode, Client]) -> None:
    node, client = fake

    def answer(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        kind, doc = node.page(body)
        del doc["more"]  # an older node
        return kind, doc

    node.answer = answer
    seqs = [
        e["seq"] for page in client.event_pages({"after": 0, "limit": 5}) for e in page["events"]
    ]
    assert seqs == list(range(1, 24)) and len(node.requests) == 5


def test_events_follow_catch_up_says_how_far_it_printed_when_cut_off(
    fake: tuple[FakeNode, Client], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``events --follow`` reads on from the last seq printed after an outage in a catch-up of
    many pages, so it repeats none of them."""
    node, client = fake

    def answer(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if body["after"] >= 10:
            return p.ERROR, RoostError("not-initialized", "restarted").to_body()
        return node.page(body)

    node.answer = answer
    ctx = Ctx(state_dir=tmp_path, json=True, timeout=10.0)
    with pytest.raises(RoostError) as err:
        events_cli._catch_up(ctx, client, {"after": 0, "limit": 5}, 0)
    assert err.value.detail["after"] == 10
    assert capsys.readouterr().out.count("\n") == 10


def test_a_page_that_does_not_move_on_ends_the_read(fake: tuple[FakeNode, Client]) -> None:
    """A node answering the same page again, ``more`` and all, is not asked forever."""
    node, client = fake
    node.answer = lambda body: node.page({**body, "after": 0})
    pages = list(client.event_pages({"after": 0, "limit": 5}))
    assert [[e["seq"] for e in page["events"]] for page in pages] == [[1, 2, 3, 4, 5]] * 2
    assert [r["after"] for r in node.requests] == [0, 5]


def _collections_while(decode: Callable[[], Any]) -> int:
    started: list[str] = []

    def seen(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(phase)

    gc.callbacks.append(seen)
    try:
        decode()
    finally:
        gc.callbacks.remove(seen)
    return len(started)


def test_a_large_reply_is_decoded_with_the_gc_paused_and_left_as_it_was() -> None:
    """A page of 5,000 events is 10,000 maps: the cyclic GC would walk them a dozen times while
    they are built. It is paused for the decode only, whatever the decode ends in."""
    ok = p.Header(kind=p.RESPONSE, rid="1")
    body = p.pack({"more": False, "events": events(5000)})
    assert gc.isenabled()
    assert _collections_while(lambda: _decoded(ok, body)) == 0
    assert gc.isenabled()
    assert _decoded(ok, body)["events"] == events(5000)
    failure = p.Header(kind=p.ERROR, rid="1")
    error = p.pack({"code": "durable-state-damaged", "message": "m", "pad": "x" * 100_000})
    with pytest.raises(RoostError):
        _decoded(failure, error)
    with pytest.raises(RoostError):
        _decoded(ok, body[:-1])  # cut short
    assert gc.isenabled()
    gc.disable()
    try:
        _decoded(ok, body)
        assert not gc.isenabled()  # a caller's own choice is kept
    finally:
        gc.enable()
    small = p.pack({"n": 1})
    assert _decoded(ok, small) == {"n": 1}
