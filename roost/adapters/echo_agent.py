"""The built-in echo agent: a small program that behaves like a real agent CLI.

It prints a banner and the prompt ``echo-ready> ``, answers each submitted line ``X`` with
``echo: X``, keeps one session file per id (a JSON-lines history) and, given ``--resume ID``,
continues that history and says ``resumed ID (N turns)``. A resume of an unknown id fails loudly,
so roost's cold resume is real, not simulated.

    python -S echo_agent.py --session-id ID     # a fresh conversation
    python -S echo_agent.py --resume ID         # continue one
    python -S echo_agent.py --resume ID --fork-session [--session-id NEW]
                                                # a new conversation NEW, a copy of ID's
    python -S echo_agent.py -p TEXT --output-format stream-json --resume ID
                                                # one headless turn, claude's shape
In headless mode a prompt ``/tool echo X`` makes a tool call and its result first. For tests:
A headless turn's result reports synthetic usage: a token per byte of the prompt (in) and
of the answer (out), and a micro-dollar per token. ``ROOST_ECHO_DELAY_MS`` paces the JSON
lines, ``ROOST_ECHO_FAIL=1`` ends the turn with an error,
``ROOST_ECHO_FORK_SAME=1`` makes ``--fork-session`` continue the source instead of copying it,
``ROOST_ECHO_HOLD_FILE=PATH`` makes a headless turn wait, after its result line, until PATH exists
and then write what PATH holds (if anything) on stderr before it exits (a test's chosen moment).
Session files live in ``$ROOST_ECHO_HOME`` (default ``~/.roost-echo``)/sessions/ID.jsonl.
Ctrl-C at the prompt behaves as in a shell: the line typed so far is dropped and a new prompt
follows; the agent runs on (``/exit`` or Ctrl-D ends it).

On a terminal it reads byte by byte (the terminal's canonical mode off: it edits the line
itself, Backspace and Ctrl-U, and echoes what it reads), so a line of any length arrives whole; a
terminal in canonical mode keeps at most 4095 bytes of a line and drops the rest.
``ROOST_ECHO_CANONICAL=1`` (tests) leaves the terminal in canonical mode, as an agent that reads
its terminal a line at a time.

It needs nothing but the standard library (the adapter runs it with ``python -S``, no site) and
imports only what it uses: every echo session starts one, and a node starting 200 of them pays
for each import 200 times.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # not typing's: the agent imports only what it uses
if TYPE_CHECKING:
    from typing import Any

PROMPT = "echo-ready> "
ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
USAGE = (
    "usage: echo-agent [-h] [--session-id ID | --resume ID [--fork-session]] [-p TEXT]"
    " [--output-format {stream-json}]"
)


class Args:
    """The parsed options (a plain class: dataclasses would import inspect, re and ast)."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.resume: str | None = None
        self.print: str | None = None
        self.output_format = "stream-json"
        self.fork = False


def parse_args(argv: list[str]) -> Args:
    """The options, as argparse would take them (``--opt=value`` too); a mistake exits 2."""
    args, rest = Args(), list(argv)
    names = {"--session-id": "session_id", "--resume": "resume", "-p": "print"}
    names |= {"--print": "print", "--output-format": "output_format"}
    while rest:
        word = rest.pop(0)
        if word in ("-h", "--help"):
            print(USAGE)
            sys.exit(0)
        if word == "--fork-session":
            args.fork = True
            continue
        option, eq, value = word.partition("=") if word.startswith("--") else (word, "", "")
        if option not in names:
            _usage_error(f"unrecognized arguments: {word}")
        if not eq:
            if not rest:
                _usage_error(f"argument {option}: expected one argument")
            value = rest.pop(0)
        setattr(args, names[option], value)
    if args.fork and args.resume is None:
        _usage_error("argument --fork-session: needs --resume")
    if args.session_id is not None and args.resume is not None and not args.fork:
        _usage_error("argument --resume: not allowed with argument --session-id")
    if args.output_format != "stream-json":
        _usage_error(f"argument --output-format: invalid choice: {args.output_format!r}")
    return args


