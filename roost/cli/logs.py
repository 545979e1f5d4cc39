"""``roost logs [ID] [--follow]``: the node's logs, or a record's supervisor log, readable.

The node's processes write JSON lines to ``<state-dir>/logs/node.log``, ``state.log`` and
``adapters.log``; each record's supervisors to ``<state-dir>/sessions/<record>/supervisor.log``.
Each of them is rotated at a size (``<name>.1`` is the newest old file, ``<name>.2`` older
...); ``--lines`` reaches into the rotated files when the current one holds fewer. This command
reads those files where they are (it works with the node down: that is when logs are
wanted most), so it needs the state directory, not a connection. Without ID the three node logs
are merged in time order. Text shows ``time level [actor] event key=value ...``; ``--json``
prints one document, ``{"lines": [...]}``, each line the JSON object it is in the file (a line
that is not JSON as ``{"raw": line}``), and with ``--follow`` one such object a line, as they
come (as ``events --follow --json`` does). ``--follow`` prints lines as they are appended,
and after a rotation reads the last lines of the old file, then the new one from its start.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import click

from roost.cli.context import Ctx, reader
from roost.cli.output import emit_json
from roost.wire.errors import RoostError

NODE_LOGS = ("node.log", "state.log", "adapters.log")
FOLLOW_POLL_S = 0.2
LEVEL_COLOURS = {"warning": "yellow", "error": "red", "critical": "red"}
SHOWN_FIRST = ("timestamp", "level", "event", "actor", "pid", "exception")


@dataclass
class Tail:
    """One log file read from where the last read stopped, as ``tail -F`` does: the file stays
    open, so the lines its writer appended just before a rotation renamed it are still read
    (from the old file) before the new file is read from its start."""

    path: Path
    fh: BinaryIO | None = None
    inode: int | None = None
    part: bytes = field(default=b"")

    def read(self) -> list[str]:
        """The complete lines appended since the last read (then those of a new file)."""
        lines = self._split(self._drain())
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return lines
        if st.st_ino == self.inode and self.fh is not None and st.st_size >= self.fh.tell():
            return lines
        if self.part.strip():  # rotated, replaced or truncated: the old file's cut last line
            lines.append(self.part.decode("utf-8", "replace"))
        self.part = b""
        self.close()
        try:
            self.fh = open(self.path, "rb")  # noqa: SIM115 (kept open between reads)
        except OSError:
            return lines
        self.inode = os.fstat(self.fh.fileno()).st_ino
        return lines + self._split(self._drain())

    def _drain(self) -> bytes:
        return self.fh.read() if self.fh is not None else b""

    def _split(self, data: bytes) -> list[str]:
        *lines, self.part = (self.part + data).split(b"\n")
        return [line.decode("utf-8", "replace") for line in lines if line.strip()]

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None


def rotated(path: Path) -> list[Path]:
    """The rotated files of a log, oldest first: ``<name>.N`` .. ``<name>.1``."""
    found = []
    n = 1
    while (older := path.with_name(f"{path.name}.{n}")).exists():
        found.append(older)
        n += 1
    return found[::-1]


def last_lines(tail: Tail, count: int) -> list[str]:
    """The last ``count`` lines of the log, reaching into its rotated files (newest first)
    while the current file has fewer; the tail then continues after them."""
    if count <= 0:
        tail.read()
        return []
    lines = tail.read()
    for older in reversed(rotated(tail.path)):
        if len(lines) >= count:
            break
        earlier = Tail(older)
        lines = earlier.read() + lines
        earlier.close()
    return lines[-count:]


def parse(line: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def render(line: str, *, with_actor: bool) -> str:
    """``2026-12-01 11:12:13.456 INFO  [node] node-serving node_id=lab-1 ...``; a line that is
    not JSON as it is."""
    doc = parse(line)
    if doc is None:
        return line
    when = str(doc.get("timestamp") or "").replace("T", " ").rstrip("Z")[:23]
    level = str(doc.get("level") or "info")
    shown = f"{level.upper():<7}"
    if level in LEVEL_COLOURS:  # click.echo drops the colour when stdout is no terminal
        shown = click.style(shown, fg=LEVEL_COLOURS[level])
    text = f"{when} {shown}"
    if with_actor and doc.get("actor"):
        text += f" [{doc['actor']}]"
    text += f" {doc.get('event', '')}"
    rest = {k: v for k, v in doc.items() if k not in SHOWN_FIRST}
    text += "".join(f" {k}={_value(v)}" for k, v in rest.items())
    if doc.get("exception"):
        text += "\n    " + str(doc["exception"]).rstrip().replace("\n", "\n    ")
    return text


def _value(value: Any) -> str:
    if isinstance(value, str) and value and " " not in value and "=" not in value:
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _record_dir(ctx: Ctx, ref: str) -> Path:
    """A record's session directory, by record id, or by name through the node."""
    sessions = ctx.state_dir / "sessions"
    if (sessions / ref).is_dir():
        return sessions / ref
    try:
        rid = str(ctx.call("session.show", {"id": ref})["record"]["id"])
    except RoostError as err:
        if err.code != "node-not-running":
            raise
        raise RoostError(
            "not-found",
            f"no record directory {ref!r}; with the node down, give the record id",
            {"ref": ref},
        ) from None
    return sessions / rid


def _ordered(lines: list[str], merged: bool) -> list[str]:
    """Lines of several files (``merged``) in time order (ISO timestamps sort as text); one
    file's lines (with its rotated files) in the order they are in."""
    if not merged:
        return lines
    return sorted(lines, key=lambda ln: str((parse(ln) or {}).get("timestamp") or ""))


@click.command()
@click.argument("ref", metavar="[ID]", required=False)
@click.option("--follow", "-f", is_flag=True, help="print lines as they are appended")
@click.option("--lines", "-n", "count", type=int, default=100, help="how many to start with")
@reader
def logs(ctx: Ctx, ref: str | None, follow: bool, count: int) -> None:
    """The node's log lines (node, state store, adapters), or with ID a record's supervisor
    log: time, level, event and fields; --json prints one document {"lines": [...]} (with
    --follow, one JSON object a line as they come)."""
    if ref:
        tails = [Tail(_record_dir(ctx, ref) / "supervisor.log")]
    else:
        tails = [Tail(ctx.state_dir / "logs" / name) for name in NODE_LOGS]
    if not any(t.path.exists() for t in tails) and not follow:
        raise RoostError("not-found", "no log files yet", {"ref": ref})
    start = [line for t in tails for line in last_lines(t, count)]
    first = _ordered(start, len(tails) > 1)[-count:] if count > 0 else []
    if ctx.json and not follow:  # one document, as every command's --json
        emit_json({"lines": [_doc(line) for line in first]})
        return
    emit = _emitter(ctx, with_actor=ref is None)
    for line in first:
        emit(line)
    try:
        while follow:
            time.sleep(FOLLOW_POLL_S)  # polling a file for appended lines
            for line in _ordered([line for t in tails for line in t.read()], len(tails) > 1):
                emit(line)
    except KeyboardInterrupt:
        return


def _doc(line: str) -> dict[str, Any]:
    """A log line as JSON: its own object, or ``{"raw": line}`` for one that is not JSON."""
    return parse(line) or {"raw": line}


def _emitter(ctx: Ctx, *, with_actor: bool) -> Any:
    def emit(line: str) -> None:
        if ctx.json:
            click.echo(line if parse(line) is not None else json.dumps({"raw": line}))
        else:
            click.echo(render(line, with_actor=with_actor))

    return emit
