"""``make demo``: roost's main job end to end on the built-in echo agent, one line per step.

It drives the real CLI against a node in a temporary state directory (so it never touches your
own node): spawn, prompt, ``ls``, ``attach`` (in a pseudo-terminal of its own, detached by a
scripted Ctrl-]), a client killed mid-stream, the node restarted, the session still there, stop,
cold resume by the provider's session id, prompt again; then the commands to try it yourself.
"""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import pyte

from roost.interpreter import python_module

ENV: dict[str, str] = {}
DETACH = b"\x1d"  # Ctrl-]
TRY_IT = """
now try it yourself, on your own node (`make install` puts roost on PATH; or use .venv/bin/roost):
  roost node up
  roost spawn echo --name mine
  roost prompt mine "hello"
  roost ls
  roost attach mine            # type into it; Ctrl-] detaches, the session runs on
  roost stop mine && roost resume mine
  roost node stop"""


def roost(*args: str, show: bool = True) -> dict[str, Any]:
    if show:
        print(f"  $ roost {' '.join(_quote(a) for a in args)}")
    proc = subprocess.run(
        python_module("roost", "--json", *args),
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    doc: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if "error" in doc:
        raise SystemExit(f"demo failed at 'roost {' '.join(args)}': {doc['error']}")
    return doc


def _quote(arg: str) -> str:
    return f'"{arg}"' if " " in arg else arg


def wait(cond: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"demo failed: timed out waiting for {what}")
        time.sleep(0.1)


def screen(ref: str) -> str:
    return str(roost("show", ref, "--screen", show=False).get("screen") or "")


def show_screen(ref: str, lines: int = 4) -> None:
    for line in screen(ref).splitlines()[-lines:]:
        print(f"    | {line}")


def text_of(*args: str) -> str:
    """``roost ARGS`` as a person sees it (text, not JSON)."""
    print(f"  $ roost {' '.join(_quote(a) for a in args)}")
    proc = subprocess.run(
        python_module("roost", *args), env=ENV, capture_output=True, text=True, timeout=60
    )
    return proc.stdout


def attach_and_detach(ref: str, until: str, rows: int = 40, cols: int = 120) -> list[str]:
    """``roost attach REF`` in a pseudo-terminal of its own, of the session's size (attach fits
    the session to the window it is seen in); once ``until`` is on its screen, Ctrl-] detaches.
    Returns the screen it showed."""
    print(f"  $ roost attach {ref}      (then Ctrl-], typed by the demo)")
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI, its terminal the pseudo-terminal
        os.execvpe(sys.executable, python_module("roost", "attach", ref), ENV)
    try:
        _resize(fd, rows, cols)
        deadline = time.monotonic() + 20
        while until not in "\n".join(screen.display) and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                stream.feed(os.read(fd, 65536))
        shown = [line.rstrip() for line in screen.display if line.strip()]
        os.write(fd, DETACH)
        if until not in "\n".join(shown):
            raise SystemExit(f"demo failed: attach never showed {until!r}")
        _drain(fd, deadline)
    finally:
        os.waitpid(pid, 0)
        os.close(fd)
    return shown


def _resize(fd: int, rows: int, cols: int) -> None:
    import fcntl
    import struct
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _drain(fd: int, deadline: float) -> None:
    """Read what the CLI writes until it exits (end of file on the terminal)."""
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.2)[0]:
            try:
                if not os.read(fd, 65536):
                    return
            except OSError:  # EIO: the CLI exited and closed its end
                return


def step(n: int, text: str) -> None:
    print(f"\n[{n}] {text}")


def main() -> None:
    state = tempfile.mkdtemp(prefix="roost-demo-")
    ENV.update({**os.environ, "ROOST_STATE_DIR": state})
    print(f"roost demo (state directory {state})")
    try:
        story()
    finally:
        subprocess.run(
            python_module("roost", "node", "stop", "--stop-sessions"),
            env=ENV,
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(state, ignore_errors=True)


def story() -> None:
    step(1, "start this machine's node")
    up = roost("node", "up")
    print(f"    node {up['node_id']} serving, incarnation {up['incarnation']}")

    step(2, "spawn the echo agent in a real PTY")
    rec = roost("spawn", "echo", "--name", "shepherd")["record"]
    rid, identity = rec["id"], rec["provider_session"]
    print(f"    record {rid} is {rec['state']}; provider session id {identity}")
    wait(lambda: "echo-ready>" in screen(rid), "the agent's prompt")

    step(3, "prompt it; the answer appears on its screen")
    roost("prompt", "shepherd", "hello from the demo")
    wait(lambda: "echo: hello from the demo" in screen(rid), "the answer")
    show_screen(rid)

    step(4, "list the records")
    for line in text_of("ls").splitlines():
        print(f"    {line}")

    step(5, "attach: the session's terminal in yours; Ctrl-] detaches and the session runs on")
    for line in attach_and_detach("shepherd", "echo: hello from the demo")[-4:]:
        print(f"    | {line}")
    print(f"    detached; {rid} is {roost('show', rid, show=False)['record']['state']}")

    step(6, "a client following the events is killed mid-stream (SIGKILL)")
    follower = subprocess.Popen(
        python_module("roost", "events", "--follow"),
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)  # a human-visible pause, not synchronisation: the kill may land anywhere
    follower.send_signal(signal.SIGKILL)
    follower.wait()
    print(
        f"    client pid {follower.pid} killed; the session is "
        f"{roost('show', rid, show=False)['record']['state']}"
    )

    step(7, "restart the node daemon; live sessions keep running")
    roost("node", "stop")
    up2 = roost("node", "up")
    print(f"    new incarnation {up2['incarnation']}")
    roost("prompt", "shepherd", "still there?")
    wait(lambda: "echo: still there?" in screen(rid), "the answer after the restart")
    again = roost("show", rid, show=False)["record"]
    print(f"    {rid} is {again['state']}, generation {again['generation']} (unchanged)")

    step(8, "stop the session: the record goes dormant, its provider session id kept")
    stopped = roost("stop", "shepherd")["record"]
    print(f"    {rid} is {stopped['state']}; provider session {stopped['provider_session']}")

    step(9, "cold resume by the provider's own session id: a new generation, same conversation")
    resumed = roost("resume", "shepherd")["record"]
    wait(lambda: f"resumed {identity}" in screen(rid), "the agent to confirm the resume")
    print(f"    generation {resumed['generation']}, provider session {resumed['provider_session']}")
    show_screen(rid, 3)

    step(10, "prompt again")
    roost("prompt", "shepherd", "and once more")
    wait(lambda: "echo: and once more" in screen(rid), "the last answer")
    show_screen(rid, 3)
    inputs = [e for e in roost("events", show=False)["events"] if e["kind"] == "session.input"]
    print(f"\ndone: {len(inputs)} inputs in the durable event log; every one accepted was kept.")
    print(TRY_IT)


if __name__ == "__main__":
    main()