def _usage_error(message: str) -> None:
    print(f"{USAGE}\necho-agent: error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def valid_id(session_id: str) -> bool:
    """What ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}`` matches."""
    return (
        0 < len(session_id) <= 128
        and session_id[0].isascii()
        and session_id[0].isalnum()
        and ID_CHARS.issuperset(session_id)
    )


def new_id() -> str:
    import uuid

    return str(uuid.uuid4())


def sessions_dir() -> str:
    home = os.environ.get("ROOST_ECHO_HOME") or os.path.join(os.path.expanduser("~"), ".roost-echo")
    path = os.path.join(home, "sessions")
    os.makedirs(path, exist_ok=True)
    return path


def session_file(session_id: str) -> str:
    return os.path.join(sessions_dir(), f"{session_id}.jsonl")


def touch(path: str) -> None:
    with open(path, "a"):
        pass


def count_turns(path: str) -> int:
    with open(path) as fh:
        return sum(1 for line in fh if line.strip())


def fork(args: Args) -> bool:
    """``--fork-session``: the history of ``--resume``'s session copied into a new one
    (``--session-id``, else a new id), which the rest then resumes; False when the source is
    not there or the new id is taken. The source's file is only read.
    ``ROOST_ECHO_FORK_SAME=1`` (tests): a broken fork, which goes on in the source itself."""
    source, new = args.resume or "", args.session_id or new_id()
    if os.environ.get("ROOST_ECHO_FORK_SAME") == "1":
        args.session_id, args.fork = None, False
        return True
    if not valid_id(source) or not os.path.exists(session_file(source)):
        print(f"echo: no session {source!r} to fork", file=sys.stderr, flush=True)
        return False
    if not valid_id(new) or os.path.exists(session_file(new)):
        print(f"echo: session {new!r} cannot be the fork", file=sys.stderr, flush=True)
        return False
    with open(session_file(source), "rb") as src, open(session_file(new), "xb") as dst:
        dst.write(src.read())
    if args.print is None:  # a headless turn writes JSON lines only
        print(f"forked {source} into {new}", flush=True)
    args.resume, args.session_id, args.fork = new, None, False
    return True


def open_session(args: Args) -> tuple[str, str]:
    if args.resume:
        session_id = args.resume
        path = session_file(session_id)
        if not valid_id(session_id) or not os.path.exists(path):
            print(f"echo: no session {session_id!r} to resume", file=sys.stderr, flush=True)
            sys.exit(2)
        print(f"resumed {session_id} ({count_turns(path)} turns)", flush=True)
        return session_id, path
    session_id = args.session_id or new_id()
    if not valid_id(session_id):
        print(f"echo: invalid session id {session_id!r}", file=sys.stderr, flush=True)
        sys.exit(2)
    path = session_file(session_id)
    if os.path.exists(path):
        print(f"echo: session {session_id!r} already exists; use --resume", file=sys.stderr)
        sys.exit(2)
    touch(path)
    print(f"session {session_id}", flush=True)
    return session_id, path


def dumps(obj: dict[str, object]) -> str:
    """JSON text; json is imported at the first answer, not at the start (it imports re)."""
    import json

    return json.dumps(obj)


def emit(obj: dict[str, object]) -> None:
    delay = int(os.environ.get("ROOST_ECHO_DELAY_MS", "0"))
    if delay:
        time.sleep(delay / 1000)
    print(dumps(obj), flush=True)


def headless(args: Args) -> int:
    """One turn, written as claude-style stream-json lines; history is appended only at the end."""
    session_id = args.resume or args.session_id or new_id()
    path = session_file(session_id) if valid_id(session_id) else ""
    if not path or (args.resume and not os.path.exists(path)):
        print(f"Error: no conversation found with session ID: {session_id}", file=sys.stderr)
        return 1
    if not args.resume and os.path.exists(path):
        print(f"Error: Session ID {session_id} is already in use.", file=sys.stderr)
        return 1
    turns = count_turns(path) if os.path.exists(path) else 0
    touch(path)  # the conversation exists from its init line on, as with claude
    assert args.print is not None
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
            # synthetic figures (no model ran): a token per byte, a micro-dollar per token
            "usage": {"input_tokens": len(text.encode()), "output_tokens": len(answer.encode())},
            "total_cost_usd": (len(text.encode()) + len(answer.encode())) / 1e6,
        }
    )
    hold(os.environ.get("ROOST_ECHO_HOLD_FILE"))
    if not failed:
        with open(path, "a") as fh:
            fh.write(dumps({"ts": time.time(), "user": text, "assistant": answer}) + "\n")
    return 1 if failed else 0


def hold(path: str | None) -> None:
    """Wait until ``path`` exists (a test releases the turn at the moment it chose)."""
    if not path:
        return
    while not os.path.exists(path):
        time.sleep(0.02)
    with open(path) as fh:
        said = fh.read().strip()
    if said:
        print(said, file=sys.stderr, flush=True)


