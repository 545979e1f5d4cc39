"""``roost web`` without a browser: its security checks over real HTTP against a real node, and
the terminal's bounded queue (a slow viewer resynchronises from the transcript by offset)."""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from roost.web import security as sec
from roost.web.backend import TERM_QUEUE_BYTES, Term
from roost.wire.errors import RoostError
from tests.e2e.conftest import Node, free_port, wait_for
from tests.e2e.netns import Hosts
from tests.e2e.test_hub import NODES, Lab, _spawn, lab

__all__ = ["lab"]  # the hub's lab fixture (tests/e2e/test_hub.py)

TOKEN = "t0ken-for-the-web-" + "x" * 20
ROOT = Path(__file__).resolve().parents[2]  # this checkout's roost, whatever the venv installed


class Web:
    """A ``roost web`` process for a node; its URL from the JSON line it prints."""

    def __init__(
        self,
        node: Node,
        *args: str,
        env: dict[str, str] | None = None,
        options: tuple[str, ...] = (),
    ) -> None:
        self.proc = subprocess.Popen(
            [*node.prefix, sys.executable, "-P", "-m", "roost", "--json", *options, "web", *args],
            env={**(env or node.env), "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the URL once it listens, or the error it ends with
        if not line:
            assert self.proc.stderr is not None
            said = self.proc.stderr.read()
            self.close()
            raise AssertionError(f"roost web printed nothing: {said}")
        self.doc: dict[str, Any] = json.loads(line)
        self.url = str(self.doc.get("url") or "")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(15)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def web_of(node: Node) -> Iterator[Any]:
    started: list[Web] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Web:
        web = Web(node, *args, env=env)
        started.append(web)
        return web

    try:
        yield start
    finally:
        for web in started:
            web.close()


def token_file(tmp_path: Path, mode: int = 0o600, text: str = TOKEN) -> Path:
    path = tmp_path / "web-token"
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


def http(
    url: str, data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(url, data=data, headers=headers or {})
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def test_listen_and_token_checks(tmp_path: Path) -> None:
    assert sec.parse_listen("8080") == sec.Listen("127.0.0.1", 8080)
    assert sec.parse_listen("[::1]:9000") == sec.Listen("::1", 9000)
    assert sec.parse_listen("0.0.0.0:1").loopback is False
    assert sec.parse_listen("localhost:1").loopback is True
    with pytest.raises(RoostError, match="not HOST:PORT"):
        sec.parse_listen("localhost:http")
    with pytest.raises(RoostError, match="--token-file"):
        sec.check_setup(sec.Listen("10.1.2.3", 80), "", False, False)
    with pytest.raises(RoostError, match="--tls-cert"):
        sec.check_setup(sec.Listen("10.1.2.3", 80), TOKEN, False, False)
    sec.check_setup(sec.Listen("10.1.2.3", 80), TOKEN, False, True)  # --insecure: said so
    sec.check_setup(sec.Listen("127.0.0.1", 80), "", False, False)
    with pytest.raises(RoostError, match="group or others") as err:
        sec.read_token(str(token_file(tmp_path, 0o640)))
    assert err.value.code == "bad-request"
    with pytest.raises(RoostError, match="at least 16"):
        sec.read_token(str(token_file(tmp_path, 0o600, "short")))
    assert sec.read_token(str(token_file(tmp_path))) == TOKEN
    assert sec.host_ok("127.0.0.1:8765", True) and sec.host_ok("[::1]:80", True)
    assert not sec.host_ok("evil.example:8765", True)
    assert sec.origin_ok("http://127.0.0.1:5", "127.0.0.1:5", "http")
    assert not sec.origin_ok("http://evil.example", "127.0.0.1:5", "http")


def test_refusals_before_listening(node: Node, tmp_path: Path, web_of: Any) -> None:
    """Off loopback: no token, a token file others may read, no TLS: each refused, saying why,
    before anything binds (no address outside loopback is ever bound by the test)."""
    node.up()
    web = web_of("--listen", "0.0.0.0:0")
    assert web.doc["error"]["code"] == "bad-request"
    assert "--token-file" in web.doc["error"]["message"]
    web = web_of("--listen", "0.0.0.0:0", "--token-file", str(token_file(tmp_path, 0o644)))
    assert web.doc["error"]["code"] == "bad-request"
    assert "chmod 600" in web.doc["error"]["message"]
    web = web_of("--listen", "0.0.0.0:0", "--token-file", str(token_file(tmp_path)))
    assert "--tls-cert" in web.doc["error"]["message"]
    assert "--insecure" in web.doc["error"]["message"]


def test_login_cookie_csrf_origin(node: Node, tmp_path: Path, web_of: Any, project: Path) -> None:
    """A loopback listener started with a token: a missing or wrong token is refused, the right
    one gives an HttpOnly SameSite=Strict cookie; a change needs the page's CSRF token; a
    websocket from another Origin is refused."""
    node.up()
    node.run("spawn", "echo", "--name", "w1", "--cwd", str(project))
    web = web_of("--listen", "127.0.0.1:0", "--token-file", str(token_file(tmp_path)))
    base = web.url.rstrip("/")
    status, _, body = http(base + "/")
    assert status == 200 and 'name="token"' in body  # the login form, not the page
    status, _, body = http(base + "/api/stop", b'{"id": "w1"}')
    assert status == 401 and "log in" in body
    status, _, body = http(base + "/login", b"token=wrong-token-123456789")
    assert status == 401 and "wrong token" in body
    status, headers, _ = http(base + "/login", f"token={TOKEN}".encode())
    assert status == 303
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    session = cookie.split(";")[0]
    status, _, page = http(base + "/", headers={"Cookie": session})
    assert status == 200 and "data-config" in page
    config = json.loads(page.split('data-config="')[1].split('"')[0].replace("&quot;", '"'))
    assert config["role"] == "operator" and config["csrf"]
    status, _, body = http(base + "/api/show", b'{"id": "w1"}', {"Cookie": session})
    assert status == 403 and "CSRF" in body
    headers = {"Cookie": session, sec.CSRF_HEADER: config["csrf"], "Origin": "http://evil.example"}
    status, _, body = http(base + "/api/show", b'{"id": "w1"}', headers)
    assert status == 403 and "another site" in body
    headers["Origin"] = base
    status, _, body = http(base + "/api/show", b'{"id": "w1"}', headers)
    assert status == 200 and json.loads(body)["record"]["name"] == "w1"
    status, _, body = http(
        base + "/api/show", b'{"id": "w1"}', {"Authorization": f"Bearer {TOKEN}"}
    )
    assert status == 200
    status, _, body = http(base + "/api/show", b'{"id": "w1"}', {"Authorization": "Bearer nope"})
    assert status == 401

    async def upgrade(origin: str) -> int:
        async with aiohttp.ClientSession() as client:
            try:
                headers = {"Cookie": session, "Origin": origin}
                async with client.ws_connect(
                    base.replace("http", "ws") + "/ws/list", headers=headers
                ) as ws:
                    got = await ws.receive_json(timeout=10)
                    assert got["t"] == "list"
                    return 101
            except aiohttp.WSServerHandshakeError as err:
                return err.status

    assert asyncio.run(upgrade("http://evil.example")) == 403
    assert asyncio.run(upgrade(base)) == 101


def test_loopback_without_token_answers_only_loopback_hosts(node: Node, web_of: Any) -> None:
    """No token on loopback: no login, but a page reached by another host name (a DNS trick
    pointing a site at 127.0.0.1) is refused."""
    node.up()
    web = web_of("--listen", "127.0.0.1:0")
    status, _, body = http(web.url)
    assert status == 200 and "data-config" in body
    status, _, body = http(web.url, headers={"Host": "evil.example"})
    assert status == 403 and "loopback host" in body


def test_other_commands_do_not_load_aiohttp(node: Node) -> None:
    code = (
        "import sys, roost.cli.main as m; m._load('ls'); m._load('attach');"
        "print('aiohttp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=node.env)
    assert out.stdout.strip() == "False", out.stderr


class FakeBackend:
    """The transcript of a session, as ``session.transcript`` and ``session.show`` read it."""

    def __init__(self, transcript: bytes) -> None:
        self.transcript = transcript
        self.calls: list[str] = []

    async def call(self, method: str, body: dict[str, Any], node: str = "") -> dict[str, Any]:
        self.calls.append(method)
        if method == "session.show":
            return {"screen": "", "cursor": {"row": 0, "col": 0}, "offset": 0}
        start = body["offset"]
        data = self.transcript[start : start + body["limit"]]
        return {"offset": start, "data": data, "end": len(self.transcript), "dropped": False}


def test_a_slow_viewer_resynchronises_from_the_transcript() -> None:
    """Output offered faster than a viewer sends never waits and never grows past the bound;
    the viewer that overflowed reads the transcript by offset: every byte once, in order."""

    async def scenario() -> bytes:
        chunk = bytes(range(256)) * 256  # 64 KiB
        transcript = chunk * 64  # 4 MiB, more than a viewer's queue holds
        backend = FakeBackend(transcript)
        shown = bytearray()
        release = asyncio.Event()

        async def send(message: Any) -> None:
            if isinstance(message, bytes):
                await release.wait()  # a browser on a slow link
                assert int.from_bytes(message[:8], "big") == len(shown)
                shown.extend(message[8:])

        term = Term(backend, ("", "r0000000001"), send)  # type: ignore[arg-type]
        runner = asyncio.create_task(term.run())
        await asyncio.sleep(0)
        for i in range(64):
            term.offer(i * len(chunk), chunk)
            assert term.size <= TERM_QUEUE_BYTES
        assert term.resync
        release.set()
        await asyncio.wait_for(_until(lambda: len(shown) == len(transcript)), 10)
        runner.cancel()
        assert "session.transcript" in backend.calls
        assert bytes(shown) == transcript
        return bytes(shown)

    asyncio.run(scenario())


async def _until(cond: Any) -> None:
    while not cond():
        await asyncio.sleep(0.01)


def test_observer_web_is_read_only(node: Node, web_of: Any, project: Path) -> None:
    """``--observer``: the server's connection has the node's observer role; the page says
    read-only and typing sent anyway is refused by the node (``forbidden``)."""
    node.up()
    node.run("spawn", "echo", "--name", "ob", "--cwd", str(project))
    rid = node.record("ob")["id"]
    web = web_of("--listen", "127.0.0.1:0", "--observer")
    status, _, page = http(web.url)
    assert status == 200 and "&quot;role&quot;: &quot;observer&quot;" in page

    async def type_in() -> dict[str, Any]:
        base = web.url.rstrip("/")
        async with (
            aiohttp.ClientSession() as client,
            client.ws_connect(
                base.replace("http", "ws") + f"/ws/term?id={rid}", headers={"Origin": base}
            ) as ws,
        ):
            await ws.send_json({"t": "hello", "rows": 30, "cols": 100})
            await ws.send_json({"t": "input", "data": "sneaky\r"})
            while True:
                got = await ws.receive(timeout=10)
                if got.type == aiohttp.WSMsgType.TEXT and json.loads(got.data)["t"] == "error":
                    return dict(json.loads(got.data))

    refused = asyncio.run(type_in())
    assert refused["code"] == "forbidden"
    assert "sneaky" not in node.screen("ob")
    wait_for(lambda: node.record("ob")["state"] == "live", 5, "the session to run on")


def test_a_login_with_the_observer_token_gets_a_read_only_page(
    node: Node, web_of: Any, project: Path, tmp_path: Path
) -> None:
    """--observer-token-file: one server, two tokens; who logs in with the observer's gets a
    read-only page whose typing and actions go on the node's observer role (refused
    ``forbidden`` by the node), while the operator's login drives the session."""
    node.up()
    node.run("spawn", "echo", "--name", "two", "--cwd", str(project), "--wait-ready")
    rid = node.record("two")["id"]
    watching = tmp_path / "observer-web-token"
    watching.write_text("observer-web-token-0123456789\n")
    watching.chmod(0o600)
    operator_file = token_file(tmp_path)
    for args, says in (
        (("--observer-token-file", str(watching)), "needs a --token-file"),
        (
            ("--token-file", str(operator_file), "--observer-token-file", str(operator_file)),
            "another token",
        ),
    ):
        refused = web_of("--listen", "127.0.0.1:0", *args)
        assert says in refused.doc["error"]["message"], refused.doc
    web = web_of(
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        str(operator_file),
        "--observer-token-file",
        str(watching),
    )
    base = web.url.rstrip("/")
    status, headers, _ = http(base + "/login", b"token=observer-web-token-0123456789")
    assert status == 303
    session = headers["Set-Cookie"].split(";")[0]
    status, _, page = http(base + "/", headers={"Cookie": session})
    assert status == 200 and "&quot;role&quot;: &quot;observer&quot;" in page
    watcher = {"Authorization": "Bearer observer-web-token-0123456789"}
    status, _, body = http(base + "/api/show", b'{"id": "two"}', watcher)
    assert status == 200 and json.loads(body)["record"]["id"] == rid  # it reads
    status, _, body = http(base + "/api/stop", b'{"id": "two"}', watcher)
    assert status == 403 and json.loads(body)["error"]["code"] == "forbidden"  # the node's no

    async def type_in(cookie: str) -> dict[str, Any]:
        async with (
            aiohttp.ClientSession() as client,
            client.ws_connect(
                base.replace("http", "ws") + f"/ws/term?id={rid}",
                headers={"Origin": base, "Cookie": cookie},
            ) as ws,
        ):
            await ws.send_json({"t": "hello", "rows": 30, "cols": 100})
            await ws.send_json({"t": "input", "data": "sneaky\r"})
            while True:
                got = await ws.receive(timeout=10)
                if got.type == aiohttp.WSMsgType.TEXT and json.loads(got.data)["t"] == "error":
                    return dict(json.loads(got.data))

    assert asyncio.run(type_in(session))["code"] == "forbidden"
    assert "sneaky" not in node.screen("two")
    status, _, page = http(base + "/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert "&quot;role&quot;: &quot;operator&quot;" in page
    status, _, body = http(
        base + "/api/stop", b'{"id": "two"}', {"Authorization": f"Bearer {TOKEN}"}
    )
    assert status == 200, body
    assert node.record("two")["state"] == "dormant"


def test_through_a_hub_every_nodes_records_and_terminals(lab: Lab, project: Path) -> None:
    """Through a hub: every node's records with their node; a spawn on another node appears
    from the hub's events; a terminal on a node behind the hub takes keys and shows output."""
    _spawn(lab, "lab-a", "on-a", project)
    web = Web(lab.hub, "--listen", "127.0.0.1:0", options=tuple(lab.remote()))
    try:
        base = web.url.rstrip("/")

        async def scenario() -> None:
            async with aiohttp.ClientSession() as client:
                ws_base = base.replace("http", "ws")
                async with client.ws_connect(ws_base + "/ws/list", headers={"Origin": base}) as ws:
                    first = await ws.receive_json(timeout=10)
                    assert first["t"] == "list"
                    assert {(e["node"], e["record"]["name"]) for e in first["entries"]} == {
                        ("lab-a", "on-a")
                    }
                    await asyncio.to_thread(_spawn, lab, "lab-b", "on-b", project)
                    while True:
                        got = await ws.receive_json(timeout=15)
                        entry = got.get("entry") or {}
                        if entry.get("node") == "lab-b" and entry["record"]["state"] == "live":
                            rid = entry["record"]["id"]
                            break
                url = ws_base + f"/ws/term?node=lab-b&id={rid}"
                async with client.ws_connect(url, headers={"Origin": base}) as term:
                    await term.send_json({"t": "hello", "rows": 30, "cols": 100})
                    shown = b""
                    while b"echo-ready>" not in shown:
                        got = await term.receive(timeout=15)
                        if got.type == aiohttp.WSMsgType.TEXT:
                            shown += json.loads(got.data).get("screen", "").encode()
                        else:
                            shown += got.data[8:]
                    await term.send_json({"t": "input", "data": "via the hub\r"})
                    while b"echo: via the hub" not in shown:
                        got = await term.receive(timeout=15)
                        if got.type == aiohttp.WSMsgType.BINARY:
                            shown += got.data[8:]

        asyncio.run(scenario())
        assert lab.run("show", "on-b", node="lab-b")["record"]["size"] == {"rows": 30, "cols": 100}
    finally:
        web.close()


def test_through_a_hub_a_node_that_links_later_is_followed_and_no_output_is_relayed(
    lab: Lab, project: Path
) -> None:
    """The page's list subscribes to each node's events, not to everything: no session's output
    is published on its node while no page shows its terminal; a node that links after the
    server started is followed, its spawn showing on the list from its events."""
    b = lab.nodes["lab-b"]
    b.run("node", "stop")
    lab.wait_linked({"lab-a"})
    _spawn(lab, "lab-a", "on-a", project)
    web = Web(lab.hub, "--listen", "127.0.0.1:0", options=tuple(lab.remote()))
    try:
        base = web.url.rstrip("/")
        a = lab.nodes["lab-a"]
        a.wait_screen("on-a", "echo-ready>")

        def unwatched(text: str) -> bool:
            before = a.run("node", "status")["broker"]["output"]
            lab.run("prompt", "on-a", text, node="lab-a")
            a.wait_screen("on-a", f"echo: {text}")
            return bool(a.run("node", "status")["broker"]["output"] == before)

        async def scenario() -> None:
            async with aiohttp.ClientSession() as client:
                ws_base = base.replace("http", "ws")
                async with client.ws_connect(ws_base + "/ws/list", headers={"Origin": base}) as ws:
                    first = await ws.receive_json(timeout=10)
                    assert {e["node"] for e in first["entries"]} == {"lab-a"}
                    await asyncio.to_thread(wait_for, lambda: unwatched("listed"), 20, "none")
                    await asyncio.to_thread(b.up)
                    await asyncio.to_thread(lab.wait_linked, set(NODES))
                    await asyncio.to_thread(_spawn, lab, "lab-b", "on-b", project)
                    while True:  # from lab-b's events (or its listing once followed)
                        got = await ws.receive_json(timeout=30)
                        entries = got.get("entries") or [got.get("entry") or {}]
                        if any(e.get("node") == "lab-b" for e in entries):
                            break

        asyncio.run(scenario())
    finally:
        web.close()


def test_actions(node: Node, web_of: Any, tmp_path: Path) -> None:
    """spawn (pty, stream, in a worktree), prompt, turn, stop, resume, diff and forget through
    the page's API, with its CSRF token; a refusal carries the node's code and reason."""
    node.up()
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    web = web_of("--listen", "127.0.0.1:0")
    base = web.url.rstrip("/")
    _, _, page = http(base + "/")
    csrf = json.loads(page.split('data-config="')[1].split('"')[0].replace("&quot;", '"'))["csrf"]

    def act(action: str, **body: Any) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode()
        headers = {sec.CSRF_HEADER: csrf, "Content-Type": "application/json"}
        status, _, text = http(f"{base}/api/{action}", data, headers)
        return status, json.loads(text)

    status, doc = act("spawn", provider="echo", cwd=str(repo), name="wt", worktree=True)
    assert status == 200 and doc["record"]["worktree"]["branch"] == "roost/wt"
    (Path(doc["record"]["cwd"]) / "b.txt").write_text("new\n")
    node.wait_screen("wt", "echo-ready>")
    assert act("prompt", id="wt", text="by the web")[0] == 200
    node.wait_screen("wt", "echo: by the web")
    status, diff = act("diff", id="wt")
    assert status == 200 and {"status": "?", "path": "b.txt"} in diff["files"]
    status, doc = act("forget", id="wt")
    assert status == 409 and doc["error"]["code"] == "session-record-busy"
    assert act("stop", id="wt")[0] == 200
    assert act("resume", id="wt")[0] == 200
    assert act("stop", id="wt")[0] == 200
    status, doc = act("forget", id="wt")
    assert status == 200 and doc["forgotten"] is True

    status, doc = act("spawn", provider="echo", cwd=str(tmp_path), name="st", mode="stream")
    assert status == 200 and doc["record"]["mode"] == "stream"
    status, doc = act("turn", id="st", text="hello turn")
    assert status == 200 and doc["turn"]
    assert act("nonsense", id="st")[1]["error"]["code"] == "bad-request"
    status, doc = act("spawn", provider="nope", cwd=str(tmp_path))
    assert status == 409 and doc["error"]["code"] == "unknown-provider"


PEER_REQUESTS = """
import json, sys, urllib.error, urllib.request
base, token = sys.argv[1], sys.argv[2]
def ask(path, data=None, headers=None):
    req = urllib.request.Request(base + path, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
out = {
    "page": ask("/"),
    "missing": ask("/api/show", b'{"id": "w1"}'),
    "wrong": ask("/api/show", b'{"id": "w1"}', {"Authorization": "Bearer not-the-token-1234"}),
    "login_wrong": ask("/login", b"token=not-the-token-1234"),
    "right": ask("/api/show", b'{"id": "w1"}', {"Authorization": "Bearer " + token}),
}
print(json.dumps(out))
"""


def test_off_loopback_a_missing_or_wrong_token_is_refused(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """``roost web`` on a network address of its own host (a network namespace the test made)
    reached from another host: no token and a wrong token are refused, the right one is let in;
    without a token file it does not listen there at all."""
    why = Hosts.why_not()
    if why:
        pytest.skip(why)
    node.up()
    node.run("spawn", "echo", "--name", "w1", "--cwd", str(project))
    hosts = Hosts()
    web = None
    try:
        hosts.add("web")
        hosts.add("peer")
        address = hosts.join("web", "peer")[0]  # the web host's address, as the peer reaches it
        on_web = copy.copy(node)
        on_web.prefix = hosts.prefix("web")
        listen = f"{address}:{free_port()}"
        refused = Web(on_web, "--listen", listen, "--insecure")
        assert (
            refused.doc["error"]["code"] == "bad-request"
            and "token" in (refused.doc["error"]["message"])
        )
        refused.close()
        web = Web(
            on_web, "--listen", listen, "--token-file", str(token_file(tmp_path)), "--insecure"
        )
        base = web.url.rstrip("/")
        assert address in base
        peer = subprocess.run(
            [*hosts.prefix("peer"), sys.executable, "-c", PEER_REQUESTS, base, TOKEN],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        got = json.loads(peer.stdout)
        assert got["page"][0] == 200 and 'name="token"' in got["page"][1]  # the login form
        assert got["missing"][0] == 401 and got["wrong"][0] == 401
        assert got["login_wrong"][0] == 401 and "wrong token" in got["login_wrong"][1]
        assert got["right"][0] == 200 and json.loads(got["right"][1])["record"]["name"] == "w1"
    finally:
        if web is not None:
            web.close()
        hosts.close()
