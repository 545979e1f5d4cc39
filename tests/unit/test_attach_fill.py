"""``roost attach`` and a hole in the output (roost.cli.attach.Attachment.output): the missed
bytes are read from the transcript by offset and written once, in order; a hole the transcript
no longer holds, or one too big to be worth writing, redraws the screen instead."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from roost.cli import attach

OUTPUT = bytes(range(256)) * 64  # the transcript: 16 KiB, every byte value


class Transcript:
    """A client whose session.transcript answers from OUTPUT, with bytes below ``kept`` dropped
    and at most ``chunk`` per answer; session.show answers a screen at ``shown``."""

    def __init__(self, kept: int = 0, chunk: int = 1000, shown: int = 0) -> None:
        self.kept, self.chunk, self.shown = kept, chunk, shown
        self.reads: list[tuple[int, int]] = []
        self.shows = 0

    def call(self, method: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        if method == "session.show":
            self.shows += 1
            doc = {"screen": "S", "cursor": {"row": 0, "col": 0}, "offset": self.shown}
            return doc | {"classification": None}
        assert method == "session.transcript"
        offset, limit = body["offset"], body["limit"]
        self.reads.append((offset, limit))
        start = max(offset, self.kept)
        data = OUTPUT[start : start + min(limit, self.chunk)]
        return {"offset": start, "data": data, "end": len(OUTPUT), "dropped": start > offset}


def view(client: Transcript, expected: int) -> tuple[attach.Attachment, io.BytesIO]:
    out = io.BytesIO()
    got = attach.Attachment(client, {"id": "r1"}, False, False, False, out=out)  # type: ignore[arg-type]
    got.expected = expected
    return got, out


def test_a_hole_is_filled_from_the_transcript_and_every_byte_written_once() -> None:
    client = Transcript()
    shown, out = view(client, 100)
    shown.output({"offset": 100, "data": OUTPUT[100:200]})
    shown.output({"offset": 5000, "data": OUTPUT[5000:6000]})  # 200..5000 missed
    shown.output({"offset": 5500, "data": OUTPUT[5500:7000]})  # overlaps what was written
    assert out.getvalue() == OUTPUT[100:7000]
    assert client.shows == 0 and shown.expected == 7000
    assert client.reads[0] == (200, 4800) and len(client.reads) == 5  # 1,000 bytes an answer


def test_a_hole_the_transcript_dropped_redraws() -> None:
    client = Transcript(kept=3000, shown=4000)
    shown, out = view(client, 200)
    shown.output({"offset": 5000, "data": OUTPUT[5000:6000]})
    assert client.shows == 1 and client.reads == [(200, 4800)]
    drawn = out.getvalue()
    assert drawn.startswith(b"\x1b[H\x1b[2JS") and drawn.endswith(OUTPUT[5000:6000])
    assert shown.expected == 6000


def test_a_hole_past_the_bound_redraws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attach, "FILL_MAX", 1000)
    client = Transcript(shown=5000)
    shown, out = view(client, 200)
    shown.output({"offset": 5000, "data": OUTPUT[5000:6000]})
    assert client.shows == 1 and client.reads == []
    assert out.getvalue().endswith(OUTPUT[5000:6000]) and shown.expected == 6000


def test_json_output_says_where_the_filled_bytes_start(capsys: pytest.CaptureFixture[str]) -> None:
    client = Transcript()
    shown, _ = view(client, 65)
    shown.as_json = True
    shown.output({"offset": 70, "data": OUTPUT[70:75]})
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [{"offset": 65, "data": "ABCDE"}, {"offset": 70, "data": "FGHIJ"}]
