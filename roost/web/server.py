"""Running ``roost web``: the checks, the listener (TLS when asked), until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import ssl
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from roost.client.client import Client
from roost.web import security as sec
from roost.web.app import make_app
from roost.web.backend import Backend
from roost.web.push import Pusher


def serve(
    connect: Callable[[], Client],
    state_dir: Path,
    listen: sec.Listen,
    token: str,
    tls: tuple[str, str] | None,
    insecure: bool,
    say: Callable[[str], None],
    watch: tuple[str, Callable[[], Client]] | None = None,
) -> None:
    """``watch``: the observer token of the web (--observer-token-file) and the connection of
    the pages logged in with it (the node's observer role)."""
    sec.check_setup(listen, token, tls is not None, insecure)
    context = None
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*tls)
    asyncio.run(_serve(connect, state_dir, listen, token, context, say, watch))


async def _serve(
    connect: Callable[[], Client],
    state_dir: Path,
    listen: sec.Listen,
    token: str,
    context: ssl.SSLContext | None,
    say: Callable[[str], None],
    watch: tuple[str, Callable[[], Client]] | None,
) -> None:
    backend = Backend(connect, observer=watch[1] if watch else None)
    await backend.start()
    pusher = Pusher(state_dir)
    gate = sec.Gate(token, listen.loopback, observer_token=watch[0] if watch else "")
    app = make_app(backend, gate, context is not None, pusher)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=3.0)
    await runner.setup()
    site = web.TCPSite(runner, listen.host, listen.port, ssl_context=context)
    try:
        await site.start()
        port = runner.addresses[0][1]
        host = f"[{listen.host}]" if ":" in listen.host else listen.host
        scheme = "https" if context else "http"
        say(f"{scheme}://{host}:{port}/")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()
        await pusher.close()
        await backend.close()
