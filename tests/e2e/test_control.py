"""Control under failure: the state store dying, operation ids, claims, and ``node stop``'s busy.

What must hold: the node restarts its state store within its restart
intensity and reports it failed past it; while it is away, requests succeed or answer
``unavailable`` and nothing committed is lost; an accepted turn runs to its end whatever happens
to the client that sent it; a repeated operation id returns the first outcome and does nothing
again; a claim refuses others' mutations until it lapses or is taken over, and fences the old grant.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from roost.wire import protocol as p
from roost.wire.errors import RoostError
from tests.e2e.conftest import Node, alive, sigkill, wait_for

CLI_TIMEOUT = 15.0  # what ``roost`` waits for an answer by default

TURN_KINDS = [
    "session.input",
    "session.tool_call",
    "session.tool_result",
    "session.output",
    "session.turn",
]


def _state_actor(node: Node) -> dict[str, Any]:
    actor: dict[str, Any] = node.run("node", "status")["actors"]["state"]
    return actor


def _outcome(node: Node, *args: str) -> str:
    """``ok``, or the error code a command answered."""
    doc = node.run(*args, check=False)
    return str(doc["error"]["code"]) if "error" in doc else "ok"


def _roost(node: Node, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "roost", *args],
        env=node.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _first_line(proc: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
    """The first line a command printed, as JSON, read with a deadline."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buf = b""
    while b"\n" not in buf:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no output line in {timeout} s; so far {buf!r}"
        ready, _, _ = select.select([proc.stdout], [], [], remaining)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            assert chunk, f"the command exited without a line; so far {buf!r}"
            buf += chunk
    doc: dict[str, Any] = json.loads(buf.split(b"\n", 1)[0])
    return doc


