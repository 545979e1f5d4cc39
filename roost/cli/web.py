"""``roost web``: the web dashboard, a web server that is one more client of the node (or hub).

The server itself is ``roost.web`` (aiohttp), imported only when this command runs.
"""

from __future__ import annotations

import click

from roost.cli.context import Ctx, command
from roost.cli.output import emit_json
from roost.client.client import Client
from roost.client.locate import OBSERVER_TOKEN_FILE, live_node_info
from roost.wire.errors import RoostError


@click.command()
@click.option(
    "--listen",
    default="127.0.0.1:8765",
    show_default=True,
    help="HOST:PORT to serve on; beyond loopback it needs --token-file and TLS (or --insecure)",
)
@click.option(
    "--token-file",
    default="",
    help="a file (mode 600) holding the token browsers log in with; needed beyond loopback",
)
@click.option("--tls-cert", default="", help="the server's TLS certificate (PEM)")
@click.option("--tls-key", default="", help="the TLS certificate's private key (PEM)")
@click.option("--insecure", is_flag=True, help="serve plain HTTP beyond loopback (not advised)")
@click.option(
    "--observer",
    is_flag=True,
    help="connect with the node's observer token: a read-only page",
)
@command(op=False, grant=False)
def web(
    ctx: Ctx,
    listen: str,
    token_file: str,
    tls_cert: str,
    tls_key: str,
    insecure: bool,
    observer: bool,
) -> None:
    """Serve the web dashboard: the live list, terminals, actions, notifications.

    Loopback by default. On any other address browsers log in with the token of --token-file
    (a file only you can read), over TLS (--tls-cert, --tls-key) unless --insecure. Ctrl-C stops
    it; the sessions run on."""
    from roost.web import security as sec
    from roost.web.server import serve

    where = sec.parse_listen(listen)
    token = sec.read_token(token_file) if token_file else ""
    if bool(tls_cert) != bool(tls_key):
        raise RoostError("bad-request", "TLS needs both --tls-cert and --tls-key")
    sec.check_setup(where, token, bool(tls_cert), insecure)

    def connect() -> Client:
        if observer and ctx.remote is None:
            info = live_node_info(ctx.state_dir)
            secret = (ctx.state_dir / OBSERVER_TOKEN_FILE).read_text().strip()
            client = Client(info.router, secret, events=info.events, timeout=ctx.timeout)
            client.initialize()
            return client
        return ctx.client()

    def say(url: str) -> None:
        if ctx.json:
            emit_json({"url": url, "listening": True})
        else:
            click.echo(f"roost web: serving {url} (Ctrl-C stops it)", err=False)

    if observer and ctx.remote is not None:
        raise RoostError(
            "bad-request",
            "--observer reads the local node's observer token; through --connect or --hub "
            "give an observer token (ROOST_TOKEN) or an observer key (--key-file) instead",
        )
    serve(connect, where, token, (tls_cert, tls_key) if tls_cert else None, insecure, say)