def ticker(interval: float) -> None:
    n = 0
    while True:
        time.sleep(interval)
        n += 1
        print(f"tick {n}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if os.environ.get("ROOST_ECHO_IGNORE_TERM") == "1":  # lets tests prove SIGKILL escalation
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.fork and not fork(args):
        return 2
    if args.print is not None:
        return headless(args)
    preload = os.environ.get("ROOST_ECHO_PRELOAD")  # a test's or benchmark's code, run first
    if preload:
        with open(preload) as fh:
            code = compile(fh.read(), preload, "exec")
        exec(code, {"__name__": "roost_echo_preload"})
    tick = int(os.environ.get("ROOST_ECHO_TICK_MS", "0"))  # output with no input, for tests
    if tick:
        import threading

        threading.Thread(target=ticker, args=(tick / 1000,), daemon=True).start()
    # byte by byte before the first output: the terminal's mode is read as output arrives
    lines = None if os.environ.get("ROOST_ECHO_CANONICAL") == "1" else RawLines.of_stdin()
    try:
        print(
            "roost echo agent 1 - answers every line with 'echo: <line>'; /exit quits", flush=True
        )
        _, path = open_session(args)
        while True:
            try:
                if not answer_one(path, lines):
                    return 0
            except KeyboardInterrupt:  # Ctrl-C, as in a shell: drop the line, a new prompt
                print(flush=True)
    finally:
        if lines is not None:
            lines.restore()


class RawLines:
    """Lines read from a terminal byte by byte: canonical mode and the terminal's echo off (the
    terminal would keep at most 4095 bytes of a line), signals (Ctrl-C) and CR to NL kept on."""

    def __init__(self, saved: list[Any]) -> None:
        self.saved = saved
        self.unread = b""  # read past the last line's end

    @classmethod
    def of_stdin(cls) -> RawLines | None:
        """Stdin's terminal switched to byte by byte, or None where stdin is no terminal."""
        if not os.isatty(0):
            return None
        import termios

        try:
            saved = termios.tcgetattr(0)
            mode = termios.tcgetattr(0)
            mode[3] &= ~(termios.ICANON | termios.ECHO)
            mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
            termios.tcsetattr(0, termios.TCSANOW, mode)
        except termios.error:
            return None
        return cls(saved)

    def restore(self) -> None:
        import contextlib
        import termios

        with contextlib.suppress(termios.error):
            termios.tcsetattr(0, termios.TCSANOW, self.saved)

    def read(self, prompt: str) -> str:
        """One line, without its end, as ``input`` reads it (EOFError at Ctrl-D or the end)."""
        write(prompt.encode())
        line = bytearray()
        while True:
            try:
                chunk, self.unread = self.unread or os.read(0, 65536), b""
            except OSError:  # the terminal hung up
                chunk = b""
            if not chunk:
                raise EOFError
            shown = bytearray()
            for i, byte in enumerate(chunk):
                if byte in (10, 13):  # the line's end (CR where the terminal keeps it)
                    self.unread = chunk[i + 1 :]
                    write(shown + b"\r\n")
                    return line.decode("utf-8", "replace")
                if byte in (8, 127):  # Backspace: one character (its UTF-8 bytes) less
                    while line and line[-1] & 0xC0 == 0x80:
                        line.pop()
                    if line:
                        line.pop()
                        shown += b"\b \b"
                elif byte == 21:  # Ctrl-U: the line so far
                    line.clear()
                    shown += b"\r\x1b[K" + prompt.encode()
                elif byte == 4:  # Ctrl-D: the end, at the start of a line
                    if not line:
                        write(shown)
                        raise EOFError
                else:
                    line.append(byte)
                    shown += b"^" + bytes([byte + 64]) if byte < 32 and byte != 9 else bytes([byte])
            write(shown)


def write(data: bytes | bytearray) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def answer_one(path: str, lines: RawLines | None = None) -> bool:
    """Read one line at the prompt and answer it; False at the end (``/exit``, end of input)."""
    try:
        line = input(PROMPT) if lines is None else lines.read(PROMPT)
    except EOFError:
        return False
    if line.strip() == "/exit":
        return False
    if line.strip():
        answer = f"echo: {line}"
        with open(path, "a") as fh:
            fh.write(dumps({"ts": time.time(), "user": line, "assistant": answer}) + "\n")
        print(answer, flush=True)
    return True


if __name__ == "__main__":
    sys.exit(main())
