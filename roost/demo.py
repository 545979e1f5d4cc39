"""``make demo``: roost's main job end to end on the built-in echo agent, one line per step.

It drives the real CLI against a node in a temporary state directory (so it never touches your
own node): spawn, prompt, a client killed mid-stream, the node restarted, the session still there,
stop, cold resume by the provider's session id, prompt again.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

ENV: dict[str, str] = {}


def roost(*args: str, show: bool = True) -> dict[str, Any]:
    if show:
        print(f"  $ roost {' '.join(_quote(a) for a in args)}")
    proc = subprocess.run(
        [sys.executable, "-m", "roost", "--json", *args],
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
            [sys.executable, "-m", "roost", "node", "stop", "--stop-sessions"],
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

    step(4, "a client following the events is killed mid-stream (SIGKILL)")
    follower = subprocess.Popen(
        [sys.executable, "-m", "roost", "events", "--follow"],
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

    step(5, "restart the node daemon; live sessions keep running")
    roost("node", "stop")
    up2 = roost("node", "up")
    print(f"    new incarnation {up2['incarnation']}")
    roost("prompt", "shepherd", "still there?")
    wait(lambda: "echo: still there?" in screen(rid), "the answer after the restart")
    again = roost("show", rid, show=False)["record"]
    print(f"    {rid} is {again['state']}, generation {again['generation']} (unchanged)")

    step(6, "stop the session: the record goes dormant, its provider session id kept")
    stopped = roost("stop", "shepherd")["record"]
    print(f"    {rid} is {stopped['state']}; provider session {stopped['provider_session']}")

    step(7, "cold resume by the provider's own session id: a new generation, same conversation")
    resumed = roost("resume", "shepherd")["record"]
    wait(lambda: f"resumed {identity}" in screen(rid), "the agent to confirm the resume")
    print(f"    generation {resumed['generation']}, provider session {resumed['provider_session']}")
    show_screen(rid, 3)

    step(8, "prompt again")
    roost("prompt", "shepherd", "and once more")
    wait(lambda: "echo: and once more" in screen(rid), "the last answer")
    show_screen(rid, 3)
    inputs = [e for e in roost("events", show=False)["events"] if e["kind"] == "session.input"]
    print(f"\ndone: {len(inputs)} inputs in the durable event log; every one accepted was kept.")


if __name__ == "__main__":
    main()
