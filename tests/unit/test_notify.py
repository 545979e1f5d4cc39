"""roost/actors/node/notify.py: which events notify, what a command reads, how one runs."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import zmq.asyncio

from roost.actors.node.notify import Notifier, Watch, desktop_text, notice, payload
from roost.config import load


def ev(kind: str, **data: Any) -> dict[str, Any]:
    return {"seq": 7, "ts": 1.5, "kind": kind, "record": "r1", "generation": 1, "data": data}


def test_attention_is_told_when_entered_not_while_it_lasts() -> None:
    watch = Watch()
    assert notice(ev("record.state", **{"from": "live", "to": "attention"}), watch) == "attention"
    assert (
        notice(ev("record.state", **{"from": "starting", "to": "attention"}), watch) == "attention"
    )
    assert notice(ev("record.state", **{"from": "attention", "to": "attention"}), watch) is None
    assert notice(ev("record.state", **{"from": "attention", "to": "live"}), watch) is None


def test_a_turn_ends_in_stream_mode_and_when_a_pty_screen_goes_busy_to_ready() -> None:
    watch = Watch()
    assert notice(ev("session.turn", status="completed"), watch) == "turn-end"
    assert notice(ev("session.classified", state="ready"), watch) is None
    assert notice(ev("session.classified", state="busy"), watch) is None
    assert notice(ev("session.classified", state="ready"), watch) == "turn-end"
    assert notice(ev("session.classified", state="ready"), watch) is None


def test_a_typed_prompt_begins_a_turn_that_its_next_ready_screen_ends() -> None:
    """An agent that answers before its screen is seen busy: each prompt's turn ends once."""
    watch = Watch()
    assert notice(ev("session.classified", state="ready"), watch) is None
    for _ in range(2):
        assert notice(ev("session.input", input="prompt", text="hi"), watch) is None
        assert notice(ev("session.classified", state="ready"), watch) == "turn-end"
        assert notice(ev("session.classified", state="ready"), watch) is None
    assert notice(ev("session.input", input="input", text="typed, not sent"), watch) is None
    assert notice(ev("session.classified", state="ready"), watch) is None
    # seen busy as well: still one end
    assert notice(ev("session.input", input="prompt", length=3, withheld="login"), watch) is None
    assert notice(ev("session.classified", state="busy"), watch) is None
    assert notice(ev("session.classified", state="ready"), watch) == "turn-end"
    assert notice(ev("session.classified", state="ready"), watch) is None
    # a turn the agent never ended is not ended by its exit's next session
    assert notice(ev("session.input", input="prompt", text="bye"), watch) is None
    assert notice(ev("session.exited", exit={"code": 0}), watch) == "exit"
    assert notice(ev("session.classified", state="ready"), watch) is None


def test_a_supervisor_that_keeps_the_turns_is_taken_at_its_word() -> None:
    """``turn_end`` in the verdict: each true one is a turn's end, nothing else is."""
    watch = Watch()
    assert notice(ev("session.input", input="prompt", text="hi"), watch) is None
    ready = {"state": "ready", "via": "screen"}
    assert notice(ev("session.classified", **ready, turn_end=False), watch) is None
    assert notice(ev("session.classified", state="busy", turn_end=False), watch) is None
    assert notice(ev("session.classified", **ready, turn_end=True), watch) == "turn-end"
    assert notice(ev("session.classified", **ready, turn_end=True), watch) == "turn-end"  # 2nd
    assert notice(ev("session.classified", state="busy", turn_end=False), watch) is None
    assert notice(ev("session.classified", **ready, turn_end=False), watch) is None


def test_an_exit_or_a_loss_is_an_exit_and_other_events_are_nothing() -> None:
    watch = Watch()
    assert notice(ev("session.exited", exit={"code": 0}), watch) == "exit"
    assert notice(ev("session.lost", reason="supervisor-gone"), watch) == "exit"
    for kind in ("session.input", "record.created", "session.output", "node.started"):
        assert notice(ev(kind), watch) is None


def test_the_payload_names_the_event_the_record_and_the_node() -> None:
    record = {"id": "r1", "name": "n", "provider": "echo", "env": ["SECRET"], "attention": None}
    doc = json.loads(payload("exit", ev("session.exited", exit={"code": 1}), record, "lab-1"))
    assert doc["event"] == "exit" and doc["node"] == "lab-1" and doc["seq"] == 7
    assert doc["record"]["name"] == "n" and "env" not in doc["record"]
    assert doc["data"] == {"exit": {"code": 1}} and doc["kind"] == "session.exited"
    assert json.loads(payload("exit", ev("session.lost"), None, "x"))["record"]["id"] == "r1"


def test_desktop_text() -> None:
    rec = {"name": "web", "provider": "claude", "attention": "login"}
    assert desktop_text("attention", rec, ev("record.state")) == [
        "roost: web",
        "web (claude) needs you: login",
    ]
    assert desktop_text("turn-end", rec, ev("session.turn", status="failed"))[1].endswith("failed")


@pytest.mark.timeout(30)
def test_commands_run_with_the_event_and_a_hang_or_failure_is_only_logged(tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    writer = f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read())"
    path = tmp_path / "config.toml"
    path.write_text(
        "[notify]\ndesktop = false\n"
        f"[[notify.command]]\nargv = [{json.dumps(sys.executable)}, '-c', {json.dumps(writer)}]\n"
        "[[notify.command]]\nargv = ['sleep', '60']\ntimeout_s = 0.2\n"
        "[[notify.command]]\nargv = ['/no/such/program']\n"
    )

    async def lookup(rid: str) -> dict[str, Any] | None:
        return {"id": rid, "name": "n"}

    async def main() -> None:
        ctx = zmq.asyncio.Context()
        notifier = Notifier(
            ctx, "inproc://x", load(path), "node-1", lookup, {"PATH": "/usr/bin:/bin"}
        )
        await notifier.on_event(ev("session.exited", exit={"code": 0}))
        running = list(notifier._running)
        assert len(running) == 3
        await asyncio.wait_for(asyncio.gather(*running), 10)  # the hang is killed at 0.2 s
        ctx.destroy(0)

    asyncio.run(main())
    assert json.loads(out.read_text())["record"]["name"] == "n"
