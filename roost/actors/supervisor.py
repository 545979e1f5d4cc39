"""The session supervisor (address ``session/<record_id>``): one detached process per live session.

It owns the agent's PTY, feeds a pyte screen, appends raw output to the transcript and publishes it
with byte offsets, takes input (committing an input event before typing it), asks the provider's
adapter actor to classify the screen, and stops the agent with SIGTERM then SIGKILL. It runs in its
own session and process group, so it outlives the node daemon and re-registers when it returns.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

import msgpack
import structlog
import zmq.asyncio

from roost.actors.peer import Peer
from roost.actors.process import run_until_stopped, setup_logging
from roost.actors.pty_backend import ExitStatus, PtyBackend, spawn_pty
from roost.actors.terminal import Terminal, Transcript
from roost.adapters.base import KEYS
from roost.broker import fields as f
from roost.broker import protocol as p
from roost.broker.errors import RoostError

log = structlog.get_logger("roost.supervisor")

READ_CHUNK = 65536
CLASSIFY_DELAY = 0.15
RETRY_S = 0.5


class Supervisor:
    """The actor; ``spec`` is what the node wrote for this launch."""

    def __init__(self, spec: dict[str, Any], peer: Peer, stop: asyncio.Event) -> None:
        self.spec, self.peer, self._stop = spec, peer, stop
        self.record_id: str = spec["record_id"]
        self.generation: int = spec["generation"]
        self.instance_id: str = spec["instance_id"]
        self.provider: str = spec["provider"]
        self.submit: bytes = spec.get("submit", b"\r")
        self.term = Terminal(spec["rows"], spec["cols"])
        self.transcript = Transcript(Path(spec["session_dir"]) / "transcript.bin")
        self.pty: PtyBackend | None = None
        self.exit: ExitStatus | None = None
        self.exited = asyncio.Event()
        self.classification: dict[str, Any] = {}
        self._classify_task: asyncio.Task[None] | None = None
        self._input_lock = asyncio.Lock()
        peer.handlers.update(
            {
                "session.input": self.on_input,
                "session.prompt": self.on_prompt,
                "session.key": self.on_key,
                "session.resize": self.on_resize,
                "session.screen": self.on_screen,
                "session.stop": self.on_stop,
                "session.transcript": self.on_transcript,
            }
        )
        peer.on_registered.append(self.attach)

    @property
    def session_address(self) -> dict[str, Any]:
        return {
            "record": self.record_id,
            "generation": self.generation,
            "instance": self.instance_id,
        }

    # -- the agent -----------------------------------------------------------------------------

    def launch(self) -> None:
        spec = self.spec
        self.pty = spawn_pty(spec["argv"], spec["cwd"], spec["env"], spec["rows"], spec["cols"])
        log.info("agent-started", record=self.record_id, pid=self.pty.pid)
        if self.pty.fd is not None:
            asyncio.get_running_loop().add_reader(self.pty.fd, self._readable)
        else:
            asyncio.get_running_loop().create_task(self._read_thread())

    def _readable(self) -> None:
        assert self.pty is not None
        try:
            data = self.pty.read(READ_CHUNK)
        except OSError:
            data = b""
        if not data:
            assert self.pty.fd is not None
            asyncio.get_running_loop().remove_reader(self.pty.fd)
            asyncio.get_running_loop().create_task(self._reap())
            return
        self._on_output(data)

    async def _read_thread(self) -> None:
        assert self.pty is not None
        while True:
            try:
                data = await asyncio.to_thread(self.pty.read, READ_CHUNK)
            except (OSError, EOFError):
                data = b""
            if not data:
                await self._reap()
                return
            self._on_output(data)

    def _on_output(self, data: bytes) -> None:
        offset = self.transcript.append(data)
        self.term.feed(data)
        if self.peer.registered.is_set():
            self.peer.publish(
                f"o/{self.record_id}",
                {
                    "record": self.record_id,
                    "generation": self.generation,
                    "offset": offset,
                    "data": data,
                },
            )
        self._schedule_classify()

    async def _reap(self) -> None:
        assert self.pty is not None
        while (status := self.pty.poll()) is None:
            await asyncio.sleep(0.05)
        if self.exit is None:
            self.exit = status
            log.info("agent-exited", record=self.record_id, **status.to_wire())
            self.snapshot()
            self.exited.set()
            asyncio.get_running_loop().create_task(self._report_exit())

    def snapshot(self) -> None:
        """Keep the last screen beside the transcript, for ``show --screen`` of a dormant record."""
        path = Path(self.spec["session_dir"]) / "screen.txt"
        with contextlib.suppress(OSError):
            tmp = path.with_suffix(".tmp")
            tmp.write_text(self.term.text())
            os.replace(tmp, path)

    async def watch_exit(self) -> None:
        """A backstop for agents whose descendants keep the PTY open after they exit."""
        while self.pty is not None and not self.exited.is_set():
            await asyncio.sleep(1.0)
            if self.pty.poll() is not None:
                await self._reap()

    # -- talking to the node -------------------------------------------------------------------

    async def _call_until_done(self, method: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """Retry a call to the node until it answers (across node restarts); None if fenced."""
        while True:
            try:
                return await self.peer.call("node", method, body, timeout=5.0)
            except RoostError as err:
                if err.code in ("stale-generation", "not-found"):
                    log.warning("fenced", record=self.record_id, method=method, code=err.code)
                    return None
                await asyncio.sleep(RETRY_S)

    async def attach(self) -> None:
        assert self.pty is not None
        reply = await self._call_until_done(
            "node.session.attach",
            {
                **self.session_address,
                "pid": os.getpid(),
                "agent_pid": self.pty.pid,
                "exited": self.exit.to_wire() if self.exit else None,
                "classification": self.classification or None,
            },
        )
        if reply is None:
            await self._terminate(grace=2.0)
            self._stop.set()

    async def _report_exit(self) -> None:
        assert self.exit is not None
        await self._call_until_done(
            "node.session.exited", {**self.session_address, "exit": self.exit.to_wire()}
        )
        self._stop.set()

    def _schedule_classify(self) -> None:
        if self._classify_task is None or self._classify_task.done():
            self._classify_task = asyncio.get_running_loop().create_task(self._classify())

    async def _classify(self) -> None:
        await asyncio.sleep(CLASSIFY_DELAY)
        try:
            result = await self.peer.call(
                f"adapter/{self.provider}",
                "adapter.classify",
                {"screen": self.term.text(), "exited": self.exit is not None},
                timeout=3.0,
            )
        except RoostError:
            return
        if result == self.classification:
            return
        self.classification = result
        with contextlib.suppress(RoostError):
            await self.peer.call(
                "node",
                "node.session.classified",
                {**self.session_address, "classification": result},
                timeout=3.0,
            )

    # -- requests ------------------------------------------------------------------------------

    def _fence(self, header: p.Header) -> PtyBackend:
        session = header.session or {}
        if session.get("generation", self.generation) != self.generation:
            raise RoostError(
                "stale-generation",
                "the request names another generation",
                {"generation": self.generation},
            )
        if self.pty is None or self.exit is not None:
            raise RoostError("session-not-live", "the agent has exited")
        return self.pty

    async def _type(
        self, header: p.Header, kind: str, data: bytes, shown: dict[str, Any]
    ) -> dict[str, Any]:
        """Commit the input event, then type it: accepted means durable."""
        pty = self._fence(header)
        async with self._input_lock:
            committed = await self.peer.call(
                "state",
                "state.events.append",
                {
                    "events": [
                        {
                            "kind": "session.input",
                            "record": self.record_id,
                            "generation": self.generation,
                            "data": {"input": kind, **shown},
                        }
                    ]
                },
            )
            pty.write(data)
        return {"accepted": True, "seq": committed["seqs"][0]}

    async def on_prompt(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        text = f.text(body, "text")
        return await self._type(header, "prompt", text.encode() + self.submit, {"text": text})

    async def on_input(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        text = f.text(body, "text")
        return await self._type(header, "input", text.encode(), {"text": text})

    async def on_key(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        keys = f.str_list(body, "keys", max_items=64)
        unknown = [k for k in keys if k not in KEYS]
        if unknown or not keys:
            raise RoostError(
                "bad-request", f"unknown keys {unknown}; known: {sorted(KEYS)}", {"field": "keys"}
            )
        data = b"".join(self.submit if k == "enter" else KEYS[k] for k in keys)
        return await self._type(header, "key", data, {"keys": keys})

    async def on_resize(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        pty = self._fence(header)
        rows, cols = f.req_int(body, "rows", lo=2, hi=1000), f.req_int(body, "cols", lo=2, hi=1000)
        pty.resize(rows, cols)
        self.term.resize(rows, cols)
        return {"rows": rows, "cols": cols}

    async def on_screen(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "screen": self.term.text(),
            "cursor": self.term.cursor(),
            "offset": self.transcript.offset,
            "generation": self.generation,
            "classification": self.classification or None,
        }

    async def on_transcript(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        offset = f.opt_int(body, "offset") or 0
        limit = f.opt_int(body, "limit", lo=1, hi=p.MAX_BIN // 2) or 65536
        return {
            "offset": offset,
            "data": self.transcript.read(offset, limit),
            "end": self.transcript.offset,
        }

    async def on_stop(self, header: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        grace_ms = f.opt_int(body, "grace_ms", hi=60_000)
        grace = (3000 if grace_ms is None else grace_ms) / 1000
        await self._terminate(grace)
        assert self.exit is not None
        return {"exit": self.exit.to_wire()}

    async def _terminate(self, grace: float) -> None:
        if self.pty is None or self.exited.is_set():
            return
        self.pty.signal_group(signal.SIGTERM)
        try:
            await asyncio.wait_for(self._wait_exit(), grace)
        except TimeoutError:
            log.warning("agent-kill", record=self.record_id, reason="SIGTERM grace expired")
            self.pty.signal_group(signal.SIGKILL)
            await self._wait_exit()

    async def _wait_exit(self) -> None:
        assert self.pty is not None
        while not self.exited.is_set():
            if self.pty.poll() is not None:
                await self._reap()
            await asyncio.sleep(0.02)


async def serve(spec: dict[str, Any], stop: asyncio.Event) -> None:
    ctx = zmq.asyncio.Context()
    peer = Peer(
        ctx,
        spec["endpoint"],
        f"session/{spec['record_id']}",
        spec["token"],
        incarnation=spec["instance_id"],
        meta={
            "record": spec["record_id"],
            "generation": spec["generation"],
            "instance": spec["instance_id"],
            "pid": os.getpid(),
        },
    )
    supervisor = Supervisor(spec, peer, stop)
    try:
        supervisor.launch()
    except RoostError as err:
        log.error("launch-failed", record=supervisor.record_id, reason=err.message)
        supervisor.exit = ExitStatus(127, None)
        peer_task = asyncio.create_task(peer.run())
        await supervisor._call_until_done(
            "node.session.failed", {**supervisor.session_address, "error": err.to_body()}
        )
        peer_task.cancel()
        return
    tasks = [asyncio.create_task(peer.run()), asyncio.create_task(supervisor.watch_exit())]
    await stop.wait()
    await supervisor._terminate(grace=2.0)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    supervisor.transcript.close()
    ctx.destroy(0)


def main() -> None:
    parser = argparse.ArgumentParser(prog="roost-supervisor")
    parser.add_argument(
        "--spec", required=True, help="path of the launch spec (read, then removed)"
    )
    args = parser.parse_args()
    spec_path = Path(args.spec)
    spec = msgpack.unpackb(spec_path.read_bytes(), raw=False)
    spec_path.unlink()
    setup_logging(Path(spec["session_dir"]) / "supervisor.log", f"session/{spec['record_id']}")
    if sys.platform != "win32":
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    run_until_stopped(lambda stop: serve(spec, stop))


if __name__ == "__main__":
    main()
