"""The adapter actors: each provider's knowledge served as ``adapter/<provider>`` over the broker.

One process hosts every adapter (one broker peer each). They hold no state, so the node simply
restarts the process if it dies.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

import structlog
import zmq.asyncio

from roost.actors.runtime.lines import LINE_CAP
from roost.actors.runtime.peer import Peer, Serving
from roost.actors.runtime.process import (
    child_args,
    run_until,
    run_until_stopped,
    setup_logging,
    watch_lifeline,
)
from roost.adapters import doctor
from roost.adapters.base import Adapter, Launch, LaunchContext, SessionView, verify_fork
from roost.adapters.binary import find_program, missing
from roost.adapters.evidence import Evidence
from roost.adapters.registry import adapters
from roost.adapters.settings import with_settings
from roost.config import Config, config_path, load
from roost.providers import MODES
from roost.wire import fields as f
from roost.wire import protocol as p
from roost.wire.errors import RoostError

log = structlog.get_logger("roost.adapters")


# the text an adapter is given for a plan; where it comes back in the argv, another text goes
TEXT_SLOT = "\x00roost-turn-text\x00"


def text_arg(launch: Launch) -> int | None:
    """The one argument of the launch that is the slot as given, or None when the slot is
    anywhere else too (inside an argument, the env, the session id): then the command depends
    on the text in some other way and is asked for each text."""
    at = [i for i, arg in enumerate(launch.argv) if TEXT_SLOT in arg]
    if len(at) != 1 or launch.argv[at[0]] != TEXT_SLOT:
        return None
    elsewhere = [*launch.env.keys(), *launch.env.values(), launch.provider_session or ""]
    return None if any(TEXT_SLOT in x for x in elsewhere) else at[0]


class AdapterActor:
    """Serves one adapter's methods."""

    def __init__(self, adapter: Adapter, peer: Peer, cfg: Config | None = None) -> None:
        self.adapter, self.peer = adapter, peer
        self.config = cfg or Config(*config_path({}))  # the file's provider bin and env
        handlers: dict[str, Serving] = {
            "adapter.launch": self.launch,
            "adapter.classify": self.classify,
            "adapter.identity": self.identity,
            "adapter.turn": self.turn,
            "adapter.parse": self.parse,
            "adapter.verify_resume": self.verify_resume,
            "adapter.doctor": self.doctor,
            "adapter.usage": self.usage,
        }
        p.check_served(p.ADAPTER, handlers)  # the table of methods says what it serves
        peer.handlers.update(handlers)

    @staticmethod
    def _context(body: dict[str, Any]) -> LaunchContext:
        mode = f.req_str(body, "mode")
        if mode not in MODES:
            must = " or ".join(MODES)
            raise RoostError("bad-request", f"field 'mode' must be {must}", {"field": "mode"})
        return LaunchContext(
            cwd=f.req_str(body, "cwd"),
            mode=mode,
            env=f.str_map(body, "env"),
            data_dir=f.req_str(body, "data_dir"),
            session_dir=f.opt_str(body, "session_dir", max_len=4096) or "",
        )

    def _configured(self, body: dict[str, Any]) -> tuple[LaunchContext, dict[str, str]]:
        """The launch context with the config file's binary and env for this provider, and what
        they add to the agent's environment (which later requests then carry)."""
        ctx, provider = self._context(body), self.adapter.provider
        if ctx.mode not in self.adapter.modes:
            must = " or ".join(self.adapter.modes)
            raise RoostError(
                "bad-request", f"{provider} runs sessions in mode {must} only", {"field": "mode"}
            )
        return with_settings(provider, ctx, self.config, os.environ)

    async def launch(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        ctx, added = self._configured(body)
        resume = f.opt_str(body, "resume", max_len=256)
        fork = f.opt_str(body, "fork", max_len=256)
        if fork and resume:  # a fork's record resumed: its own conversation, if begun
            launch = self.adapter.resume_fork(resume, fork, ctx)
        elif fork:
            launch = self.adapter.fork(fork, ctx)
        else:
            launch = self.adapter.resume(resume, ctx) if resume else self.adapter.fresh(ctx)
        self._check_program(launch, ctx)
        return {
            **launch.to_wire(),
            "env": {**added, **launch.env},
            "submit": self.adapter.submit,
            "submit_delay_s": self.adapter.submit_delay_s,
            "turn_silence_s": self.adapter.turn_silence_s,
            "turn_deadline_s": self.adapter.turn_deadline_s,
            "osc9": self.adapter.osc9_rules(),
        }

    def _check_program(self, launch: Launch, ctx: LaunchContext) -> None:
        """``provider-missing`` unless the launch's program is there: in the agent's environment
        (this host's is the node's, the base of every agent's), from the record's cwd."""
        env = {**os.environ, **ctx.env, **launch.env}
        program = launch.argv[0]
        if find_program(program, env, ctx.cwd) is None:
            a = self.adapter
            raise missing(a.provider, program, a.bin_env, a.install)

    @staticmethod
    def _evidence(body: dict[str, Any], key: str = "evidence") -> Evidence | None:
        raw = body.get(key)
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise RoostError("bad-request", f"field {key!r} must be a map", {"field": key})
        try:
            return Evidence.from_wire(raw)
        except (KeyError, TypeError, ValueError):
            raise RoostError(
                "bad-request", f"field {key!r} is not process evidence", {"field": key}
            ) from None

    @classmethod
    def _launched(cls, body: dict[str, Any]) -> LaunchContext | None:
        """The launch context, when the caller sent one (``mode`` and the rest)."""
        return cls._context(body) if body.get("mode") is not None else None

    @staticmethod
    def _since(body: dict[str, Any]) -> float:
        since = body.get("since", 0.0)
        if not isinstance(since, int | float) or isinstance(since, bool):
            raise RoostError("bad-request", "field 'since' must be a number", {"field": "since"})
        return float(since)

    @classmethod
    def _view(cls, body: dict[str, Any]) -> SessionView:
        return SessionView(
            title=f.text(body, "title", max_len=4096) if body.get("title") is not None else "",
            provider_session=f.opt_str(body, "provider_session", max_len=256),
            since=cls._since(body),
            ctx=cls._launched(body),
        )

    async def classify(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """The screen, the process evidence and (optional) what else the supervisor knows: the
        window title, the provider session, the launch time and context."""
        seen = self.adapter.classify_session(
            f.text(body, "screen"),
            exited=f.opt_bool(body, "exited"),
            evidence=self._evidence(body),
            view=self._view(body),
        )
        return seen.to_wire()

    async def turn(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """The command of one turn; without ``text``, a plan for any text: ``text_arg`` says
        which argument of ``argv`` the text takes (None: the plan holds only for one text)."""
        ctx, _ = self._configured(body)
        planned = body.get("text") is None
        text = TEXT_SLOT if planned else f.text(body, "text")
        session = f.opt_str(body, "provider_session", max_len=256)
        first, fork = f.opt_bool(body, "first"), f.opt_str(body, "fork", max_len=256)
        if fork and first:  # a stream fork's first turn copies the source's conversation
            launch = self.adapter.fork_turn(fork, session, text, ctx)
        else:
            launch = self.adapter.turn(session, text, ctx, first=first)
        if not planned:
            return launch.to_wire()
        return {**launch.to_wire(), "text_arg": text_arg(launch)}

    async def parse(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        stream = f.opt_str(body, "stream", max_len=16) or "stdout"
        events, facts = self.adapter.parse(f.text(body, "line", max_len=LINE_CAP), stream)
        return {"events": events, "facts": facts}

    async def identity(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        ident = self.adapter.discover_identity(
            f.text(body, "screen"), self._context(body), since=self._since(body)
        )
        return {"provider_session": ident}

    async def verify_resume(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        raw = body.get("samples") or []
        if not isinstance(raw, list) or len(raw) > 16:
            raise RoostError(
                "bad-request", "field 'samples' must be a list of evidence", {"field": "samples"}
            )
        samples = [e for e in (self._evidence({"e": s}, "e") for s in raw) if e is not None]
        fork = f.opt_str(body, "fork", max_len=256)
        if fork:  # a fork's check: its own id may not be known yet
            return verify_fork(
                self.adapter,
                f.text(body, "screen"),
                fork,
                f.opt_str(body, "provider_session", max_len=256),
                samples,
                self._launched(body),
            ).to_wire()
        check = self.adapter.verify_resume(
            f.text(body, "screen"),
            f.req_str(body, "provider_session", max_len=256),
            samples,
            self._launched(body),
        )
        return check.to_wire()

    async def usage(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """``{provider_session, mode, cwd, env, data_dir}`` -> ``{source, totals}``: the
        session's usage so far from the CLI's files (both None when it keeps none)."""
        found = self.adapter.usage(
            f.req_str(body, "provider_session", max_len=256), self._context(body)
        )
        source, totals = found if found is not None else (None, None)
        return {"source": source, "totals": totals}

    async def doctor(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """``roost doctor``'s findings on this provider's CLI, in this host's (the node's)
        environment."""
        return await doctor.in_child(self.adapter.provider)


def host_config() -> Config:
    """The configuration file as the node sees it; one that stopped parsing since ``node up``
    (which checked it) is logged and left out, so launches still work."""
    try:
        return load()
    except RoostError as err:
        log.error("config-invalid", message=err.message)
        return Config(*config_path())


async def serve(args: argparse.Namespace, stop: asyncio.Event) -> None:
    ctx = zmq.asyncio.Context()
    token = os.environ.get("ROOST_ACTOR_TOKEN", "")
    incarnation = os.urandom(6).hex()
    cfg = host_config()
    actors = []
    for name, adapter in adapters(cfg).items():
        peer = Peer(
            ctx,
            args.endpoint,
            f"adapter/{name}",
            token,
            incarnation=incarnation,
            meta={"pid": os.getpid()},
        )
        actors.append(AdapterActor(adapter, peer, cfg))
    watch_lifeline(args.lifeline, stop.set)
    try:  # one actor's link crashing ends the host; the daemon starts a new one
        await run_until(stop, *((a.peer.address, a.peer.run()) for a in actors))
    finally:
        ctx.destroy(0)


def main() -> None:
    args = child_args("roost-adapters")
    setup_logging(Path(args.state_dir) / "logs" / "adapters.log", "adapters")
    run_until_stopped(lambda stop: serve(args, stop))


if __name__ == "__main__":
    main()
