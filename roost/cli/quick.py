"""The ``roost`` entry point: the commands a script runs in a loop (``ls``, ``show``, ``prompt``,
``send``, ``key``, ``op``, ``events``) on the local node without click or pyzmq, every other
command line through the click CLI (``roost.cli.main``).

A CLI start that imports click and pyzmq costs ~100 ms before it says anything; these commands
answer here in about a third of that. This module recognises exactly the command lines of
``SPECS`` (``roost [--state-dir DIR] [--json] [--timeout S] COMMAND ...`` with the command's own
arguments and options, in any order and ``--opt=value`` form, ``ROOST_STATE_DIR``,
``ROOST_GRANT``) with no remote node named (``ROOST_CONNECT``, ``ROOST_HUB``, ``ROOST_NODE``),
reads ``node.json`` and the token, and asks the node over a minimal ZMTP client
(``roost.client.fast.zmtp``) with the frames the client library sends. Anything else, or
anything unexpected before the request is sent (no node running, a refused token, no answer
within ``QUICK_TIMEOUT_S``), hands the whole command line to the click CLI, which then answers
it in full with its own error texts, exit codes and progress notes. A command that only reads
is also handed over when its answer does not come in time or is not read as the client library
would read it: asking again is safe. A change (``prompt``, ``send``, ``key``) is sent once and
is this module's to finish from then on (``await_reply``). What is printed, error documents and
lines included, comes from ``roost.cli.listing`` and ``roost.cli.texts``, as the click
commands' does. ``ROOST_NO_QUICK=1`` turns the fast path off (tests compare the two).
"""

from __future__ import annotations

import os
import sys
import time

from roost.wire.limits import HARD_FRAME_LIMIT as HARD_FRAME_LIMIT
from roost.wire.limits import HEADER_LIMIT as HEADER_LIMIT
from roost.wire.limits import PROTOCOL_VERSION as PROTOCOL_VERSION

TYPE_CHECKING = False  # not typing's: its import costs this start ~4 ms (mypy reads this)
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

    from roost.wire.errors import RoostError

QUICK_TIMEOUT_S = 1.0  # the fast path's deadline; then the click path asks, with its --timeout
# Set, these hand every command line to the click CLI: a remote node, or shell completion.
HANDOVER_ENV = ("ROOST_CONNECT", "ROOST_HUB", "ROOST_NODE", "_ROOST_COMPLETE")
DEFAULT_TIMEOUT_S = 15.0  # the click CLI's --timeout default


class Handover(Exception):
    """Not for the fast path: the click CLI takes the command line."""


# The commands served here: (flags, options that take a value, least and most arguments, whether
# it changes something: then it takes --op and --grant, and is never asked twice).
SPECS: dict[str, tuple[tuple[str, ...], tuple[str, ...], int, int, bool]] = {
    "ls": (("--json",), (), 0, 0, False),
    "show": (("--json", "--screen"), (), 1, 1, False),
    "op": (("--json",), (), 1, 1, False),
    "events": (("--json",), ("--after", "--limit", "--id"), 0, 0, False),
    "prompt": (("--json",), ("--op", "--grant"), 2, 2, True),
    "send": (("--json",), ("--op", "--grant"), 2, 2, True),
    "key": (("--json",), ("--op", "--grant"), 2, 1 << 16, True),
}
INTEGERS = ("--after", "--limit")  # click.INT's: only plain decimal digits are taken here


class Line:
    """A command line this module serves: the group's options, the command, its arguments,
    flags and option values (``--grant`` from ``ROOST_GRANT`` when not given)."""

    def __init__(self, state_dir: str | None, as_json: bool, timeout: float, command: str) -> None:
        self.state_dir, self.json, self.timeout, self.command = state_dir, as_json, timeout, command
        self.args: list[str] = []
        self.flags: set[str] = set()
        self.values: dict[str, str] = {}

    @property
    def changes(self) -> bool:
        return SPECS[self.command][4]


