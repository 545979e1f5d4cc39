"""The commands a script runs in a loop (``show``, ``prompt``, ``send``, ``key``, ``op``,
``events``) without click or pyzmq (``roost.cli.quick``): the same bytes and exit code as the
click CLI's on a real node, for their answers and their usual errors; anything the fast path
does not serve is the click CLI's. As in ``test_quick_ls``, each run is ``python -X importtime
-m roost`` (the fast path imports neither click nor zmq) and ``ROOST_NO_QUICK=1`` forces the
click path. A change is sent once by each path, so its event number differs: those are compared
as numbers that follow each other, the rest byte for byte."""

from __future__ import annotations

import json
import re

import pytest

from tests.e2e.conftest import Node
from tests.e2e.test_quick_ls import Run, roost, same_both_ways

pytestmark = pytest.mark.timeout(180)

SEQ = re.compile(rb"(\(event |\"seq\": )(\d+)")


@pytest.fixture
def sessions(node: Node) -> Node:
    """A live pty session (alpha), a stream-mode one (turns) and a dormant one (gone)."""
    node.up()
    alpha = node.run("spawn", "echo", "--name", "alpha")["record"]["id"]
    node.wait_screen(alpha, "echo-ready>")
    node.run("spawn", "echo", "--name", "turns", "--mode", "stream")
    gone = node.run("spawn", "echo", "--name", "gone")["record"]["id"]
    node.run("stop", gone)
    return node


def quick_ran(run: Run) -> Run:
    assert run.quick, sorted(run.modules)
    assert "msgpack" not in run.modules  # small replies: roost.client.fast.tinypack
    return run


def changed_both_ways(node: Node, *args: str) -> tuple[Run, Run]:
    """A change by the fast path, then by the click path: the same bytes but for the event
    number, which is the next one's (nothing else happens on the node meanwhile)."""
    fast = quick_ran(roost(node, *args))
    slow = roost(node, *args, forced=True)
    assert not slow.quick
    assert (fast.rc, fast.stderr) == (slow.rc, slow.stderr), args
    assert SEQ.sub(rb"\1N", fast.stdout) == SEQ.sub(rb"\1N", slow.stdout), args
    return fast, slow


def test_reads_print_the_click_paths_bytes(sessions: Node) -> None:
    after = node_seq(sessions) - 3
    for args in (
        ("show", "alpha"),
        ("show", "alpha", "--screen"),
        ("--json", "show", "--screen", "alpha"),
        ("show", "gone", "--screen"),  # the last screen, and how it ended
        ("show", "turns", "--json"),
        ("events", "--after", str(after)),
        ("events", "--after", str(after), "--json", "--limit", "2"),
        ("events", "--id", "alpha", "--limit", "3"),
        ("--timeout", "5", "op", "no-such-op"),
        ("op", "no-such-op", "--json"),
    ):
        run = quick_ran(same_both_ways(sessions, *args))
        assert run.rc == 0 and run.stdout and not run.stderr, args
    for args in (("show", "gone", "--screen"), ("events", "--after", str(after))):
        run = quick_ran(same_both_ways(sessions, *args, cols=80))  # on a terminal
        assert run.rc == 0 and run.stdout, args
    last = roost(sessions, "show", "gone", "--screen").stdout
    assert b"--- last screen (the session is not live) ---" in last


def test_changes_print_what_the_click_path_prints(sessions: Node) -> None:
    for args in (
        ("prompt", "alpha", "hello"),
        ("send", "alpha", "raw text"),
        ("key", "alpha", "escape", "enter"),
        ("--json", "prompt", "alpha", "again"),
        ("key", "alpha", "tab", "--json"),
    ):
        fast, slow = changed_both_ways(sessions, *args)
        assert fast.rc == 0 and not fast.stderr, args
        assert seq_of(fast) < seq_of(slow), args
    sessions.wait_screen(sessions.record("alpha")["id"], "echo: hello")


