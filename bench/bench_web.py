"""One-off: ``roost web`` against ``roost attach``, in the same run. Prints figures; never fails
on them. Everything runs under a temporary directory and is killed at the end.

1. Keystroke to echo, p50 and p99, on one echo session (its agent echoes each typed byte): a
   letter typed, the time until it comes back, then a Backspace (not timed) so the line stays
   short, then ``GAP_S`` of quiet (a typist's pace: the supervisor reads a terminal that has
   just had output at most once per 50 ms, and at once after a pause). Through ``roost attach``
   in a pseudo-terminal the bench holds (the letter written to attach's terminal, read back from
   it; attach sends a letter after 50 ms without another key, gathering a burst of typing into
   one ``session.input``); through the web server's terminal websocket (``/ws/term``, what the
   page speaks: ``input`` in, output frames back); and, with chromium and Playwright, on the
   page itself (xterm.js's ``input``, as a typed key, until the websocket message that carries
   the echo has been handed to the terminal).
2. Viewers: ``writer.py`` (figure 4's) writes ``--mb`` MB as fast as it can inside a busy echo
   session's agent, first with no viewer, then with ``--viewers`` websocket clients of the web
   server watching that session; the writer's rate each time, the web server's CPU, and how many
   viewers had every byte and when.

    .venv/bin/python bench/bench_web.py [--samples 200] [--mb 30] [--viewers 50] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import re
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import writer
from fig_output import HOOK, reader, result, transcript_end
from harness import ROOST, BenchNode, cpu_seconds, quantile, running_node, wait_for

ROWS, COLS = 50, 200
GAP_S = 0.1  # between keys: ten a second
CSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def letter(i: int) -> bytes:
    return bytes([97 + i % 26])


def figures(name: str, lat: list[float]) -> str:
    p50, p99 = quantile(lat, 0.5) * 1e3, quantile(lat, 0.99) * 1e3
    return f"{name:<28} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   ({len(lat)} keys)"


# -- roost attach in a pseudo-terminal ------------------------------------------------------


class Pty:
    """``roost attach NAME`` on a pseudo-terminal of ROWS x COLS; its output read as it comes."""

    def __init__(self, node: BenchNode, name: str) -> None:
        self.fd, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "roost", "attach", name],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**node.env, "TERM": "xterm-256color"},
            start_new_session=True,
        )
        os.close(slave)
        self.seen = b""

    def until(self, want: bytes, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while want not in CSI.sub(b"", self.seen):
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"attach never showed {want!r}")
            if select.select([self.fd], [], [], left)[0]:
                self.seen += os.read(self.fd, 65536)

    def close(self) -> None:
        os.write(self.fd, b"\x1d")  # Ctrl-]: detach
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.fd)


def attach_latency(node: BenchNode, name: str, samples: int) -> list[float]:
    view = Pty(node, name)
    try:
        view.until(b"echo-ready>", 20)
        lat = []
        for i in range(samples):
            view.seen = b""
            start = time.perf_counter()
            os.write(view.fd, letter(i))
            view.until(letter(i))
            lat.append(time.perf_counter() - start)
            view.seen = b""
            os.write(view.fd, b"\x7f")
            view.until(b"\x08")
            time.sleep(GAP_S)
        return lat
    finally:
        view.close()


# -- the web server -------------------------------------------------------------------------


class WebServer:
    def __init__(self, node: BenchNode) -> None:
        self.proc = subprocess.Popen(
            [*ROOST, "web", "--listen", "127.0.0.1:0"],
            env=node.env,
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = str(json.loads(self.proc.stdout.readline())["url"]).rstrip("/")
        self.ps = psutil.Process(self.proc.pid)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(15)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


async def ws_latency(base: str, rid: str, samples: int) -> list[float]:
    async with (
        aiohttp.ClientSession() as client,
        client.ws_connect(
            base.replace("http", "ws") + f"/ws/term?id={rid}", headers={"Origin": base}
        ) as ws,
    ):
        await ws.send_json({"t": "hello", "rows": ROWS, "cols": COLS})
        first = await ws.receive_json(timeout=20)
        assert first["t"] == "screen", first

        async def until(want: bytes) -> None:
            got = b""
            while want not in got:
                msg = await ws.receive(timeout=10)
                if msg.type == aiohttp.WSMsgType.BINARY:
                    got += msg.data[8:]

        lat = []
        for i in range(samples):
            start = time.perf_counter()
            await ws.send_json({"t": "input", "data": letter(i).decode()})
            await until(letter(i))
            lat.append(time.perf_counter() - start)
            await ws.send_json({"t": "input", "data": "\x7f"})
            await until(b"\x08")
            await asyncio.sleep(GAP_S)
        return lat


PAGE_LOOP = """async ([n, gap]) => {
  const v = view, lat = [];
  const echo = (ch, want) => new Promise((resolve) => {
    const start = window.roostDebug.stream.bytes.length;
    const t0 = performance.now();
    const seen = () => {  // after the page's own onmessage has written the frame
      if (window.roostDebug.stream.bytes.slice(start).includes(want)) {
        v.ws.removeEventListener("message", seen);
        resolve(performance.now() - t0);
      }
    };
    v.ws.addEventListener("message", seen);
    v.term.input(ch);
  });
  for (let i = 0; i < n; i++) {
    const c = String.fromCharCode(97 + i % 26);
    lat.push(await echo(c, c));
    await echo("\\x7f", "\\b");
    await new Promise((resolve) => setTimeout(resolve, gap));
  }
  return lat;
}"""


def page_latency(base: str, name: str, samples: int) -> list[float] | str:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "skipped: no playwright"
    if not Path(CHROMIUM).exists():
        return "skipped: no chromium (apt install chromium)"
    with sync_playwright() as play:
        browser = play.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_context(
                viewport={"width": 1280, "height": 800}, bypass_csp=True
            ).new_page()
            page.goto(base + "/")
            page.click(f"#list tbody tr:has(td.name:text-is('{name}'))")
            page.wait_for_function(
                "window.roostDebug.screenText().includes('echo-ready>')", timeout=20000
            )
            got = page.evaluate(PAGE_LOOP, [samples, GAP_S * 1000])
            return [float(ms) / 1e3 for ms in got]
        finally:
            browser.close()


# -- viewers of a busy session --------------------------------------------------------------


def spawn_busy(node: BenchNode, root: Path, name: str, total: int) -> tuple[str, Path, Path]:
    hook, fifo, out = root / f"{name}.py", root / f"{name}.go", root / f"{name}.json"
    hook.write_text(HOOK)
    os.mkfifo(fifo)
    env = {
        "ROOST_ECHO_PRELOAD": str(hook),
        "ROOST_BENCH_FIFO": str(fifo),
        "ROOST_BENCH_BYTES": str(total),
        "ROOST_BENCH_RESULT": str(out),
    }
    with node.client(timeout=60) as client:
        body = node.spawn_body(name, env=env, rows=ROWS, cols=COLS)
        rid = str(client.call("session.spawn", body)["record"]["id"])
        wait_for(
            lambda: (
                "echo-ready>"
                in str(client.call("session.show", {"id": rid, "screen": True}).get("screen") or "")
            ),
            30,
            "the busy session's prompt",
        )
    return rid, fifo, out


def write_busy(node: BenchNode, rid: str, fifo: Path, out: Path, total: int) -> dict[str, Any]:
    """Start the writer, wait for its result and for the transcript to hold every byte."""
    with node.client(timeout=60) as client:
        start_end = transcript_end(client, rid)
        os.close(wait_for(lambda: reader(fifo), 30, "the writer to wait on its FIFO"))
        got = result(out, 600)
        if got is None:
            raise RuntimeError("the writer did not finish in 600 s")
        want = start_end + writer.carried(total)
        wait_for(lambda: transcript_end(client, rid) >= want, 120, "the transcript", every=0.1)
    return {**got, "end": want}


async def viewers_run(
    node: BenchNode, web: WebServer, rid: str, fifo: Path, out: Path, total: int, count: int
) -> dict[str, Any]:
    base = web.url
    ends = [0] * count
    received = [0] * count
    done = asyncio.Event()

    async def viewer(i: int, client: aiohttp.ClientSession, ready: asyncio.Event) -> None:
        url = base.replace("http", "ws") + f"/ws/term?id={rid}"
        async with client.ws_connect(url, headers={"Origin": base}, max_msg_size=0) as ws:
            await ws.send_json({"t": "hello"})  # no size: the viewers never resize the session
            ready.set()
            while not done.is_set():
                msg = await ws.receive()
                if msg.type == aiohttp.WSMsgType.BINARY:
                    ends[i] = int.from_bytes(msg.data[:8], "big") + len(msg.data) - 8
                    received[i] += len(msg.data) - 8
                elif msg.type == aiohttp.WSMsgType.TEXT:
                    doc = json.loads(msg.data)
                    if doc.get("t") == "screen":
                        ends[i] = max(ends[i], int(doc["offset"]))
                else:
                    return

    async with aiohttp.ClientSession() as client:
        readies = [asyncio.Event() for _ in range(count)]
        tasks = [asyncio.create_task(viewer(i, client, readies[i])) for i in range(count)]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)
        await asyncio.sleep(1.0)  # every viewer has its screen before the writer begins
        cpu0 = cpu_seconds([web.ps])
        began = time.perf_counter()
        got = await asyncio.to_thread(write_busy, node, rid, fifo, out, total)
        caught = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if min(ends) >= got["end"]:
                caught = time.perf_counter() - began
                break
            await asyncio.sleep(0.05)
        cpu = cpu_seconds([web.ps]) - cpu0
        complete = sum(1 for e in ends if e >= got["end"])
        done.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {
        **got,
        "web_cpu": cpu,
        "caught_up_s": caught,
        "complete": complete,
        "received_mb": sum(received) / count / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--mb", type=float, default=30.0)
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    total = int(args.mb * 1e6)
    with tempfile.TemporaryDirectory(prefix="roost-bench-web-") as tmp:
        root = Path(tmp)
        with running_node(root, "web") as node:
            web = WebServer(node)
            try:
                with node.client(timeout=60) as client:
                    body = node.spawn_body("keys", rows=ROWS, cols=COLS)
                    rid = str(client.call("session.spawn", body)["record"]["id"])
                print(f"roost web {web.url}; {os.cpu_count()} cores; echo agent {ROWS}x{COLS}")
                print("keystroke to echo:")
                print(
                    "  " + figures("roost attach (pty)", attach_latency(node, "keys", args.samples))
                )
                lat = asyncio.run(ws_latency(web.url, rid, args.samples))
                print("  " + figures("roost web (websocket)", lat))
                page = page_latency(web.url, "keys", args.samples)
                if isinstance(page, str):
                    print(f"  {'roost web (page)':<28} {page}")
                else:
                    print("  " + figures("roost web (page, chromium)", page))

                print(
                    f"output of a busy session, {args.mb:g} MB written as fast as it can "
                    f"({args.rounds} rounds, by turns):"
                )
                for n in range(args.rounds):
                    rid, fifo, out = spawn_busy(node, root, f"busy{n}", total)
                    alone = write_busy(node, rid, fifo, out, total)
                    rate = alone["bytes"] / alone["elapsed"] / 1e6
                    print(f"  no viewer:    {rate:7.1f} MB/s ({alone['elapsed']:.2f} s)")
                    rid, fifo, out = spawn_busy(node, root, f"watched{n}", total)
                    got = asyncio.run(viewers_run(node, web, rid, fifo, out, total, args.viewers))
                    rate2 = got["bytes"] / got["elapsed"] / 1e6
                    caught = got["caught_up_s"]
                    print(
                        f"  {args.viewers} viewers: {rate2:7.1f} MB/s ({got['elapsed']:.2f} s), "
                        f"{rate2 / rate:.2f}x; {got['complete']}/{args.viewers} viewers had "
                        "every byte"
                        + (f" within {caught:.1f} s of the start" if caught else "")
                        + f", {got['received_mb']:.1f} MB each in output frames; "
                        f"web server CPU {got['web_cpu']:.1f} s"
                    )
                    with node.client(timeout=60) as client:  # the next round on a quiet node
                        for ref in (f"busy{n}", f"watched{n}"):
                            client.call("session.stop", {"id": ref})
            finally:
                web.close()


if __name__ == "__main__":
    main()
