"""A session's output to its subscribers, coalesced under a flood (roost.actors.supervisor.fanout):
the first read after a quiet spell goes out at once, a flood as few messages of contiguous bytes
each at most the limit, and nothing is lost, reordered or sent twice."""

from __future__ import annotations

import asyncio

import pytest

from roost.actors.supervisor.fanout import Fanout


class Sent:
    def __init__(self) -> None:
        self.messages: list[tuple[int, bytes]] = []
        self.more = asyncio.Event()

    def __call__(self, offset: int, data: bytes) -> None:
        self.messages.append((offset, data))
        self.more.set()

    async def wait_for(self, count: int) -> None:
        async def enough() -> None:
            while len(self.messages) < count:
                self.more.clear()
                await self.more.wait()

        await asyncio.wait_for(enough(), 5)


async def _the_first_read_after_quiet_goes_out_at_once() -> None:
    sent = Sent()
    fanout = Fanout(sent, window=0.05)
    fanout.push(0, b"typed")
    assert sent.messages == [(0, b"typed")]
    fanout.push(5, b" echo")  # within the window: gathered until it closes
    fanout.push(10, b"ed")
    assert len(sent.messages) == 1
    await sent.wait_for(2)
    assert sent.messages == [(0, b"typed"), (5, b" echoed")]
    fanout.close()


async def _a_flood_goes_out_in_few_contiguous_messages_within_the_limit() -> None:
    sent = Sent()
    fanout = Fanout(sent, window=0.01, limit=40_000)
    chunks = [bytes([65 + i % 26]) * 4095 for i in range(200)]
    offset = 1000
    for chunk in chunks:
        fanout.push(offset, chunk)
        offset += len(chunk)
        if len(sent.messages) % 7 == 0:
            await asyncio.sleep(0)  # the event loop turns now and then, as between reads
    await asyncio.sleep(0.03)
    fanout.close()
    assert all(len(data) <= 40_000 for _, data in sent.messages)
    assert len(sent.messages) < len(chunks) // 4
    at = 1000
    for start, data in sent.messages:
        assert start == at
        at += len(data)
    assert b"".join(data for _, data in sent.messages) == b"".join(chunks)


async def _output_that_does_not_continue_the_gathered_bytes_starts_a_message() -> None:
    sent = Sent()
    fanout = Fanout(sent, window=1.0)
    fanout.push(0, b"a")
    fanout.push(1, b"bb")
    fanout.push(1, b"cc")  # the disk refused "bb": the offsets did not move on
    fanout.close()
    assert sent.messages == [(0, b"a"), (1, b"bb"), (1, b"cc")]


async def _close_sends_what_is_gathered(pending: bool) -> None:
    sent = Sent()
    fanout = Fanout(sent, window=10.0)
    fanout.push(0, b"x")
    if pending:
        fanout.push(1, b"y")
    fanout.close()
    assert b"".join(d for _, d in sent.messages) == (b"xy" if pending else b"x")
    await asyncio.sleep(0)


def test_the_first_read_after_quiet_goes_out_at_once() -> None:
    asyncio.run(_the_first_read_after_quiet_goes_out_at_once())


def test_a_flood_goes_out_in_few_contiguous_messages_within_the_limit() -> None:
    asyncio.run(_a_flood_goes_out_in_few_contiguous_messages_within_the_limit())


def test_output_that_does_not_continue_the_gathered_bytes_starts_a_message() -> None:
    """A transcript that lost bytes to a full disk hands on an offset that did not move."""
    asyncio.run(_output_that_does_not_continue_the_gathered_bytes_starts_a_message())


@pytest.mark.parametrize("pending", [True, False])
def test_close_sends_what_is_gathered(pending: bool) -> None:
    asyncio.run(_close_sends_what_is_gathered(pending))