def _reap(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.communicate(timeout=10)


def _finish(proc: subprocess.Popen[bytes], timeout: float) -> tuple[bytes, bytes]:
    """Wait for a command's end and its output; kill it if it overstays ``timeout``."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _reap(proc)
        raise


def _session_file(node: Node, rec: dict[str, Any]) -> Path:
    return node.state_dir / "providers" / "echo" / "sessions" / f"{rec['provider_session']}.jsonl"


def _turn_ends(node: Node, rid: str) -> list[dict[str, Any]]:
    return [e for e in node.run("events", "--id", rid)["events"] if e["kind"] == "session.turn"]


def _seq_kinds(events: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(e["seq"], e["kind"]) for e in events]


# -- the state store dies --------------------------------------------------------------------------


def test_a_killed_state_store_is_restarted_and_loses_nothing(node: Node) -> None:
    node.up()
    workdir = node.state_dir.parent / "work"
    workdir.mkdir()
    typed = node.run("spawn", "echo", "--name", "typed")["record"]
    node.run("prompt", "typed", "before the crash")
    node.wait_screen("typed", "echo: before the crash")
    node.wait_screen("typed", "echo-ready>")
    wait_for(lambda: node.record("typed")["activity"] == "ready", 10, "typed to settle")
    node.run(
        "spawn",
        "echo",
        "--name",
        "streamed",
        "--mode",
        "stream",
        "--env",
        "ROOST_ECHO_DELAY_MS=200",
    )
    turn = node.run("turn", "streamed", "/tool echo across the restart")["turn"]
    records = node.run("ls")["records"]
    committed = _seq_kinds(node.events())
    old = _state_actor(node)
    assert old["health"] == "running" and old["restarts"] == 0

    outcomes: list[str] = []
    with node.client() as client:  # connected beforehand, so its request meets the gap
        sigkill(old["pid"])
        try:
            client.call("session.list", timeout=CLI_TIMEOUT)
            outcomes.append("ok")
        except RoostError as err:
            outcomes.append(err.code)
    requests = [("ls",), ("show", "typed"), ("events",), ("workspace", "add", str(workdir))]

    def serving_again() -> dict[str, Any] | None:
        outcomes.extend(_outcome(node, *args) for args in requests)
        status = node.run("node", "status")
        state: dict[str, Any] = status["actors"]["state"]
        fresh = state["pid"] not in (None, old["pid"]) and status["records"] is not None
        return state if fresh else None

    new = wait_for(serving_again, 20, "the state store to serve again")
    assert "unavailable" in outcomes and set(outcomes) <= {"ok", "unavailable"}, outcomes
    assert new["health"] == "running" and new["restarts"] == 1
    # every record as it was; a live session may have been touched meanwhile (``updated``: a
    # verdict reported again) and the running turn's figures may have landed (``usage``)
    volatile = ("updated", "usage")
    after = node.run("ls")["records"]
    assert [{k: v for k, v in a.items() if k not in volatile} for a in after] == [
        {k: v for k, v in b.items() if k not in volatile} for b in records
    ]
    assert _seq_kinds(node.events())[: len(committed)] == committed
    # the turn accepted before the crash ran on, and is whole
    done = node.run("turn", "streamed", "--wait")
    assert done["turn"]["id"] == turn and done["turn"]["state"] == "completed"
    assert [e["kind"] for e in done["events"]] == TURN_KINDS
    # the live session was untouched
    assert node.record("typed")["active"]["pid"] == typed["active"]["pid"]
    node.run("prompt", "typed", "after the crash")
    node.wait_screen("typed", "echo: after the crash")


def _exhaust_state_store(node: Node) -> tuple[dict[str, Any], int, float]:
    """Kill each new state store as soon as it serves, until the node reports it failed;
    returns the failed actor's status, the number of deaths and the seconds it took."""
    dead: set[int] = set()
    with node.client() as client:

        def next_state() -> dict[str, Any] | None:
            """The state actor once failed, or once a new store process serves."""
            try:
                # a short deadline: a status that meets the dead store's registration stalls
                status = client.call("node.status", timeout=0.5)
            except RoostError as err:
                assert err.code == "timeout"
                return None
            state: dict[str, Any] = status["actors"]["state"]
            if state["health"] == "failed":
                return state
            serving = state["health"] == "running" and status["records"] is not None
            return state if serving and state["pid"] not in dead else None

        started = time.monotonic()
        while (state := wait_for(next_state, 10, "a new state store"))["health"] != "failed":
            sigkill(state["pid"])
            dead.add(state["pid"])
            assert len(dead) <= 6, "the state store was restarted past its intensity"
        return state, len(dead), time.monotonic() - started


def test_a_request_in_flight_when_the_state_store_dies_is_answered_at_once(node: Node) -> None:
    """The node's call to a store that exits is failed when the process is seen gone, not left
    to its 10-s deadline: the client (waiting 8 s here) hears `unavailable` from the node."""
    node.up()
    store = psutil.Process(_state_actor(node)["pid"])
    store.suspend()  # the request reaches the store and stays unanswered
    try:
        with node.client() as client:
            client.send_raw(_request("stuck", "session.list"))
            assert client.recv_raw(1.0) is None  # nothing answers for the suspended store
            sigkill(store.pid)
            frames = client.recv_raw(8.0)
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            store.resume()
    assert frames is not None, "no answer before the node's own deadline"
    answer = p.unpack(frames[1])
    assert answer["code"] == "unavailable" and "restarting" in answer["message"], answer
    wait_for(lambda: node.run("ls", check=False).get("records") is not None, 20, "service")


def _request(rid: str, method: str) -> list[bytes]:
    header = p.Header(kind=p.REQUEST, rid=rid, method=method, target="node")
    return [header.encode(), p.pack({})]


def test_a_state_store_dying_too_often_is_reported_failed(node: Node) -> None:
    node.up()
    state, deaths, elapsed = _exhaust_state_store(node)
    assert deaths == 6 and elapsed < 15, (deaths, elapsed)
    assert state["pid"] is None and state["restarts"] == 5
    assert alive(node.pid())
    status = node.run("node", "status")
    assert status["pid"] == node.pid() and status["actors"]["state"]["health"] == "failed"
    assert status["records"] is None
    # once the broker has noticed the store is gone, requests say so
    wait_for(lambda: not _state_actor(node)["registered"], 10, "the registration to expire")
    assert node.error("ls")["code"] == "unavailable"


def test_a_node_whose_state_store_failed_can_still_bestopped(node: Node) -> None:
    node.up()
    node.run("spawn", "echo", "--name", "kept")
    _exhaust_state_store(node)
    stopped = node.run("node", "stop")
    assert stopped["stopped"] and not alive(stopped["pid"])
    assert node.up()["actors"]["state"]["health"] == "running"
    assert [r["name"] for r in node.run("ls")["records"]] == ["kept"]


# -- operations and turns --------------------------------------------------------------------------


def test_a_turn_runs_on_after_its_client_dies_and_its_op_id_is_not_run_twice(node: Node) -> None:
    node.up()
    rec = node.run("spawn", "echo", "--mode", "stream", "--env", "ROOST_ECHO_DELAY_MS=200")[
        "record"
    ]
    rid = rec["id"]
    client = _roost(node, "turn", rid, "/tool echo hi", "--op", "OP1", "--json")
    try:
        accepted = _first_line(client, 30)
        client.send_signal(signal.SIGKILL)
    finally:
        _reap(client)
    assert accepted["accepted"] and accepted["turn"]
    turn = accepted["turn"]

    done = node.run("turn", rid, "--wait")
    assert done["turn"]["id"] == turn and done["turn"]["state"] == "completed"
    assert [e["kind"] for e in done["events"]] == TURN_KINDS
    output = [e for e in done["events"] if e["kind"] == "session.output"]
    assert output[0]["data"]["text"] == "echo: /tool echo hi"
    looked_up = node.run("op", "OP1")
    assert looked_up["state"] == "terminal" and looked_up["result"]["turn"] == turn
    assert looked_up["result"]["status"] == "completed"

    ends = len(_turn_ends(node, rid))
    again = node.run("turn", rid, "/tool echo hi", "--op", "OP1")
    assert again["duplicate"] is True and again["turn"] == turn
    assert len(_turn_ends(node, rid)) == ends == 1
    assert node.run("turn", rid, "--wait")["turn"]["id"] == turn
    assert len(_session_file(node, rec).read_text().splitlines()) == 1


def test_a_repeated_prompt_op_id_types_nothing_again(node: Node) -> None:
    node.up()
    rid = node.run("spawn", "echo")["record"]["id"]
    node.wait_screen(rid, "echo-ready>")
    first = node.run("prompt", rid, "hi", "--op", "P1")
    second = node.run("prompt", rid, "hi", "--op", "P1")
    assert first["accepted"] and not first.get("duplicate")
    assert second["accepted"] and second["duplicate"] is True
    assert second["seq"] == first["seq"]
    node.run("prompt", rid, "after")  # typed after any repeat would have been
    node.wait_screen(rid, "echo: after")
    assert node.run("transcript", rid)["data"].count("echo: hi") == 1
    inputs = [e for e in node.run("events", "--id", rid)["events"] if e["kind"] == "session.input"]
    assert [e["data"]["text"] for e in inputs] == ["hi", "after"]
    assert node.run("op", "P1")["state"] == "terminal"
    assert node.run("op", "nosuch") == {"op": "nosuch", "state": "unknown", "result": None}
    # the session gone, the operation's first outcome still answers its repeat (the store says)
    node.run("stop", rid)
    after = node.run("prompt", rid, "hi", "--op", "P1")
    assert after["duplicate"] is True and after["seq"] == first["seq"]
    assert node.error("prompt", rid, "hi", "--op", "P2")["code"] == "session-not-live"


# -- claims ----------------------------------------------------------------------------------------


def test_claims_refuse_others_fence_old_grants_and_lapse(node: Node) -> None:
    node.up()
    rid = node.run("spawn", "echo", "--name", "claimed")["record"]["id"]
    node.wait_screen(rid, "echo-ready>")
    grant = node.run("claim", rid)["claim"]["grant"]

    assert node.error("prompt", rid, "intruder")["code"] == "not-claimed"
    assert node.run("prompt", rid, "holder", "--grant", grant)["accepted"]
    node.wait_screen(rid, "echo: holder")
    assert "echo: intruder" not in node.screen(rid)
    # reading needs no claim
    assert [r["id"] for r in node.run("ls")["records"]] == [rid]
    assert node.record(rid)["state"] == "live"
    assert node.run("events", "--id", rid)["events"]

    assert node.error("claim", rid)["code"] == "not-claimed"
    taken = node.run("claim", rid, "--take-over")["claim"]["grant"]
    assert taken != grant
    fenced = node.error("prompt", rid, "old holder", "--grant", grant)
    assert fenced["code"] == "stale-grant" and fenced["detail"]["reason"] == "taken over"
    assert node.run("prompt", rid, "new holder", "--grant", taken)["accepted"]
    assert node.run("release", rid, taken)["released"]
    assert node.run("prompt", rid, "anyone")["accepted"]

    # long enough that the next CLI call starts within it on a loaded machine (2 cores, CI)
    short = node.run("claim", rid, "--lease-ms", "4000")["claim"]["grant"]
    assert node.error("prompt", rid, "too early")["code"] == "not-claimed"

    def lapsed() -> dict[str, Any] | None:
        doc = node.run("prompt", rid, "lapsed", check=False)
        if "error" in doc:
            assert doc["error"]["code"] == "not-claimed"
            return None
        return doc

    assert wait_for(lapsed, 20, "the short lease to lapse")["accepted"]
    stale = node.error("prompt", rid, "late holder", "--grant", short)
    assert stale["code"] == "stale-grant" and stale["detail"]["reason"] == "lapsed"
    node.wait_screen(rid, "echo: lapsed")
    screen = node.screen(rid)
    assert "echo: too early" not in screen and "echo: late holder" not in screen


# -- node stop and busy ----------------------------------------------------------------------------


def test_the_node_lease_guards_node_wide_mutations(node: Node, tmp_path: Path) -> None:
    """A node-wide controller lease guards spawning, workspaces and
    shutdown; sessions' own requests and reading are not affected by it."""
    node.up()
    rid = node.run("spawn", "echo", "--name", "before")["record"]["id"]
    lease = node.run("node", "claim")["claim"]
    assert (lease["scope"], lease["record"]) == ("node", None)
    grant = lease["grant"]

    for refused in (("spawn", "echo"), ("workspace", "add", str(tmp_path)), ("node", "stop")):
        doc = node.error(*refused)
        assert doc["code"] == "not-claimed" and doc["detail"]["scope"] == "node", refused
    assert node.error("node", "claim")["code"] == "not-claimed"
    assert node.run("prompt", rid, "a session's own")["accepted"]  # not node-wide
    assert [r["id"] for r in node.run("ls")["records"]] == [rid]
    assert node.run("spawn", "echo", "--name", "holder", "--grant", grant)["record"]["id"]
    assert node.run("workspace", "add", str(tmp_path), "--grant", grant)["workspace"]

    taken = node.run("node", "claim", "--take-over")["claim"]["grant"]
    fenced = node.error("spawn", "echo", "--grant", grant)
    assert fenced["code"] == "stale-grant" and fenced["detail"]["reason"] == "taken over"
    assert node.run("node", "release", taken)["released"] is True
    assert node.run("spawn", "echo", "--name", "anyone")["record"]["state"] == "live"
    assert node.run("node", "stop")["stopped"]


def test_node_stop_is_refused_busy_while_a_turn_is_being_accepted(node: Node) -> None:
    """The state store is stopped (SIGSTOP) so the turn stays in acceptance."""
    held = "state"
    status = node.up()
    rid = node.run("spawn", "echo", "--mode", "stream")["record"]["id"]
    pid = status["actors"][held]["pid"]
    os.kill(pid, signal.SIGSTOP)
    client = _roost(node, "turn", rid, "x", "--op", f"held-{held}", "--json")
    try:
        wait_for(
            lambda: node.run("node", "status")["accepting"] >= 1, 8, "the turn to be accepting"
        )
        refused = node.error("node", "stop")
        assert refused["code"] == "busy"
        assert node.run("node", "status")["pid"] == node.pid()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        out, err = _finish(client, 30)
    accepted = json.loads(out.decode().splitlines()[-1])
    if "error" in accepted:  # the request met the gap itself: unavailable (or, on a loaded
        # machine, its deadline passed while the actor was stopped: the turn may then have been
        # accepted late), and a retry with its op id answers the outcome, or runs it now
        assert accepted["error"]["code"] in ("unavailable", "timeout"), (out, err)
        accepted = node.run("turn", rid, "x", "--op", f"held-{held}")
    assert accepted["accepted"]
    done = node.run("turn", rid, "--wait")
    assert done["turn"]["id"] == accepted["turn"] and done["turn"]["state"] == "completed"
    assert [e["kind"] for e in done["events"]] == [
        "session.input",
        "session.output",
        "session.turn",
    ]
    # accepted, the turn no longer holds the node
    assert node.run("node", "status")["busy"] is False
    assert node.run("node", "stop")["stopped"]


def test_node_stop_under_steady_traffic_stops_and_loses_nothing(node: Node) -> None:
    """Four clients prompt without pause (something is always being accepted): ``node stop``
    refuses new input for a moment (``unavailable``, retryable), lets what is under way finish
    and stops, instead of answering ``busy`` to every try. Every prompt answered ``accepted``
    is in the log once."""
    node.up()
    rid = node.run("spawn", "echo", "--name", "busy")["record"]["id"]
    stop = threading.Event()
    accepted: list[str] = []
    refused: list[str] = []

    def prompt(n: int) -> None:
        client = node.client()
        i = 0
        try:
            while not stop.is_set():
                i += 1
                op = f"steady-{n}-{i}"
                try:
                    client.call("session.prompt", {"id": rid, "text": op}, op=op)
                    accepted.append(op)
                except RoostError as err:
                    refused.append(err.code)
                    if err.code in ("unreachable", "timeout", "unavailable"):
                        return  # the node is going or gone: this client is done
        finally:
            client.close()

    threads = [threading.Thread(target=prompt, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: len(accepted) >= 40, 20, "steady traffic")
        assert node.run("node", "stop")["stopped"]
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert not alive_node(node)
    assert "busy" not in refused, refused
    node.up()
    logged = [
        e["data"].get("text")
        for e in node.run("events", "--id", rid)["events"]
        if e["kind"] == "session.input"
    ]
    assert sorted(logged) == sorted(set(logged))  # once each
    assert set(accepted) <= set(logged)


def alive_node(node: Node) -> bool:
    return (node.state_dir / "node.json").exists()


def test_a_turn_is_accepted_while_the_adapter_host_is_stopped(node: Node) -> None:
    """Accepting a turn asks nothing of the adapter host (the node commits it): with the host
    stopped and no plan asked ahead for the session's turns, the turn is accepted at once, and
    runs once the host answers its command."""
    status = node.up()
    env = ["--env", "ROOST_ECHO_PROMPT_ATTACHED=1"]  # no plan for any text: asked at the turn
    rid = node.run("spawn", "echo", "--mode", "stream", *env)["record"]["id"]
    wait_for(lambda: node.run("node", "status")["inputs"]["gates_open"] == 1, 10, "the gate")
    host = status["actors"]["adapters"]["pid"]
    os.kill(host, signal.SIGSTOP)
    try:
        started = time.monotonic()
        accepted = node.run("turn", rid, "x", "--op", "held-adapters")
        assert accepted["accepted"] is True and time.monotonic() - started < 5
    finally:
        os.kill(host, signal.SIGCONT)
    done = node.run("turn", rid, "--wait")
    assert done["turn"]["id"] == accepted["turn"] and done["turn"]["state"] == "completed", done
    assert node.run("turn", rid, "x", "--op", "held-adapters")["duplicate"] is True


def test_node_stop_leaves_live_sessions_unless_asked(node: Node) -> None:
    node.up()
    rec = node.run("spawn", "echo", "--name", "kept")["record"]
    node.wait_screen("kept", "echo-ready>")
    supervisor = psutil.Process(rec["active"]["pid"])

    stopped = node.run("node", "stop")
    assert stopped["stopped"] and stopped["stopped_sessions"] == []
    assert not alive(stopped["pid"])
    assert supervisor.is_running() and supervisor.status() != psutil.STATUS_ZOMBIE

    node.up()
    wait_for(lambda: node.record("kept")["active"], 15, "the supervisor to re-attach")
    gone = node.run("node", "stop", "--stop-sessions")
    assert gone["stopped"] and gone["stopped_sessions"] == [rec["id"]]
    wait_for(lambda: not alive(rec["active"]["pid"]), 10, "the supervisor to end")
    assert not alive(rec["active"]["agent_pid"])

    node.up()
    back = node.record("kept")
    assert back["state"] == "dormant" and back["active"] is None
    assert back["provider_session"] == rec["provider_session"]


def test_a_record_read_on_hearing_its_state_event_is_as_new_as_the_event(node: Node) -> None:
    """The store publishes a write's events as it commits, before the node has the reply; a
    client that reads the record at once (the dashboard does) must see the state the event
    names, not the node's copy from before the write."""
    node.up()
    rid = node.run("spawn", "echo", "--name", "seen")["record"]["id"]
    reader = node.client()
    stream = reader.subscribe("e/")
    failures: list[str] = []
    try:
        wait_for(lambda: node.record("seen")["state"] == "live", what="seen live")
        for _ in range(6):
            for method in ("session.stop", "session.resume"):
                call = _roost(node, "--json", method.split(".")[1], rid)
                try:
                    deadline = time.monotonic() + 30
                    want = "dormant" if method == "session.stop" else "live"
                    while time.monotonic() < deadline:
                        got = stream.recv(1.0)
                        if got is None or got[1].get("kind") != "record.state":
                            continue
                        was, to = got[1]["data"]["from"], got[1]["data"]["to"]
                        shown = reader.call("session.show", {"id": rid})["record"]["state"]
                        if shown == was:  # the copy from before the write (it may be newer)
                            failures.append(f"event said {was} -> {to}, session.show said {shown}")
                        if to == want:
                            break
                    else:
                        raise AssertionError(f"no record.state to {want} within 30 s")
                finally:
                    call.communicate(timeout=30)
    finally:
        stream.close()
        reader.close()
    assert failures == []
