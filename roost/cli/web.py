"""``roost web``: the web dashboard, a web server that is one more client of the node (or hub);
``roost web keys``: the VAPID key pair its Web Push messages are sent with.

The server itself is ``roost.web`` (aiohttp), imported only when this command runs.
"""

from __future__ import annotations

import click

from roost.cli.context import Ctx, command, reader
from roost.cli.output import emit_json
from roost.client.client import Client
from roost.client.locate import OBSERVER_TOKEN_FILE, live_node_info
from roost.wire.errors import RoostError


@click.group(invoke_without_command=True)
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
@click.option(
    "--observer-token-file",
    default="",
    help="a second token file (mode 600): who logs in with it gets a read-only page",
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
    observer_token_file: str,
) -> None:
    """Serve the web dashboard: the live list, terminals, actions, notifications.

    Loopback by default. On any other address browsers log in with the token of --token-file
    (a file only you can read), over TLS (--tls-cert, --tls-key) unless --insecure; who logs in
    with the token of --observer-token-file gets a read-only page. Ctrl-C stops
    it; the sessions run on. `roost web keys` once enables Web Push (phone notifications)."""
    if click.get_current_context().invoked_subcommand is not None:
        return
    from roost.web import security as sec
    from roost.web.server import serve

    where = sec.parse_listen(listen)
    token = sec.read_token(token_file) if token_file else ""
    if bool(tls_cert) != bool(tls_key):
        raise RoostError("bad-request", "TLS needs both --tls-cert and --tls-key")
    sec.check_setup(where, token, bool(tls_cert), insecure)

    def as_observer() -> Client:
        info = live_node_info(ctx.state_dir)
        secret = (ctx.state_dir / OBSERVER_TOKEN_FILE).read_text().strip()
        client = Client(info.router, secret, events=info.events, timeout=ctx.timeout)
        client.initialize()
        return client

    def connect() -> Client:
        return as_observer() if observer and ctx.remote is None else ctx.client()

    watch = None
    if observer_token_file:
        watching = sec.read_token(observer_token_file)
        if not token or sec.token_matches(watching, token):
            raise RoostError(
                "bad-request",
                "--observer-token-file needs a --token-file of another token (without one every "
                "browser logs in as the operator)",
                {"field": "observer-token-file"},
            )
        if ctx.remote is not None:
            raise RoostError(
                "bad-request",
                "--observer-token-file watches through the local node's observer token; through "
                "--connect or --hub run a second roost web with an observer key (--key-file)",
                {"field": "observer-token-file"},
            )
        watch = (watching, as_observer)

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
    tls = (tls_cert, tls_key) if tls_cert else None
    serve(connect, ctx.state_dir, where, token, tls, insecure, say, watch)


@web.command("keys")
@click.option(
    "--new", "renew", is_flag=True, help="replace the key pair (browsers subscribe again)"
)
@click.option(
    "--subject",
    default="",
    help="the contact push services see (mailto: or https:), e.g. mailto:you@example.com",
)
@reader
def keys(ctx: Ctx, renew: bool, subject: str) -> None:
    """The VAPID key pair of Web Push: made if there is none (or with --new), kept 0600 in
    <state-dir>/web/vapid.json; prints its public key (the applicationServerKey)."""
    from roost.web import vapid

    if subject and not subject.startswith(("mailto:", "https:")):
        raise RoostError("bad-request", "--subject is a mailto: or https: URL")
    made = vapid.load_keys(ctx.state_dir)
    created = made is None or renew
    if made is None or renew:
        made = vapid.make_keys(ctx.state_dir, subject or vapid.DEFAULT_SUBJECT)
    elif subject and subject != made.subject:
        made = vapid.Vapid(made.private, subject, made.created)
        vapid.save_keys(ctx.state_dir, made)
    path = ctx.state_dir / "web" / vapid.KEYS_FILE
    if ctx.json:
        doc = {"public_key": made.public_key, "subject": made.subject, "path": str(path)}
        emit_json({**doc, "created": created})
        return
    click.echo(made.public_key)
    said = "made" if created else "kept (--new replaces it)"
    click.echo(f"VAPID key pair {said}: {path}; push to {made.subject}", err=True)
