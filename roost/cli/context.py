"""Shared CLI plumbing: global options, finding the node, turning errors into exit codes."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from roost.broker.client import Client, Curve
from roost.broker.errors import RoostError
from roost.broker.locate import default_state_dir
from roost.broker.policy import node_address
from roost.cli.output import fail

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Remote:
    """A node reached over the network: its endpoint, and CURVE keys unless it is loopback."""

    endpoint: str
    server_key: str | None
    key_file: str | None

    def client(self, timeout: float) -> Client:
        curve = None
        if self.server_key or self.key_file:
            if not (self.server_key and self.key_file):
                raise RoostError("bad-request", "CURVE needs both --server-key and --key-file")
            try:
                pair = json.loads(Path(self.key_file).read_text())
                curve = Curve(self.server_key, pair["public"], pair["secret"])
            except (OSError, ValueError, KeyError, TypeError):
                raise RoostError("bad-request", "the key file cannot be read") from None
        token = os.environ.get("ROOST_TOKEN", "")
        client = Client(self.endpoint, token, timeout=timeout, curve=curve)
        client.initialize()
        return client


@dataclass
class Ctx:
    state_dir: Path
    json: bool
    timeout: float
    op: str = ""
    grant: str = ""
    remote: Remote | None = None
    node: str = ""  # through a hub: the node addressed (--node)

    def client(self) -> Client:
        if self.remote is not None:
            client = self.remote.client(self.timeout)
        else:
            client = Client.for_state_dir(self.state_dir, timeout=self.timeout)
        if self.node:
            if client.target != "hub":
                client.close()
                raise RoostError(
                    "bad-request",
                    "--node names a node behind a hub; this is a node",
                    {"field": "node"},
                )
            client.via(node_address(self.node))
        return client

    def call(self, method: str, body: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        """One request, carrying the command's operation id and claim grant, if any."""
        kw.setdefault("op", self.op)
        kw.setdefault("grant", self.grant)
        with self.client() as client:
            return client.call(method, body, **kw)


def command(fn: F) -> F:
    """Adds ``--json`` to a command and turns RoostError into an error document and exit 1."""

    @functools.wraps(fn)
    def wrapper(
        *args: Any, as_json: bool = False, op: str = "", grant: str = "", **kwargs: Any
    ) -> Any:
        ctx: Ctx = click.get_current_context().obj
        ctx.json = ctx.json or as_json
        ctx.op = op or ctx.op
        ctx.grant = grant or ctx.grant
        try:
            return fn(ctx, *args, **kwargs)
        except RoostError as err:
            fail(err, ctx.json)

    options = [
        click.option("--json", "as_json", is_flag=True, help="print one JSON document"),
        click.option("--op", default="", help="operation id: a repeat returns the first outcome"),
        click.option(
            "--grant",
            default="",
            envvar="ROOST_GRANT",
            help="the claim grant to act under (env ROOST_GRANT)",
        ),
    ]
    for option in options:
        wrapper = option(wrapper)
    return cast(F, wrapper)


def make_ctx(state_dir: str | None, as_json: bool, timeout: float) -> Ctx:
    path = Path(state_dir).expanduser().resolve() if state_dir else default_state_dir()
    return Ctx(path, as_json, timeout)


def cwd() -> str:
    return os.getcwd()
