"""The built-in echo agent: a small program that behaves like a real agent CLI.

It prints a banner and the prompt ``echo-ready> ``, answers each submitted line ``X`` with
``echo: X``, keeps one session file per id (a JSON-lines history) and, given ``--resume ID``,
continues that history and says ``resumed ID (N turns)``. A resume of an unknown id fails loudly,
so roost's cold resume is real, not simulated.

    python -m roost.adapters.echo_agent --session-id ID     # a fresh conversation
    python -m roost.adapters.echo_agent --resume ID         # continue one
Session files live in ``$ROOST_ECHO_HOME`` (default ``~/.roost-echo``)/sessions/ID.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="echo-agent")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--session-id")
    group.add_argument("--resume")
    args = parser.parse_args(argv)
    if os.environ.get("ROOST_ECHO_IGNORE_TERM") == "1":  # lets tests prove SIGKILL escalation
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("roost echo agent 1 - answers every line with 'echo: <line>'; /exit quits", flush=True)
    _, path = open_session(args)
    while True:
        try:
            line = input(PROMPT)
        except EOFError:
            return 0
        if line.strip() == "/exit":
            return 0
        if not line.strip():
            continue
        answer = f"echo: {line}"
        with path.open("a") as fh:
            fh.write(json.dumps({"ts": time.time(), "user": line, "assistant": answer}) + "\n")
        print(answer, flush=True)


if __name__ == "__main__":
    sys.exit(main())
