"""The aiohttp application of ``roost web``: the page, its websockets and its actions.

Routes: ``/`` (the page, or the login form), ``/login`` and ``/logout``, ``/static/...``,
``/sw.js`` (the service worker) and ``/manifest.webmanifest`` (the page as an installable app),
``/ws/list`` (the live list and notifications), ``/ws/term`` (one session's terminal),
``/api/push...`` (Web Push subscriptions) and ``/api/...`` (the actions). Every refusal
answers ``{"error": {"code", "message"}}`` (a page: its text), saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from roost.web import security as sec
from roost.web.backend import Backend, Feed, Term, dumps
from roost.web.push import Pusher
from roost.web.vapid import checked
from roost.wire.errors import RoostError

STATIC = Path(__file__).parent / "static"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
GATE = web.AppKey("gate", sec.Gate)
BACKEND = web.AppKey("backend", Backend)
TLS = web.AppKey("tls", bool)
PUSHER = web.AppKey("pusher", Pusher)


class Sockets(set[web.WebSocketResponse]):
    """The open websockets, closed when the server stops."""


SOCKETS = web.AppKey("sockets", Sockets)
ROLE = "roost-role"  # a request's: "observer" for a page logged in with the observer token
# reachable without logging in: a browser fetches the manifest without its cookie
OPEN = ("/login", "/static/", "/sw.js", "/manifest.webmanifest")
KEY_NAMES = [
    "enter",
    "escape",
    "interrupt",
    "eof",
    "tab",
    "shift-tab",
    "backspace",
    "delete",
    "space",
    "up",
    "down",
    "left",
    "right",
    "home",
    "end",
    "pageup",
    "pagedown",
]


def refusal(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


def cookie_of(request: web.Request) -> str:
    return request.cookies.get(sec.COOKIE, "")


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Host, login, Origin and CSRF checks, before any handler runs."""
    gate = request.app[GATE]
    if not sec.host_ok(request.host, gate.loopback and not gate.needs_login):
        return refusal(
            403, "forbidden", "this server answers only to a loopback host name without a token"
        )
    path = request.path
    if path.startswith(OPEN):
        return await handler(request)
    authorization = request.headers.get("Authorization", "")
    admitted, bearer = gate.admits(cookie_of(request), authorization)
    request[ROLE] = gate.role_of(cookie_of(request), authorization) if admitted else ""
    if not admitted:
        if path == "/" and request.method == "GET":
            return login_page("")
        return refusal(401, "unauthorized", "log in first (the server's token)")
    scheme = "https" if request.app[TLS] else "http"
    origin = request.headers.get("Origin")
    upgrade = request.headers.get("Upgrade", "").lower() == "websocket"
    if origin is not None and not sec.origin_ok(origin, request.host, scheme):
        return refusal(403, "forbidden", f"a request from another site ({origin}) is refused")
    if upgrade and origin is None and not bearer:
        return refusal(403, "forbidden", "a websocket from a browser must carry its Origin")
    if request.method == "POST" and not bearer:
        csrf = gate.csrf_for(cookie_of(request))
        if not sec.token_matches(request.headers.get(sec.CSRF_HEADER, ""), csrf):
            return refusal(403, "forbidden", "the request lacks this page's CSRF token")
    return await handler(request)


def watcher(request: web.Request) -> bool:
    """Whether the request is an observer's page (its login, or the server's own role)."""
    return request.get(ROLE) == "observer" or request.app[BACKEND].role == "observer"


def login_page(note: str, status: int = 200) -> web.Response:
    said = f'<p class="error">{html.escape(note)}</p>' if note else ""
    text = (STATIC / "login.html").read_text().replace("{{NOTE}}", said)
    return web.Response(text=text, content_type="text/html", status=status, headers=NO_STORE)


