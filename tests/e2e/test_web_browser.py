"""``roost web`` in a real browser: Playwright driving the system's chromium (``apt install
chromium``; Playwright never downloads one here). Skipped, saying why, without either."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roost.client.client import Client
from tests.e2e.conftest import FAKES, Node, wait_for
from tests.e2e.test_web import Web, web_of

__all__ = ["web_of"]  # the fixture, shared with test_web.py

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
try:
    from playwright.sync_api import Page, sync_playwright
except ImportError:  # pragma: no cover - the dev extra installs it
    sync_playwright = None  # type: ignore[assignment]

pytestmark = pytest.mark.skipif(
    sync_playwright is None or not Path(CHROMIUM).exists(),
    reason="needs playwright (pip) and chromium (apt install chromium; .ci/run installs it)",
)


@pytest.fixture
def browser() -> Iterator[Any]:
    with sync_playwright() as play:
        chromium = play.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


def open_page(browser: Any, url: str, width: int = 1280, height: int = 800) -> Page:
    # bypass_csp: Playwright's own waits evaluate strings, which the page's CSP forbids
    context = browser.new_context(viewport={"width": width, "height": height}, bypass_csp=True)
    page: Page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#list tbody tr, #empty")
    return page


def row_names(page: Page) -> list[str]:
    return [
        str(n)
        for n in page.eval_on_selector_all("#list tbody td.name", "e => e.map(x => x.textContent)")
    ]


def open_terminal(page: Page, name: str) -> None:
    page.click(f"#list tbody tr:has(td.name:text-is('{name}'))")
    page.wait_for_function("window.roostDebug.screenText().includes('echo-ready>')", timeout=15000)


def test_list_terminal_resize_and_drop(
    node: Node, project: Path, browser: Any, web_of: Any, tmp_path: Path
) -> None:
    """The list follows a spawn made by the CLI without a reload; typing reaches the echo agent
    and its answer shows; the session takes the window's size; after a dropped connection the
    terminal has every byte once; screenshots at 1280x800 and 390x844."""
    node.up()
    node.run("spawn", "echo", "--name", "first", "--cwd", str(project))
    web: Web = web_of("--listen", "127.0.0.1:0")
    page = open_page(browser, web.url)
    wait_for(lambda: "first" in row_names(page), 10, "the first record listed")
    loads = page.evaluate("performance.getEntriesByType('navigation').length")

    node.run("spawn", "echo", "--name", "second", "--cwd", str(project))
    page.wait_for_selector("#list tbody td.name:text-is('second')", timeout=15000)
    page.fill("#filter", "second")
    wait_for(lambda: row_names(page) == ["second"], 5, "the filter to keep only 'second'")
    page.fill("#filter", "")

    open_terminal(page, "first")
    page.click("#terminal")
    page.keyboard.type("hello from the web\r")
    page.wait_for_function(
        "window.roostDebug.screenText().includes('echo: hello from the web')", timeout=15000
    )

    # the session follows the window (as attach does): a smaller window, a smaller terminal
    before = node.record("first")["size"]
    page.set_viewport_size({"width": 900, "height": 700})
    cols = wait_for(  # the page fits its terminal to the window on the resize event, not at once
        lambda: s if (s := page.evaluate("window.roostDebug.size()")) != before else None,
        10,
        "the terminal to fit the smaller window",
    )
    resized = wait_for(
        lambda: r if (r := node.record("first")["size"]) != before else None, 10, "a resize"
    )
    assert resized == {"rows": cols["rows"], "cols": cols["cols"]}

    # a dropped connection: output made meanwhile arrives once, from the transcript by offset
    page.evaluate("window.roostDebug.dropTerminal()")
    node.run("prompt", "first", "while away")
    page.wait_for_function(
        "window.roostDebug.screenText().includes('echo: while away')", timeout=15000
    )
    page.keyboard.type("after\r")
    page.wait_for_function("window.roostDebug.screenText().includes('echo: after')", timeout=15000)
    stream = page.evaluate("window.roostDebug.stream")
    assert stream["screens"] == 1  # drawn once; the reconnection read the transcript instead
    with Client.for_state_dir(node.state_dir) as client:
        rid = node.record("first")["id"]
        start, got = stream["start"], stream["bytes"].encode("latin-1")
        doc = client.call("session.transcript", {"id": rid, "offset": start, "limit": len(got)})
    assert doc["data"] == got  # every byte once, in order, from the screen's offset on
    assert got.count(b"echo: while away") == 1
    assert page.evaluate("performance.getEntriesByType('navigation').length") == loads

    page.screenshot(path=str(tmp_path / "web-1280x800.png"))
    small = open_page(browser, web.url, 390, 844)
    small.screenshot(path=str(tmp_path / "web-390x844.png"))
    assert (tmp_path / "web-1280x800.png").stat().st_size > 0
    assert (tmp_path / "web-390x844.png").stat().st_size > 0


def test_observer_page_cannot_type(node: Node, project: Path, browser: Any, web_of: Any) -> None:
    node.up()
    node.run("spawn", "echo", "--name", "watched", "--cwd", str(project))
    web: Web = web_of("--listen", "127.0.0.1:0", "--observer")
    page = open_page(browser, web.url)
    assert page.is_visible("#readonly")
    assert "forbidden" in page.inner_text("#readonly")
    open_terminal(page, "watched")
    page.click("#terminal")
    page.keyboard.type("nope\r")
    page.wait_for_function(
        "document.querySelector('#term-note').textContent.includes('forbidden')", timeout=15000
    )
    assert "nope" not in node.screen("watched")


def test_notification_when_a_turn_ends(
    node: Node, project: Path, browser: Any, web_of: Any
) -> None:
    """A session that ends a turn is announced on the page (and by the browser's Notification
    API when the user allowed it)."""
    node.up()
    node.run("spawn", "echo", "--name", "noisy", "--cwd", str(project), "--wait-ready")
    web: Web = web_of("--listen", "127.0.0.1:0")
    page = open_page(browser, web.url)
    page.wait_for_selector("#list tbody td.name:text-is('noisy')")
    node.run("prompt", "noisy", "ping")
    page.wait_for_function(
        "window.roostDebug.notices.some(n => n.name === 'noisy' && n.kind === 'turn')",
        timeout=20000,
    )


def test_service_worker_shows_a_pushed_notification(
    node: Node, browser: Any, web_of: Any, tmp_path: Path
) -> None:
    """The page registers its service worker (scope: the whole page) and links its manifest; a
    push message delivered to the worker through the DevTools protocol (as a push service would,
    nothing leaves the machine) is shown as a notification."""
    node.up()
    web: Web = web_of("--listen", "127.0.0.1:0")
    origin = web.url.rstrip("/")
    context = browser.new_context(bypass_csp=True)
    context.grant_permissions(["notifications"], origin=origin)
    page: Page = context.new_page()
    cdp = page.context.new_cdp_session(page)
    registrations: dict[str, str] = {}

    def updated(event: dict[str, Any]) -> None:
        for reg in event.get("registrations") or []:
            if not reg.get("isDeleted"):
                registrations[reg["scopeURL"]] = reg["registrationId"]

    cdp.on("ServiceWorker.workerRegistrationUpdated", updated)
    cdp.send("ServiceWorker.enable")
    page.goto(web.url)
    scope = page.evaluate("navigator.serviceWorker.ready.then(r => r.scope)")
    assert scope == origin + "/"
    assert page.evaluate("document.querySelector('link[rel=manifest]').href") == (
        origin + "/manifest.webmanifest"
    )
    manifest = page.evaluate("fetch('/manifest.webmanifest').then(r => r.json())")
    assert manifest["start_url"] == "/" and manifest["display"] == "standalone"
    rid = wait_for(lambda: registrations.get(origin + "/"), 10, "the worker's registration id")

    message = {"title": "roost: pushed", "body": "ended a turn", "tag": "r1:turn", "url": "/"}
    shown = (
        "navigator.serviceWorker.ready.then(r => r.getNotifications())"
        ".then(ns => ns.map(n => [n.title, n.body, n.tag]))"
    )
    got: list[Any] = []
    deadline = time.monotonic() + 45
    while not got and time.monotonic() < deadline:
        # as a push service would, again if the first delivery found the worker still starting
        # on a loaded machine (one tag: a second delivery replaces the first notification)
        cdp.send(
            "ServiceWorker.deliverPushMessage",
            {"origin": origin, "registrationId": rid, "data": json.dumps(message)},
        )
        given = time.monotonic() + 15
        while not got and time.monotonic() < given:
            got = page.evaluate(shown)
            page.wait_for_timeout(50)  # polling the worker's notifications, with a deadline
    assert got == [["roost: pushed", "ended a turn", "r1:turn"]], "no notification in 45 s"
    context.close()


def test_a_session_that_needs_attention_raises_a_notification(
    node: Node, project: Path, browser: Any, web_of: Any, tmp_path: Path
) -> None:
    """A session that newly needs a human (here the stand-in codex at its login screen) is
    announced by the browser's Notification API, once the user has allowed notifications."""
    node.up()
    web: Web = web_of("--listen", "127.0.0.1:0")
    context = browser.new_context(bypass_csp=True)
    context.grant_permissions(["notifications"], origin=web.url.rstrip("/"))
    page: Page = context.new_page()
    page.goto(web.url)
    page.wait_for_selector("#list tbody tr, #empty")
    page.evaluate("navigator.serviceWorker.ready")
    env = [f"ROOST_CODEX_BIN={FAKES / 'codex'}", f"CODEX_HOME={tmp_path / 'codex'}"]
    args = [arg for pair in [*env, "FAKE_CODEX_SCREEN=login"] for arg in ("--env", pair)]
    node.run("spawn", "codex", "--name", "needy", "--cwd", str(project), *args)
    page.wait_for_function(
        "window.roostDebug.notices.some(n => n.name === 'needy' && n.kind === 'attention')",
        timeout=30000,
    )
    shown = (
        "navigator.serviceWorker.ready.then(r => r.getNotifications())"
        ".then(ns => ns.map(n => n.body))"
    )
    bodies = wait_for(lambda: page.evaluate(shown) or None, 10, "the attention notification")
    assert bodies == ["needy: needs attention (login)"], bodies
    assert node.record("needy")["attention"] == "login"  # reported, never answered
    context.close()