def parse(argv: list[str], env: Mapping[str, str]) -> tuple[str | None, bool, float] | None:
    """``(state dir or None, --json, --timeout)`` when ``argv`` is ``ls`` as this module serves
    it, else None."""
    line = parse_line(argv, env)
    if line is None or line.command != "ls":
        return None
    return line.state_dir, line.json, line.timeout


def parse_line(argv: list[str], env: Mapping[str, str]) -> Line | None:
    """The ``Line`` of ``argv`` when it is a command of ``SPECS`` as this module serves it, else
    None. Only what the click CLI reads the same way is accepted; the rest is its."""
    if any(env.get(name) is not None for name in HANDOVER_ENV) or env.get("ROOST_NO_QUICK"):
        return None
    state_dir, as_json, timeout = None, False, DEFAULT_TIMEOUT_S
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if arg == "--json":
            as_json = True
        elif name in ("--state-dir", "--timeout"):
            value = value if eq else next(args, "")
            if not value or value.startswith("-"):
                return None
            if name == "--state-dir":
                state_dir = value
            else:
                try:
                    timeout = float(value)
                except ValueError:
                    return None
                if not 0 < timeout < float("inf"):
                    return None
        elif arg in SPECS:
            line = Line(state_dir or env.get("ROOST_STATE_DIR") or None, as_json, timeout, arg)
            return _command_args(line, args, env)
        else:
            return None
    return None


def _command_args(line: Line, args: Iterator[str], env: Mapping[str, str]) -> Line | None:
    flags, valued, least, most, _ = SPECS[line.command]
    for arg in args:
        name, eq, value = arg.partition("=")
        if not arg.startswith("-") or arg == "-":
            line.args.append(arg)
        elif arg in flags:
            line.flags.add(arg)
        elif name in valued:
            value = value if eq else next(args, "")
            if not value or value.startswith("-"):
                return None
            if name in INTEGERS and not (value.isascii() and value.isdecimal()):
                return None
            line.values[name] = value
        else:
            return None  # "--", -h, --help, --wait, --follow, an option of another command
    if not least <= len(line.args) <= most:
        return None
    line.json = line.json or "--json" in line.flags
    if line.changes:
        line.values.setdefault("--grant", env.get("ROOST_GRANT") or "")
        line.values.setdefault("--op", "")
    return line


def state_dir_of(given: str | None) -> str:
    """The state directory as the click CLI resolves it (``make_ctx``), without pathlib."""
    if given:
        return os.path.realpath(os.path.expanduser(given))
    from roost.client.fast.nodefile import default_state_dir

    return default_state_dir()


