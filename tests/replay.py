"""Recorded PTY output of the real CLIs, replayed at its own pace: the fixtures of the screen's
cost (``bench/fig_screen.py``) and of its correctness (``tests/unit/test_terminal_replay.py``).

A fixture (``tests/fixtures/replay/<provider>.bin.gz``) is gzip of: one JSON line (the provider,
the CLI's version, the terminal's rows and columns, the prompt typed), then one record per read
of the terminal: the seconds since the read before (8-byte big-endian double), the length
(4-byte big-endian unsigned) and the bytes. ``tests/real/test_replay_record.py`` records them.
"""

from __future__ import annotations

import gzip
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "replay"
PROVIDERS = ("claude", "codex", "kimi")
HEAD = struct.Struct(">dI")


@dataclass
class Replay:
    meta: dict[str, Any]
    chunks: list[tuple[float, bytes]] = field(default_factory=list)  # (delay before, bytes)

    @property
    def rows(self) -> int:
        return int(self.meta["rows"])

    @property
    def cols(self) -> int:
        return int(self.meta["cols"])

    @property
    def size(self) -> int:
        return sum(len(data) for _, data in self.chunks)

    @property
    def seconds(self) -> float:
        return sum(delay for delay, _ in self.chunks)

    def data(self) -> bytes:
        return b"".join(data for _, data in self.chunks)

    def write(self, path: Path) -> None:
        body = [json.dumps(self.meta, sort_keys=True).encode() + b"\n"]
        for delay, data in self.chunks:
            body += [HEAD.pack(delay, len(data)), data]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with gzip.GzipFile(tmp, "wb", compresslevel=9, mtime=0) as fh:
            fh.write(b"".join(body))
        tmp.replace(path)


def path_of(provider: str) -> Path:
    return FIXTURES / f"{provider}.bin.gz"


def load(provider: str) -> Replay:
    return read(path_of(provider))


def read(path: Path) -> Replay:
    raw = gzip.decompress(path.read_bytes())
    end = raw.index(b"\n")
    replay = Replay(json.loads(raw[:end]))
    at = end + 1
    while at < len(raw):
        delay, size = HEAD.unpack_from(raw, at)
        at += HEAD.size
        replay.chunks.append((delay, raw[at : at + size]))
        at += size
    return replay
