"""The ``roost`` entry point: ``roost ls`` on the local node without click or pyzmq, every other
command line through the click CLI (``roost.cli.main``).

A CLI start that imports click and pyzmq costs ~100 ms before it says anything; ``roost ls``, the
command run most often (and by scripts in loops), answers here in about a third of that. This
module recognises exactly ``roost [--state-dir DIR] [--json] [--timeout S] ls [--json]`` (options
in any order and ``--opt=value`` form, ``ROOST_STATE_DIR``) with no remote node named
(``ROOST_CONNECT``, ``ROOST_HUB``, ``ROOST_NODE``), reads ``node.json`` and the token, and asks
the node over a minimal ZMTP client (``roost.client.fast.zmtp``) with the frames the client library
sends. Anything else, or anything unexpected on the way (no node running, a refused token, an
error reply, no answer within ``QUICK_TIMEOUT_S``, a reply it would not print exactly as the
click command does), hands the whole command line to the click CLI, which then answers it
in full: ``ls`` only reads, so asking again is safe, and every error text, exit code and
progress note is the click path's own. What is printed comes from ``roost.cli.listing``, as the
click command's does. ``ROOST_NO_QUICK=1`` turns the fast path off (tests compare the two).
"""

from __future__ import annotations

import os
import sys

from roost.wire.limits import HARD_FRAME_LIMIT as HARD_FRAME_LIMIT
from roost.wire.limits import HEADER_LIMIT as HEADER_LIMIT
from roost.wire.limits import PROTOCOL_VERSION as PROTOCOL_VERSION

TYPE_CHECKING = False  # not typing's: its import costs this start ~4 ms (mypy reads this)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from roost.client.fast.zmtp import Dealer

QUICK_TIMEOUT_S = 1.0  # the fast path's deadline; then the click path asks, with its --timeout
# Set, these hand every command line to the click CLI: a remote node, or shell completion.
HANDOVER_ENV = ("ROOST_CONNECT", "ROOST_HUB", "ROOST_NODE", "_ROOST_COMPLETE")
DEFAULT_TIMEOUT_S = 15.0  # the click CLI's --timeout default


class Handover(Exception):
    """Not for the fast path: the click CLI takes the command line."""


def parse(argv: list[str], env: Mapping[str, str]) -> tuple[str | None, bool, float] | None:
    """``(state dir or None, --json, --timeout)`` when ``argv`` is ``ls`` as this module serves
    it, else None. Only what the click CLI reads the same way is accepted; the rest is its."""
    if any(env.get(name) is not None for name in HANDOVER_ENV) or env.get("ROOST_NO_QUICK"):
        return None
    state_dir, as_json, timeout, seen_ls = None, False, DEFAULT_TIMEOUT_S, False
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if arg == "ls" and not seen_ls:
            seen_ls = True
        elif arg == "--json":
            as_json = True
        elif seen_ls:
            return None  # ls takes --json only
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
        else:
            return None
    if not seen_ls:
        return None
    return state_dir or env.get("ROOST_STATE_DIR") or None, as_json, timeout


def state_dir_of(given: str | None) -> str:
    """The state directory as the click CLI resolves it (``make_ctx``), without pathlib."""
    if given:
        return os.path.realpath(os.path.expanduser(given))
    from roost.client.fast.nodefile import default_state_dir

    return default_state_dir()


def ask(state_dir: str, timeout: float) -> dict[str, Any]:
    """``session.list`` of the node serving ``state_dir``: ``initialize``, then the request, on
    one connection, as ``Client.for_state_dir`` and ``Client.call`` send them."""
    from roost.client.fast import nodefile
    from roost.client.fast.zmtp import Dealer

    raw = nodefile.read_node_file(state_dir)
    pid, router = int(raw["pid"]), raw["endpoints"]["router"]
    raw["node_id"], raw["incarnation"], raw["endpoints"]["events"]  # what locate also requires
    if not isinstance(router, str) or not nodefile.pid_alive(pid):
        raise Handover("node.json names no live node")
    if not nodefile.lock_held(os.path.join(state_dir, nodefile.LOCK_FILE)):
        raise Handover("no node holds the lock")
    token = nodefile.read_token(state_dir)
    prefix = os.urandom(4).hex() + ":"
    with Dealer(router, timeout) as dealer:
        hello = {"versions": [1], "token": token, "client": "roost-py"}
        info = _call(dealer, prefix + "1", "initialize", "broker", hello)
        target = info.get("target") or "node"
        if not isinstance(target, str):
            raise Handover("initialize named no target")
        return _call(dealer, prefix + "2", "session.list", target, {})


def _call(
    dealer: Dealer, rid: str, method: str, target: str, body: dict[str, Any]
) -> dict[str, Any]:
    from roost.client.fast import tinypack

    header = {"v": PROTOCOL_VERSION, "k": "request", "id": rid, "m": method, "t": target}
    dealer.send([tinypack.packb(header), tinypack.packb(body)])
    frames = dealer.recv()
    if len(frames) != 2:
        raise Handover(f"a reply of {len(frames)} frames")
    reply = _load(frames[0], HEADER_LIMIT)
    if reply.get("k") != "response" or reply.get("id") != rid:
        raise Handover("not the answer asked for")  # an error reply: the click path says it
    return _load(frames[1], HARD_FRAME_LIMIT)


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
    """Serve ``argv`` here if it is ``ls`` on the local node and all goes well; False if not."""
    parsed = parse(argv, os.environ)
    if parsed is None or sys.platform == "win32":  # (its state dir and endpoints differ)
        return False
    given, as_json, timeout = parsed
    from roost.client.fast.zmtp import ZmtpError
    from roost.wire.errors import RoostError

    try:
        doc = ask(state_dir_of(given), min(timeout, QUICK_TIMEOUT_S))
        out, err = render(doc, as_json)
    except (Handover, RoostError, ZmtpError, OSError, ValueError, KeyError, TypeError):
        return False
    _write(out, err)
    return True


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
    if not quick(sys.argv[1:]):
        from roost.cli.main import main as click_main

        click_main()


if __name__ == "__main__":
    main()