class Conn:
    """One connection to the node serving a state directory, initialized as
    ``Client.for_state_dir`` does it; ``call`` sends requests as ``Client.call`` sends them."""

    def __init__(self, state_dir: str, timeout: float) -> None:
        from roost.client.fast import nodefile
        from roost.client.fast.zmtp import Dealer

        raw = nodefile.read_node_file(state_dir)
        pid, router = int(raw["pid"]), raw["endpoints"]["router"]
        raw["node_id"], raw["incarnation"], raw["endpoints"]["events"]  # what locate requires
        if not isinstance(router, str) or not nodefile.pid_alive(pid):
            raise Handover("node.json names no live node")
        if not nodefile.lock_held(os.path.join(state_dir, nodefile.LOCK_FILE)):
            raise Handover("no node holds the lock")
        token = nodefile.read_token(state_dir)
        self.prefix, self.ids, self.target = os.urandom(4).hex() + ":", 0, "broker"
        self.dealer = Dealer(router, timeout)
        try:
            hello = {"versions": [1], "token": token, "client": "roost-py"}
            target = self.call("initialize", hello).get("target") or "node"
        except BaseException:
            self.dealer.close()
            raise
        if not isinstance(target, str):
            self.dealer.close()
            raise Handover("initialize named no target")
        self.target = target

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.dealer.close()

    def send(self, method: str, body: dict[str, Any], op: str = "", grant: str = "") -> str:
        """Send one request (the client library's header, key for key); its request id."""
        from roost.client.fast import tinypack

        self.ids += 1
        rid = self.prefix + str(self.ids)
        header = {"v": PROTOCOL_VERSION, "k": "request", "id": rid, "m": method, "t": self.target}
        if grant:
            header["g"] = grant
        if op:
            header["op"] = op
        self.dealer.send([tinypack.packb(header), tinypack.packb(body)])
        return rid

    def reply(self, rid: str) -> dict[str, Any]:
        """The reply to ``rid``'s body; an error reply raised as the RoostError it carries."""
        frames = self.dealer.recv()
        if len(frames) != 2:
            raise Handover(f"a reply of {len(frames)} frames")
        header = _load(frames[0], HEADER_LIMIT)
        kind = header.get("k")
        if kind not in ("response", "error") or header.get("id") != rid:
            raise Handover("not the answer asked for")
        doc = _load(frames[1], HARD_FRAME_LIMIT)
        if kind == "error":
            from roost.wire.errors import RoostError

            raise RoostError.from_body(doc)
        return doc

    def call(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.reply(self.send(method, body))


def ask(state_dir: str, timeout: float) -> dict[str, Any]:
    """``session.list`` of the node serving ``state_dir``: ``initialize``, then the request, on
    one connection, as ``Client.for_state_dir`` and ``Client.call`` send them."""
    with Conn(state_dir, timeout) as conn:
        return conn.call("session.list", {})


def _load(frame: bytes, limit: int) -> dict[str, Any]:
    """One frame's map, as ``wire.load`` reads it: in pure Python when it is small (msgpack's
    import would cost more than its decode saves), else with msgpack itself."""
    from roost.client.fast import tinypack

    if len(frame) > limit:
        raise Handover("a frame past the wire's limit")
    if len(frame) <= tinypack.SMALL:
        obj = tinypack.unpackb(frame)
        if type(obj) is not dict:
            raise Handover("not a msgpack map")
        return obj
    from roost.wire import codec as wire

    return wire.load(frame, limit, "reply")


def render(doc: dict[str, Any], as_json: bool) -> tuple[str, list[str]]:
    """What the click command prints for ``doc``: stdout's text and stderr's lines."""
    from roost.cli.listing import json_text, ls_text
    from roost.cli.table import terminal_width

    if as_json:
        return json_text(doc), []
    out, err = ls_text(doc, terminal_width())
    if any("\x1b" in text for text in (out, *err)):
        raise Handover("an escape sequence: click strips those off a terminal")
    return out, err


def quick(argv: list[str]) -> bool:
    """Serve ``argv`` here if it is a command of ``SPECS`` on the local node and all goes well;
    False if not (then nothing was asked that changes anything)."""
    line = parse_line(argv, os.environ)
    if line is None or sys.platform == "win32":  # (its state dir and endpoints differ)
        return False
    if line.command != "ls":
        return serve(line)
    from roost.client.fast.zmtp import ZmtpError
    from roost.wire.errors import RoostError

    try:
        doc = ask(state_dir_of(line.state_dir), min(line.timeout, QUICK_TIMEOUT_S))
        out, err = render(doc, line.json)
    except (Handover, RoostError, ZmtpError, OSError, ValueError, KeyError, TypeError):
        return False
    _write(out, err)
    return True


WAIT_TICK_S = 0.25  # how often a wait for a change's answer looks at the clock (progress)
# What goes wrong on the fast path's own way (no node, no answer within QUICK_TIMEOUT_S, a reply
# it does not read as the client library would): the click CLI then asks, and says.
HANDED_OVER = (Handover, OSError, ValueError, KeyError, TypeError)


def request(line: Line) -> tuple[str, dict[str, Any]]:
    """The method and body the click command sends for ``line``."""
    command, args, values = line.command, line.args, line.values
    if command == "show":
        return "session.show", {"id": args[0], "screen": "--screen" in line.flags}
    if command == "op":
        return "operation.lookup", {"op": args[0]}
    if command == "events":
        query: dict[str, Any] = {
            "after": int(values.get("--after", 0)),
            "limit": int(values.get("--limit", 1000)),
        }
        if values.get("--id"):
            query["id"] = values["--id"]
        return "events.since", query
    if command == "key":
        return "session.key", {"id": args[0], "keys": args[1:]}
    method = "session.prompt" if command == "prompt" else "session.input"
    return method, {"id": args[0], "text": args[1]}


def ref_of(line: Line) -> str | None:
    """What the click command calls ``ref``: the record the command names (errors about it are
    explained in its words)."""
    if line.command == "events":
        return line.values.get("--id")
    return line.args[0] if line.command in ("show", "prompt", "send", "key") else None


Writes = list[tuple[bool, str]]  # (to stderr, text), in the order click echoes them


def text_of(line: Line, doc: dict[str, Any]) -> Writes:
    """What the click command prints for the reply ``doc``."""
    from roost.cli.listing import json_text
    from roost.cli.texts import STRIP

    if line.json:
        return [(False, json_text(doc) + "\n")]
    if line.command == "show":
        from roost.cli.texts import show_lines

        record, screen = show_lines(doc, "--screen" in line.flags)
        return [(False, record.translate(STRIP) + "\n"), *((False, s + "\n") for s in screen)]
    if line.command == "events":
        from roost.cli.texts import event_line, gap_note

        note = gap_note(doc, int(line.values.get("--after", 0)))
        out = [(True, note + "\n")] if note else []
        return out + [(False, event_line(e).translate(STRIP) + "\n") for e in doc["events"]]
    if line.command == "op":
        from roost.cli.texts import op_text

        return [(False, op_text(line.args[0], doc).translate(STRIP) + "\n")]
    from roost.cli.texts import accepted_text

    what = {"prompt": "prompt", "send": "input", "key": "keys"}[line.command]
    return [(False, accepted_text(what, doc).translate(STRIP) + "\n")]


def failure(err: RoostError, as_json: bool) -> Writes:
    """The click CLI's ``fail``: the error document on stdout, or its line on stderr."""
    if as_json:
        from roost.cli.listing import json_text

        return [(False, json_text({"error": err.to_body()}) + "\n")]
    return [(True, f"error: {err.code}: {err.message}\n")]


def explain(conn: Conn, line: Line, err: RoostError, state_dir: str, strict: bool) -> RoostError:
    """``err`` as the click command says it: ``did you mean`` for an ID not found (asking the
    node for its records, on this connection), the name typed beside the record id, and the
    next step. ``strict``: a lookup that fails on the fast path's way hands over."""
    from roost.cli.texts import explained, suggested, wants_suggestions
    from roost.client.fast.nodefile import default_state_dir
    from roost.client.fast.zmtp import ZmtpError
    from roost.wire.errors import RoostError

    ref = ref_of(line)
    if wants_suggestions(err, ref):
        try:
            err = suggested(err, conn.call("session.list", {})["records"])
        except RoostError:
            pass
        except (ZmtpError, *HANDED_OVER):
            if strict:
                raise
    given = state_dir if state_dir != default_state_dir() else ""
    return explained(err, ref, line.command, given)


def serve(line: Line) -> bool:
    """Answer ``line`` (a command of ``SPECS`` but ``ls``); False to hand it over. A command
    that only reads is handed over whatever goes wrong on the way (asking again is safe). One
    that changes something is handed over only before its request is sent; from then on it is
    this module's to finish, as the click command would: the answer or the error, a progress
    note after a second, ``timeout`` when no answer comes within ``--timeout``."""
    if not (_utf8(sys.stdout) and _utf8(sys.stderr)):
        return False  # click rewraps a stream it finds misconfigured: its bytes, then
    from roost.client.fast.zmtp import ZmtpError
    from roost.wire.errors import RoostError

    state_dir = state_dir_of(line.state_dir)
    method, body = request(line)
    try:
        conn = Conn(state_dir, min(line.timeout, QUICK_TIMEOUT_S))
    except (RoostError, ZmtpError, *HANDED_OVER):
        return False
    code = 0
    with conn:
        try:
            if not line.changes:
                try:  # the suggestions' lookup (explain) and the printing may hand over too
                    try:
                        doc = conn.call(method, body)
                    except RoostError as err:
                        err = explain(conn, line, err, state_dir, True)
                        writes, code = failure(err, line.json), 1
                    else:
                        writes = text_of(line, doc)
                except (ZmtpError, *HANDED_OVER):
                    return False
            else:
                op, grant = line.values["--op"], line.values["--grant"]
                conn.dealer.extend(line.timeout)
                try:  # a send that fails delivers nothing whole: the click CLI may send it
                    rid = conn.send(method, body, op, grant)
                except (ZmtpError, *HANDED_OVER):  # (or it could not be packed, as text)
                    return False
                try:
                    writes = text_of(line, await_reply(conn, rid, method, line.timeout))
                except RoostError as err:
                    err = explain(conn, line, err, state_dir, False)
                    writes, code = failure(err, line.json), 1
        except KeyboardInterrupt:  # as the click command says it
            writes, code = failure(interrupted(line, state_dir), line.json), 130
    _emit(writes)
    if code:
        sys.exit(code)
    return True


def await_reply(conn: Conn, rid: str, method: str, timeout: float) -> dict[str, Any]:
    """The reply to a change, within ``timeout``, as ``Client.call`` waits for it: a note on
    stderr after a second (``roost.cli.progress``), ``timeout`` at the end. A connection lost
    meanwhile is waited out as pyzmq's client waits (it would connect again, and the answer
    would not come)."""
    from roost.client.fast.zmtp import ZmtpError
    from roost.wire.errors import RoostError

    started = time.monotonic()
    deadline, lost = started + timeout, False
    conn.dealer.extend(timeout)
    progress = None
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RoostError("timeout", f"no answer to {method} in time")
            if lost:
                time.sleep(min(remaining, WAIT_TICK_S))
            else:
                try:
                    if conn.dealer.readable(min(remaining, WAIT_TICK_S)):
                        return conn.reply(rid)
                except (ZmtpError, *HANDED_OVER):
                    lost = True
                    continue
            if time.monotonic() - started >= 1.0:
                if progress is None:
                    from roost.cli.progress import Progress

                    progress = Progress(f"the node's answer ({method})")
                    progress.started = started
                progress.tick()
    finally:
        if progress is not None:
            progress.done()


def interrupted(line: Line, state_dir: str) -> RoostError:
    """Ctrl-C during the wait, as the click CLI's ``interrupted`` says it."""
    from roost.cli.texts import roost_line
    from roost.client.fast.nodefile import default_state_dir
    from roost.wire.errors import RoostError

    said = "a request already sent may still be carried out"
    op = line.values.get("--op", "")
    if op:
        given = state_dir if state_dir != default_state_dir() else ""
        said += f": `{roost_line(given, 'op', op)}` says what became of it"
    detail = {"op": op} if op else {}
    return RoostError("interrupted", f"stopped waiting (Ctrl-C); {said}", detail)


def _utf8(stream: Any) -> bool:
    encoding = str(getattr(stream, "encoding", None) or "").lower()
    return encoding.replace("-", "").replace("_", "") == "utf8"


ANSI = r"\033\[[0-?]*[ -/]*[@-~]"  # what click.echo strips off a stream that is not a terminal


def _emit(writes: Writes) -> None:
    """Write as click writes its output: each piece flushed, escape sequences stripped off a stream
    that is not a terminal."""
    try:
        for to_err, text in writes:
            stream = sys.stderr if to_err else sys.stdout
            if "\x1b" in text and not _isatty(stream):
                import re  # only when there is an escape sequence to strip

                text = re.sub(ANSI, "", text)
            stream.write(text)
            stream.flush()
    except BrokenPipeError:  # `roost show X | head -1`: as click's main does, quietly, exit 1
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _write(out: str, err: list[str]) -> None:
    try:
        sys.stdout.write(out + "\n")
        sys.stdout.flush()
        for line in err:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except BrokenPipeError:  # `roost ls | head -1`: as click's main does, quietly, exit 1
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)


def main() -> None:
    argv = sys.argv[1:]
    if len(argv) == 2 and argv[0] == "signal" and not argv[1].startswith("-"):
        from roost.cli.hook import main as hook  # an agent's hook: before anything else loads

        hook(argv[1:])
    if not quick(argv):
        from roost.cli.main import main as click_main

        click_main()


if __name__ == "__main__":
    main()