def test_an_operation_id_is_sent_and_looked_up(sessions: Node) -> None:
    first = quick_ran(roost(sessions, "prompt", "alpha", "once", "--op", "op-1"))
    assert first.rc == 0 and b"prompt accepted (event " in first.stdout
    again = same_both_ways(sessions, "prompt", "alpha", "once", "--op", "op-1")
    assert again.quick and b", already, under operation op-1" in again.stdout
    looked = quick_ran(same_both_ways(sessions, "op", "op-1"))
    assert looked.stdout.startswith(b"op-1: terminal {")


def test_a_grant_is_sent(sessions: Node) -> None:
    """Under a claim, a change without the grant is refused and one with it is taken, from
    ``--grant`` or ``ROOST_GRANT``, the same both ways."""
    grant = sessions.run("claim", "alpha")["claim"]["grant"]
    refused = quick_ran(same_both_ways(sessions, "send", "alpha", "x"))
    assert refused.rc == 1 and b"error: not-claimed" in refused.stderr
    changed_both_ways(sessions, "send", "alpha", "x", "--grant", grant)
    fast = quick_ran(roost(sessions, "key", "alpha", "backspace", env={"ROOST_GRANT": grant}))
    assert fast.rc == 0 and b"keys accepted" in fast.stdout


@pytest.mark.parametrize("as_json", [False, True])
def test_the_usual_errors_are_the_click_paths(sessions: Node, as_json: bool) -> None:
    flag = ("--json",) if as_json else ()
    other = {"ROOST_STATE_DIR": str(sessions.state_dir.parent / "elsewhere")}
    for args, code, env in (
        (("show", "alhpa"), "not-found", None),  # did you mean 'alpha'?
        (("prompt", "alhpa", "hi"), "not-found", None),
        (("send", "nothing-like-it", "hi"), "not-found", None),
        (("events", "--id", "alhpa"), "not-found", None),
        (("prompt", "gone", "hi"), "session-not-live", None),  # resume it with ...
        (("key", "gone", "enter"), "session-not-live", None),
        (("--state-dir", str(sessions.state_dir), "send", "gone", "x"), "session-not-live", other),
        (("key", "alpha", "bogus"), "bad-request", None),
        (("send", "turns", "typed"), "bad-request", None),  # a stream session takes turns
        (("key", "turns", "enter"), "bad-request", None),
    ):
        run = quick_ran(same_both_ways(sessions, *flag, *args, env=env))
        assert run.rc == 1, args
        said = json.loads(run.stdout)["error"]["code"] if as_json else run.stderr.decode()
        assert code in said, (args, said)
    not_live = roost(
        sessions, "--state-dir", str(sessions.state_dir), "prompt", "gone", "hi", env=other
    )
    assert f"roost --state-dir {sessions.state_dir} resume gone".encode() in not_live.stderr


def test_what_it_does_not_serve_is_the_click_paths(sessions: Node) -> None:
    for args in (
        ("show", "alpha", "--bogus"),
        ("prompt", "alpha"),  # TEXT missing: click's usage error
        ("prompt", "alpha", "-n"),
        ("key", "alpha"),
        ("events", "--follow", "--bogus"),
        ("events", "--after", "-1"),
        ("events", "--after", "soon"),
        ("show", "-h"),
        ("send", "alpha", "x", "--", "y"),
    ):
        run = same_both_ways(sessions, *args)
        assert not run.quick, args
    run = same_both_ways(sessions, "prompt", "alpha", "hi", env={"ROOST_HUB": "tcp://127.0.0.1:9"})
    assert not run.quick and run.rc == 1


def test_no_node_is_the_click_paths(node: Node) -> None:
    for args in (("show", "x"), ("prompt", "x", "hi"), ("events",)):
        run = same_both_ways(node, *args)
        assert not run.quick and run.rc == 1 and b"error: node-not-running" in run.stderr


def node_seq(node: Node) -> int:
    events = node.run("events", "--limit", "1000")["events"]
    return int(events[-1]["seq"])


def seq_of(run: Run) -> int:
    found = SEQ.search(run.stdout)
    assert found, run.stdout
    return int(found[2])