NO_STORE = {"Cache-Control": "no-store"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


async def index(request: web.Request) -> web.Response:
    gate, backend = request.app[GATE], request.app[BACKEND]
    text = (STATIC / "index.html").read_text()
    config = {
        "csrf": gate.csrf_for(cookie_of(request)),
        "role": "observer" if watcher(request) else backend.role,
        "hub": backend.hub,
        "login": gate.needs_login,
        "keys": KEY_NAMES,
        "push": request.app[PUSHER].public_key(),  # "" until `roost web keys`
    }
    text = text.replace("{{CONFIG}}", html.escape(json.dumps(config), quote=True))
    return web.Response(text=text, content_type="text/html", headers=NO_STORE)


async def login(request: web.Request) -> web.Response:
    gate = request.app[GATE]
    scheme = "https" if request.app[TLS] else "http"
    origin = request.headers.get("Origin")
    if origin is not None and not sec.origin_ok(origin, request.host, scheme):
        return login_page(f"a login from another site ({origin}) is refused", 403)
    if not gate.needs_login:
        raise web.HTTPSeeOther("/")
    form = await request.post()
    sid = gate.login(str(form.get("token") or ""))
    if sid is None:
        await asyncio.sleep(0.5)  # a wrong token costs the guesser time
        return login_page("wrong token: it is the one in the server's --token-file", 401)
    response = web.HTTPSeeOther("/")
    response.set_cookie(
        sec.COOKIE,
        sid,
        httponly=True,
        samesite="Strict",
        secure=request.app[TLS],
        path="/",
        max_age=int(sec.SESSION_TTL_S),
    )
    raise response


async def logout(request: web.Request) -> web.Response:
    request.app[GATE].logout(cookie_of(request))
    response = web.HTTPSeeOther("/")
    response.del_cookie(sec.COOKIE, path="/")
    raise response


async def list_socket(request: web.Request) -> web.WebSocketResponse:
    backend = request.app[BACKEND]
    ws = web.WebSocketResponse(heartbeat=20.0)
    await ws.prepare(request)
    request.app[SOCKETS].add(ws)
    feed = Feed()
    backend.feeds.add(feed)
    feed.offer(backend.snapshot())

    async def pump() -> None:
        while True:
            await feed.wake.wait()
            feed.wake.clear()
            if feed.overflowed:
                feed.overflowed = False
                feed.items.clear()
                await ws.send_str(dumps(backend.snapshot()))
            while feed.items:
                await ws.send_str(dumps(feed.items.popleft()))

    task = asyncio.create_task(pump())
    try:
        async for _ in ws:  # the page sends nothing; this waits for it to go
            pass
    finally:
        request.app[SOCKETS].discard(ws)
        backend.feeds.discard(feed)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await task
    return ws


async def term_socket(request: web.Request) -> web.WebSocketResponse:
    """One session's terminal: the browser's first message is ``{"t": "hello", rows, cols,
    offset?}`` (``offset``: where a dropped view stopped); then ``input``, ``key`` and
    ``resize``. The server sends the screen (JSON), output as binary frames (8 bytes of
    big-endian transcript offset, then the bytes), ``error`` and ``ended``."""
    backend = request.app[BACKEND]
    node, rid = request.query.get("node", ""), request.query.get("id", "")
    ws = web.WebSocketResponse(heartbeat=20.0, max_msg_size=1 << 20)
    await ws.prepare(request)
    request.app[SOCKETS].add(ws)

    async def send(message: Any) -> None:
        if isinstance(message, bytes):
            await ws.send_bytes(message)
        else:
            await ws.send_str(dumps(message))

    first = await ws.receive(timeout=30)
    if first.type != WSMsgType.TEXT:
        await ws.close()
        return ws
    hello = json.loads(first.data)
    term = Term(backend, (node, rid), send)
    backend.watch(term)  # subscribed before the screen is read: nothing falls between
    inputs: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    observer = watcher(request)  # its typing and sizes go on the observer's connection
    writer = asyncio.create_task(_typist(backend, term, inputs, observer))
    runner: asyncio.Task[None] | None = None
    try:
        if not observer and hello.get("rows") and hello.get("cols"):
            await _resize(backend, term, hello)
        if isinstance(hello.get("offset"), int) and hello["offset"] >= 0:
            term.expected = hello["offset"]
        runner = asyncio.create_task(_run(term))
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            doc = json.loads(msg.data)
            if doc.get("t") == "resize":
                await _resize(backend, term, doc, observer)
            elif doc.get("t") in ("input", "key"):
                inputs.put_nowait(doc)
    finally:
        request.app[SOCKETS].discard(ws)
        backend.unwatch(term)
        for task in (writer, runner):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                    await task
    return ws


async def _run(term: Term) -> None:
    try:
        await term.run()
    except RoostError as err:
        await term.send({"t": "error", "code": err.code, "message": err.message, "fatal": True})
    except ConnectionError:
        return


async def _resize(
    backend: Backend, term: Term, doc: dict[str, Any], observer: bool = False
) -> None:
    """The session takes the size of the window that asked last, as with ``roost attach``;
    a refusal is said on the page and the view goes on at the session's size."""
    body = {"id": term.key[1], "rows": int(doc["rows"]), "cols": int(doc["cols"])}
    try:
        await backend.call("session.resize", body, term.key[0], observer=observer)
    except RoostError as err:
        await term.send({"t": "error", "code": err.code, "message": f"not resized: {err.message}"})


async def _typist(
    backend: Backend, term: Term, inputs: asyncio.Queue[dict[str, Any]], observer: bool
) -> None:
    """Keys in order; text typed while a request is out goes in one ``session.input``."""
    while True:
        batch = [await inputs.get()]
        while not inputs.empty():
            batch.append(inputs.get_nowait())
        for method, body in _merged(term.key[1], batch):
            try:
                await backend.call(method, body, term.key[0], observer=observer)
            except RoostError as err:
                with contextlib.suppress(ConnectionError):
                    message = f"input refused: {err.code}: {err.message}"
                    await term.send({"t": "error", "code": err.code, "message": message})


def _merged(rid: str, batch: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for doc in batch:
        if doc["t"] == "key":
            calls.append(
                ("session.key", {"id": rid, "keys": [str(k) for k in doc.get("keys") or []]})
            )
        elif calls and calls[-1][0] == "session.input":
            calls[-1][1]["text"] += str(doc.get("data") or "")
        else:
            calls.append(("session.input", {"id": rid, "text": str(doc.get("data") or "")}))
    return calls


# -- actions --------------------------------------------------------------------------------

SPAWN_FIELDS = ("provider", "cwd", "name", "mode", "restore", "on_limit", "worktree")


async def action(request: web.Request) -> web.Response:
    """``POST /api/<action>`` with a JSON body naming ``node`` and ``id`` (and the action's own
    fields): the node's answer, or its error with the status that fits it."""
    backend = request.app[BACKEND]
    name = request.match_info["action"]
    try:
        doc = await request.json()
    except ValueError:
        return refusal(400, "bad-request", "the body is not JSON")
    if not isinstance(doc, dict):
        return refusal(400, "bad-request", "the body is not a JSON object")
    node, rid = str(doc.get("node") or ""), str(doc.get("id") or "")
    try:
        method, body = _request(name, rid, doc)
        if method == "session.spawn":
            node = str(doc.get("node") or "")
            if backend.hub and not node:
                raise RoostError("bad-request", "through a hub, name the node to spawn on")
        answer = await backend.call(method, body, node, timeout=60.0, observer=watcher(request))
    except RoostError as err:
        status = {"forbidden": 403, "not-found": 404, "unauthorized": 401}.get(err.code, 409)
        if err.code == "bad-request":
            status = 400
        return web.json_response(
            {"error": {"code": err.code, "message": err.message, "detail": err.detail}},
            status=status,
            dumps=dumps,
        )
    return web.json_response(answer, dumps=dumps)


def _request(name: str, rid: str, doc: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if name == "spawn":
        body: dict[str, Any] = {k: doc[k] for k in SPAWN_FIELDS if doc.get(k) not in (None, "")}
        env = doc.get("env") or {}
        if isinstance(env, dict) and env:
            body["env"] = {str(k): str(v) for k, v in env.items()}
        for size in ("rows", "cols"):
            if doc.get(size):
                body[size] = int(doc[size])
        if not body.get("provider") or not body.get("cwd"):
            raise RoostError("bad-request", "spawn needs a provider and a cwd")
        return "session.spawn", body
    if not rid:
        raise RoostError("bad-request", "name the session (id)")
    simple = {
        "stop": "session.stop",
        "resume": "session.resume",
        "diff": "session.diff",
        "show": "session.show",
    }
    if name in simple:
        return simple[name], {"id": rid}
    if name in ("prompt", "turn"):
        return f"session.{name}", {"id": rid, "text": str(doc.get("text") or "")}
    if name == "forget":
        return "session.forget", {"id": rid, "remove_worktree": bool(doc.get("remove_worktree"))}
    raise RoostError("bad-request", f"no action {name!r}")


# -- the installable app and Web Push --------------------------------------------------------


async def service_worker(_request: web.Request) -> web.Response:
    """At the root, so that its scope is the whole page (``Service-Worker-Allowed`` says so too)."""
    headers = {"Service-Worker-Allowed": "/", "Cache-Control": "no-cache"}
    text = (STATIC / "sw.js").read_text()
    return web.Response(text=text, content_type="text/javascript", headers=headers)


async def manifest(_request: web.Request) -> web.Response:
    text = (STATIC / "manifest.webmanifest").read_text()
    return web.Response(text=text, content_type="application/manifest+json")


async def push_state(request: web.Request) -> web.Response:
    pusher = request.app[PUSHER]
    return web.json_response(
        {"key": pusher.public_key(), "subscriptions": len(pusher.subscriptions.all())}
    )


async def push_subscribe(request: web.Request) -> web.Response:
    """``POST /api/push/subscribe`` with a ``PushSubscription.toJSON()``; ``/unsubscribe`` with
    its ``endpoint``."""
    pusher = request.app[PUSHER]
    try:
        doc = await request.json()
    except ValueError:
        return refusal(400, "bad-request", "the body is not JSON")
    if request.match_info["verb"] == "unsubscribe":
        endpoint = str(doc.get("endpoint") or "") if isinstance(doc, dict) else ""
        return web.json_response({"removed": pusher.subscriptions.remove(endpoint)})
    if not pusher.public_key():
        return refusal(409, "no-vapid-keys", "this server has no VAPID keys: `roost web keys`")
    try:
        sub = checked(doc)
    except RoostError as err:
        return refusal(400, err.code, err.message)
    return web.json_response({"subscriptions": pusher.subscriptions.add(sub)})


def make_app(backend: Backend, gate: sec.Gate, tls: bool, pusher: Pusher) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=1 << 20)
    app[GATE], app[BACKEND], app[TLS], app[PUSHER] = gate, backend, tls, pusher
    backend.listeners.append(pusher.notice)
    sockets = app[SOCKETS] = Sockets()

    async def goodbye(_app: web.Application) -> None:  # the browsers reconnect to the next one
        for ws in [*sockets]:
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"roost web stops")

    app.on_shutdown.append(goodbye)
    app.router.add_get("/", index)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
    app.router.add_get("/ws/list", list_socket)
    app.router.add_get("/ws/term", term_socket)
    app.router.add_get("/sw.js", service_worker)
    app.router.add_get("/manifest.webmanifest", manifest)
    app.router.add_get("/api/push", push_state)
    app.router.add_post("/api/push/{verb:subscribe|unsubscribe}", push_subscribe)
    app.router.add_post("/api/{action}", action)
    app.router.add_static("/static/", STATIC, follow_symlinks=False)

    async def headers(_request: web.Request, response: web.StreamResponse) -> None:
        response.headers.update(SECURITY_HEADERS)

    app.on_response_prepare.append(headers)
    return app
