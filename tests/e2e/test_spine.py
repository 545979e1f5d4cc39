"""The spine end to end, in the order a user meets it."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from roost.wire.errors import RoostError
from tests.e2e.conftest import CliError, JsonLines, Node, wait_for


def test_whole_lifecycle_across_a_node_restart(
    node: Node, tmp_path_factory: pytest.TempPathFactory
) -> None:
    first = node.up("--node-id", "lab-1")
    assert first["node_id"] == "lab-1" and not first["already_running"]
    assert (node.state_dir / "state.db").exists()
    workdir = tmp_path_factory.mktemp("project")
    node.run("workspace", "add", str(workdir), "--name", "proj")

    # spawn with a name; live with a provider session id
    spawned = node.run("spawn", "echo", "--name", "shepherd", "--cwd", "proj", "--size", "30x100")
    rec = spawned["record"]
    rid = rec["id"]
    assert rec["state"] == "live" and rec["generation"] == 1 and rec["mode"] == "pty"
    assert rec["provider"] == "echo" and rec["cwd"] == str(workdir)
    assert rec["provider_session"] and rec["active"]["generation"] == 1
    identity = rec["provider_session"]
    listed = node.run("ls")["records"]
    assert [(r["id"], r["name"], r["state"]) for r in listed] == [(rid, "shepherd", "live")]
    node.wait_screen("shepherd", "echo-ready>")

    # rename, then stop: dormant, identity kept
    assert node.run("rename", "shepherd", "release shepherd")["record"]["name"] == (
        "release shepherd"
    )
    stopped = node.run("stop", "release shepherd")["record"]
    assert stopped["state"] == "dormant" and stopped["active"] is None
    assert stopped["provider_session"] == identity

    # node stop, node up: a new incarnation, everything restored, dormant stays dormant
    node.run("node", "stop")
    with pytest.raises(CliError) as gone:
        node.run("ls")
    assert gone.value.code == "node-not-running"
    second = node.up()
    assert second["node_id"] == "lab-1" and second["incarnation"] != first["incarnation"]
    workspaces = node.run("workspace", "ls")["workspaces"]
    assert [(w["name"], w["path"]) for w in workspaces] == [("proj", str(workdir))]
    back = node.record(rid)
    assert back["state"] == "dormant" and back["active"] is None
    assert back["provider_session"] == identity and back["name"] == "release shepherd"

    # resume by the provider's id: a new generation, the same conversation
    resumed = node.run("resume", rid)["record"]
    assert resumed["state"] == "live" and resumed["generation"] == 2
    assert resumed["provider_session"] == identity and resumed["cwd"] == str(workdir)
    node.wait_screen(rid, f"resumed {identity} (0 turns)")
    assert node.error("resume", rid)["code"] == "session-record-busy"

    # a prompt is answered on screen and leaves an input event in the log
    before = node.events()[-1]["seq"]
    accepted = node.run("prompt", rid, "hello roost")
    assert accepted["accepted"] and accepted["seq"] > before
    node.wait_screen(rid, "echo: hello roost")
    inputs = [e for e in node.events(before) if e["kind"] == "session.input"]
    assert [(e["record"], e["data"]["text"], e["generation"]) for e in inputs] == [
        (rid, "hello roost", 2)
    ]

    # forget is refused while live; stop, forget, gone
    assert node.error("forget", rid)["code"] == "session-record-busy"
    node.run("stop", rid)
    assert node.run("forget", rid)["forgotten"]
    assert node.error("show", rid)["code"] == "not-found"
    assert node.run("ls")["records"] == []
    kinds = [e["kind"] for e in node.events()]
    assert kinds.count("node.started") == 2 and kinds[-1] == "record.forgotten"


def test_input_keys_resize_and_transcript(node: Node) -> None:
    node.up()
    rid = node.run("spawn", "echo", "--name", "keys")["record"]["id"]
    node.wait_screen(rid, "echo-ready>")
    node.run("send", rid, "partial")
    node.wait_screen(rid, "echo-ready> partial")
    assert "echo: partial" not in node.screen(rid)
    node.run("key", rid, "enter")
    node.wait_screen(rid, "echo: partial")
    assert node.error("key", rid, "no-such-key")["code"] == "bad-request"
    assert node.run("resize", rid, "20x60") == {**node.run("resize", rid, "20x60")}
    transcript = node.run("transcript", rid)
    assert "echo: partial" in transcript["data"] and transcript["end"] >= len(transcript["data"])
    later = node.run("transcript", rid, "--offset", str(transcript["end"]))
    assert later["data"] == "" and later["offset"] == transcript["end"]


def test_live_sessions_outlive_a_node_stop(node: Node) -> None:
    node.up()
    rec = node.run("spawn", "echo", "--name", "survivor")["record"]
    node.wait_screen("survivor", "echo-ready>")
    node.run("node", "stop")
    node.up()
    back = wait_for(
        lambda: r if (r := node.record("survivor"))["active"] else None,
        15,
        "the supervisor to re-attach",
    )
    assert back["state"] == "live" and back["generation"] == rec["generation"]
    assert back["active"]["pid"] == rec["active"]["pid"]
    node.run("prompt", "survivor", "still here")
    node.wait_screen("survivor", "echo: still here")


def test_node_up_is_idempotent_and_names_the_running_node(node: Node) -> None:
    first = node.up()
    again = node.up()
    assert again["already_running"] and again["pid"] == first["pid"]
    status = node.run("node", "status")
    for key in ("node_id", "incarnation", "pid", "state_dir", "endpoints"):
        assert key in status
    assert status["actors"]["state"]["health"] == "running"
    assert status["actors"]["adapter/echo"]["registered"]
    assert (
        node.error("--state-dir", str(node.state_dir), "node", "up", "--node-id", "other")["code"]
        == "durable-state-conflict"
    )


def test_spawn_refuses_bad_input_clearly(
    node: Node, tmp_path_factory: pytest.TempPathFactory
) -> None:
    node.up()
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    assert node.error("spawn", "nonesuch", "--cwd", str(elsewhere))["code"] == "unknown-provider"
    assert node.run("workspace", "ls")["workspaces"] == []  # a refused spawn registers nothing
    assert node.error("spawn", "echo", "--cwd", "/does/not/exist")["code"] == "bad-cwd"
    with node.client() as client:
        with pytest.raises(RoostError) as relative:
            client.call("workspace.add", {"path": "not/absolute"})
        assert (relative.value.code, relative.value.detail) == (
            "bad-cwd",
            {"field": "path", "value": "not/absolute"},  # the value named
        )
    assert node.error("spawn", "echo", "--size", "big")["code"] == "bad-request"
    assert node.error("spawn", "echo", "--env", "NOEQUALS")["code"] == "bad-request"
    node.run("spawn", "echo", "--name", "twin")
    assert node.error("spawn", "echo", "--name", "twin")["code"] == "name-taken"
    assert [r["name"] for r in node.run("ls")["records"]] == ["twin"]
    node.run("stop", "twin")
    assert node.error("key", "twin", "no-such-key")["code"] == "bad-request"  # whatever the state
    assert node.error("key", "twin", "enter")["code"] == "session-not-live"


def test_stop_escalates_to_sigkill_and_keeps_the_last_screen(node: Node) -> None:
    node.up()
    rid = node.run("spawn", "echo", "--env", "ROOST_ECHO_IGNORE_TERM=1")["record"]["id"]
    node.run("prompt", rid, "remember me")
    node.wait_screen(rid, "echo: remember me")
    stopped = node.run("stop", rid, "--grace-ms", "300")["record"]
    assert stopped["state"] == "dormant"
    assert stopped["last_exit"]["signal"] == 9  # SIGTERM ignored, so SIGKILL after the grace
    shown = node.run("show", rid, "--screen")
    assert shown["screen"] is None and "echo: remember me" in shown["last_screen"]
    assert not [p for p in node.processes() if "echo_agent" in " ".join(p.cmdline())]


def test_events_follow_streams_new_events_in_order(node: Node) -> None:
    import subprocess
    import sys

    node.up()
    follower = subprocess.Popen(
        [sys.executable, "-m", "roost", "events", "--follow", "--json"],
        env=node.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())
        assert first["kind"] == "node.started" and first["seq"] == 1
        rid = node.run("spawn", "echo", "--name", "followed")["record"]["id"]
        seen: list[dict[str, Any]] = []
        while not any(e["kind"] == "record.state" and e["data"]["to"] == "live" for e in seen):
            seen.append(json.loads(follower.stdout.readline()))
        seqs = [first["seq"], *(e["seq"] for e in seen)]
        assert seqs == list(range(1, len(seqs) + 1))  # no gap, no duplicate
        kinds = [e["kind"] for e in seen]
        assert kinds[:2] == ["workspace.added", "record.created"] and seen[1]["record"] == rid
    finally:
        follower.kill()
        follower.wait()


def test_events_follow_reads_many_pages_and_goes_on_across_a_node_restart(
    node: Node, tmp_path: Path
) -> None:
    """The follower's catch-up reads the log in pages of ``--limit`` (pipelined: the next page
    asked for while one prints); after a node restart it reads on from the last seq it printed:
    every event once, in order."""
    node.up()

    def commit(n: int) -> int:
        for _ in range(n):
            work = tmp_path / f"w{len(list(tmp_path.glob('w*')))}"
            work.mkdir()
            node.run("workspace", "add", str(work))
        return int(node.events()[-1]["seq"])

    last = commit(10)
    follower = JsonLines(node.env, "events", "--follow", "--limit", "3")
    printed: list[dict[str, Any]] = []

    def printed_up_to(seq: int) -> bool:
        printed.extend(follower.drain(0.2))
        return bool(printed and printed[-1]["seq"] >= seq)

    try:
        wait_for(lambda: printed_up_to(last), 30, "the follower to read the log, page by page")
        node.run("node", "stop")
        node.up()
        wait_for(lambda: printed_up_to(commit(4)), 60, "the follower to read on after the restart")
        assert [e["seq"] for e in printed] == [e["seq"] for e in node.events()]  # none twice
    finally:
        follower.close()


def test_raw_output_is_published_with_byte_offsets(node: Node) -> None:
    node.up()
    rid = node.run("spawn", "echo", "--name", "raw")["record"]["id"]
    node.wait_screen(rid, "echo-ready>")
    with node.client() as client:
        stream = client.subscribe(f"o/{rid}")
        try:
            start = node.run("transcript", rid)["end"]
            wait_for(lambda: _subscribed(node, rid, stream), 10, "the output subscription")
            chunks: list[dict[str, Any]] = []
            node.run("prompt", rid, "offsets please")

            def answered() -> bool:
                got = stream.recv(timeout=0.2)
                if got is not None:
                    chunks.append(got[1])
                seen = b"".join(c["data"] for c in chunks)
                return re.search(rb"echo: \.*offsets please", seen) is not None

            wait_for(answered, 10, "the answer on the output topic")
        finally:
            stream.close()
    ordered = [c for c in chunks if c["offset"] >= start]
    for before, after in itertools.pairwise(ordered):
        assert after["offset"] == before["offset"] + len(before["data"])
    transcript = node.run("transcript", rid, "--offset", str(ordered[0]["offset"]))
    assert transcript["data"].startswith(ordered[0]["data"].decode())


def _subscribed(node: Node, rid: str, stream: Any) -> bool:
    """Slow joiner: type a byte and see whether it arrives on the topic."""
    node.run("send", rid, ".")
    got = stream.recv(timeout=0.5)
    return got is not None


def test_a_stream_turn_with_an_output_line_far_over_64_kib_completes_whole(
    node: Node, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Provider lines are not bound by asyncio's 64-KiB readline limit (a tool result holding a
    whole file): the turn completes, and its output event and result hold every character."""
    node.up()
    work = tmp_path_factory.mktemp("work")
    node.run("spawn", "echo", "--mode", "stream", "--name", "long", "--cwd", str(work))
    text = "".join(f"{n:06d} " for n in range(15_000))  # 105,000 characters on one line
    turn = node.run("turn", "long", text, "--wait")
    assert turn["turn"]["state"] == "completed", turn["turn"]
    assert turn["turn"]["result"]["result"] == f"echo: {text}"
    outputs = [e for e in node.events() if e["kind"] == "session.output"]
    assert [e["data"]["text"] for e in outputs] == [f"echo: {text}"]
