"""The built-in echo agent: a small program that behaves like a real agent CLI.

It prints a banner and the prompt ``echo-ready> ``, answers each submitted line ``X`` with
``echo: X``, keeps one session file per id (a JSON-lines history) and, given ``--resume ID``,
continues that history and says ``resumed ID (N turns)``. A resume of an unknown id fails loudly,
so roost's cold resume is real, not simulated.

    python -m roost.adapters.echo_agent --session-id ID     # a fresh conversation
    python -m roost.adapters.echo_agent --resume ID         # continue one
    python -m roost.adapters.echo_agent -p TEXT --output-format stream-json --resume ID
                                                            # one headless turn, claude's shape
In headless mode a prompt ``/tool echo X`` makes a tool call and its result first. For tests:
``ROOST_ECHO_DELAY_MS`` paces the JSON lines, ``ROOST_ECHO_FAIL=1`` ends the turn with an error,
``ROOST_ECHO_HOLD_FILE=PATH`` makes a headless turn wait, after its result line, until PATH exists
and then write what PATH holds (if anything) on stderr before it exits (a test's chosen moment).
Session files live in ``$ROOST_ECHO_HOME`` (default ``~/.roost-echo``)/sessions/ID.jsonl.
Ctrl-C at the prompt behaves as in a shell: the line typed so far is dropped and a new prompt
follows; the agent runs on (``/exit`` or Ctrl-D ends it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

PROMPT = "echo-ready> "
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def sessions_dir() -> Path:
    home = os.environ.get("ROOST_ECHO_HOME") or str(Path.home() / ".roost-echo")
    path = Path(home) / "sessions"
    path.mkdir(parents=True, exist_ok=True)
    return path


def count_turns(path: Path) -> int:
    with path.open() as fh:
        return sum(1 for line in fh if line.strip())


def open_session(args: argparse.Namespace) -> tuple[str, Path]:
    if args.resume:
        session_id = args.resume
        path = sessions_dir() / f"{session_id}.jsonl"
        if not ID_RE.match(session_id) or not path.exists():
            print(f"echo: no session {session_id!r} to resume", file=sys.stderr, flush=True)
            sys.exit(2)
        print(f"resumed {session_id} ({count_turns(path)} turns)", flush=True)
        return session_id, path
    session_id = args.session_id or str(uuid.uuid4())
    if not ID_RE.match(session_id):
        print(f"echo: invalid session id {session_id!r}", file=sys.stderr, flush=True)
        sys.exit(2)
    path = sessions_dir() / f"{session_id}.jsonl"
    if path.exists():
        print(f"echo: session {session_id!r} already exists; use --resume", file=sys.stderr)
        sys.exit(2)
    path.touch()
    print(f"session {session_id}", flush=True)
    return session_id, path


def emit(obj: dict[str, object]) -> None:
    delay = int(os.environ.get("ROOST_ECHO_DELAY_MS", "0"))
    if delay:
        time.sleep(delay / 1000)
    print(json.dumps(obj), flush=True)


def headless(args: argparse.Namespace) -> int:
    """One turn, written as claude-style stream-json lines; history is appended only at the end."""
    session_id = args.resume or args.session_id or str(uuid.uuid4())
    path = sessions_dir() / f"{session_id}.jsonl"
    if not ID_RE.match(session_id) or (args.resume and not path.exists()):
        print(f"Error: no conversation found with session ID: {session_id}", file=sys.stderr)
        return 1
    if not args.resume and path.exists():
        print(f"Error: Session ID {session_id} is already in use.", file=sys.stderr)
        return 1
    turns = count_turns(path) if path.exists() else 0
    path.touch()  # the conversation exists from its init line on, as with claude
    text: str = args.print
    emit(
        {
            "type": "system",
            "subtype": "init",
            "session_id": session_id,
            "cwd": os.getcwd(),
            "model": "echo",
            "turns_before": turns,
        }
    )
    if text.startswith("/tool "):
        command = text[len("/tool ") :]
        tool_id = f"toolu_echo_{turns + 1}"
        emit(
            {
                "type": "assistant",
                "session_id": session_id,
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": tool_id,
                            "name": "Bash",
                            "input": {"command": command},
                        }
                    ],
                },
            }
        )
        output = command[5:] if command.startswith("echo ") else "ok"
        emit(
            {
                "type": "user",
                "session_id": session_id,
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": tool_id,
                            "content": output,
                            "is_error": False,
                        }
                    ],
                },
            }
        )
    failed = os.environ.get("ROOST_ECHO_FAIL") == "1"
    answer = "echo failed on purpose" if failed else f"echo: {text}"
    emit(
        {
            "type": "assistant",
            "session_id": session_id,
            "message": {"role": "assistant", "content": [{"type": "text", "text": answer}]},
        }
    )
    emit(
        {
            "type": "result",
            "subtype": "success",
            "is_error": failed,
            "result": answer,
            "session_id": session_id,
            "num_turns": turns + 1,
        }
    )
    hold(os.environ.get("ROOST_ECHO_HOLD_FILE"))
    if not failed:
        with path.open("a") as fh:
            fh.write(json.dumps({"ts": time.time(), "user": text, "assistant": answer}) + "\n")
    return 1 if failed else 0


def hold(path: str | None) -> None:
    """Wait until ``path`` exists (a test releases the turn at the moment it chose)."""
    if not path:
        return
    while not Path(path).exists():
        time.sleep(0.02)
    said = Path(path).read_text().strip()
    if said:
        print(said, file=sys.stderr, flush=True)


def ticker(interval: float) -> None:
    n = 0
    while True:
        time.sleep(interval)
        n += 1
        print(f"tick {n}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="echo-agent")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--session-id")
    group.add_argument("--resume")
    parser.add_argument("-p", "--print", help="headless: answer this prompt and exit")
    parser.add_argument("--output-format", choices=["stream-json"], default="stream-json")
    args = parser.parse_args(argv)
    if os.environ.get("ROOST_ECHO_IGNORE_TERM") == "1":  # lets tests prove SIGKILL escalation
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.print is not None:
        return headless(args)
    tick = int(os.environ.get("ROOST_ECHO_TICK_MS", "0"))  # output with no input, for tests
    if tick:
        threading.Thread(target=ticker, args=(tick / 1000,), daemon=True).start()
    print("roost echo agent 1 - answers every line with 'echo: <line>'; /exit quits", flush=True)
    _, path = open_session(args)
    while True:
        try:
            if not answer_one(path):
                return 0
        except KeyboardInterrupt:  # Ctrl-C, as in a shell: drop the line, a new prompt
            print(flush=True)


def answer_one(path: Path) -> bool:
    """Read one line at the prompt and answer it; False at the end (``/exit``, end of input)."""
    try:
        line = input(PROMPT)
    except EOFError:
        return False
    if line.strip() == "/exit":
        return False
    if line.strip():
        answer = f"echo: {line}"
        with path.open("a") as fh:
            fh.write(json.dumps({"ts": time.time(), "user": line, "assistant": answer}) + "\n")
        print(answer, flush=True)
    return True


if __name__ == "__main__":
    sys.exit(main())
