"""A provider defined in the configuration file, end to end: a real node runs the made-up CLI
tests/fakes/quill ("a fourth vendor") in a real PTY, known to roost only by its
``[providers.quill]`` table: its launches, its session files and its screens.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import FAKES, Node, activity, wait_for
from tests.e2e.test_ops import complete

FAKE = FAKES / "quill"
SCREENS = r"""ready = '^quill> ?$'
busy = 'thinking…'
home_env = "QUILL_HOME"
"""
# the question while it waits: once answered, its line ends with the answer
ATTENTION = r"""
[providers.{name}.attention]
permission = 'Allow quill to .*\? \[y/n\] ?$'
"""
RESUME = 'resume = ["--resume", "{id}"]'
FROM_FILE = """
[providers.{name}.id_file]
dir = "{{home}}/conversations"
glob = "*.json"
regex = '"id": "([0-9a-f-]{{36}})"'
"""
FROM_ARGUMENT = 'fresh = ["--session-id", "{new_id}"]'
BUSY_1500 = "QUILL_BUSY_MS=1500"


def provider(name: str, command: str, home: Path, from_file: bool = False) -> str:
    """A ``[providers.NAME]`` table for quill: its session id from its files, or (without
    ``from_file``) given by roost as ``--session-id``."""
    return f"""
[providers.{name}]
command = {json.dumps(command)}
env = {{ QUILL_HOME = {json.dumps(str(home))} }}
{RESUME}
{"" if from_file else FROM_ARGUMENT}
{SCREENS}{ATTENTION.format(name=name)}{FROM_FILE.format(name=name) if from_file else ""}"""


def notify_to(path: Path) -> str:
    writer = f"import sys; open({str(path)!r}, 'a').write(sys.stdin.read())"
    return f"""
[[notify.command]]
on = ["attention", "turn-end"]
argv = [{json.dumps(sys.executable)}, "-c", {json.dumps(writer)}]
"""


def told(path: Path, event: str) -> list[dict[str, Any]]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [n for n in map(json.loads, filter(None, lines)) if n["event"] == event]


def conversations(home: Path) -> dict[str, dict[str, Any]]:
    files = sorted((home / "conversations").glob("*.json"))
    return {p.stem: json.loads(p.read_text()) for p in files}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "quill-home"


def test_a_configured_provider_lives_answers_and_resumes_after_a_node_restart(
    node: Node, project: Path, home: Path, tmp_path: Path
) -> None:
    told_path = tmp_path / "told.jsonl"
    node.config.write_text(provider("quill", str(FAKE), home, True) + notify_to(told_path))
    node.up()
    # a busy line of 1.5 s: longer than the classifier's pace while output flows (a round a
    # second), so a round reads it however late the CLI draws it after the prompt
    spawned = node.run("spawn", "quill", "--name", "q", "--cwd", str(project), "--env", BUSY_1500)
    rec = spawned["record"]
    assert rec["provider"] == "quill" and rec["state"] == "live" and rec["mode"] == "pty"
    assert rec["provider_session"] is None  # quill names its conversation itself
    activity(node, "q", "ready")
    node.run("prompt", "q", "hello quill")
    node.wait_screen("q", "quill: you said hello quill")
    [sid] = conversations(home)  # the file quill wrote for this launch
    learned = wait_for(
        lambda: r if (r := node.record("q"))["provider_session"] else None, 10, "the identity"
    )
    assert learned["provider_session"] == sid
    ended = wait_for(lambda: told(told_path, "turn-end"), 15, "the turn-end notification")
    assert ended[0]["record"]["name"] == "q" and ended[0]["data"]["state"] == "ready"
    busy = [e for e in node.events() if e["kind"] == "session.classified"]
    assert "busy" in [e["data"]["state"] for e in busy]  # the busy line was read as busy

    node.run("stop", "q")
    node.run("node", "stop")
    node.up()
    resumed = node.run("resume", "q")["record"]
    assert resumed["generation"] == 2 and resumed["provider_session"] == sid
    node.wait_screen("q", f"session: {sid}")
    node.wait_screen("q", "quill: you said hello quill")  # the conversation so far, shown again
    verdict = wait_for(
        lambda: [e for e in node.events() if e["kind"] == "session.resume"], 15, "the verdict"
    )
    assert verdict[0]["data"]["outcome"] == "resumed"
    node.run("prompt", "q", "and again")
    node.wait_screen("q", "quill: you said and again")
    wait_for(lambda: len(conversations(home)[sid]["turns"]) == 2, 10, "the second turn saved")
    assert list(conversations(home)) == [sid]  # one conversation, continued
    identities = [e["data"] for e in node.events() if e["kind"] == "session.identity"]
    assert {i["provider_session"] for i in identities} == {sid}
    assert not any(i.get("mismatch") for i in identities)


def test_a_question_on_its_screen_is_reported_and_not_answered(
    node: Node, project: Path, home: Path, tmp_path: Path
) -> None:
    told_path = tmp_path / "told.jsonl"
    node.config.write_text(provider("quill", str(FAKE), home) + notify_to(told_path))
    node.up()
    spawned = node.run("spawn", "quill", "--cwd", str(project), "--env", "QUILL_ASK=1")
    rid, sid = spawned["record"]["id"], spawned["record"]["provider_session"]
    assert sid and list(conversations(home)) in ([], [sid])  # roost chose the id: {new_id}
    activity(node, rid, "ready")
    node.run("prompt", rid, "write the notes")
    seen = activity(node, rid, "attention")
    assert seen["attention"] == "permission"
    said = wait_for(lambda: told(told_path, "attention"), 15, "the attention notification")
    assert said[0]["record"]["attention"] == "permission"
    assert "Allow quill to write notes.txt? [y/n]" in node.screen(rid)
    typed = [e["kind"] for e in node.events() if e["kind"] in ("session.input", "session.key")]
    assert typed == ["session.input"]  # the prompt, and nothing typed for the question
    node.run("send", rid, "y")
    node.wait_screen(rid, "quill: you said write the notes")
    activity(node, rid, "ready")
    assert list(conversations(home)) == [sid]


def test_a_configured_provider_gets_the_refusals_of_the_built_in_ones(
    node: Node, project: Path, home: Path
) -> None:
    tables = provider("quill", str(FAKE), home)
    tables += provider("ghost", "no-such-ghost-cli", home).replace(
        "]\ncommand", ']\ninstall = "pipx install ghost"\ncommand'
    )
    node.config.write_text(tables)
    node.up()
    missing = node.error("spawn", "ghost", "--cwd", str(project))
    assert missing["code"] == "provider-missing"
    assert "no-such-ghost-cli" in missing["message"] and "pipx install ghost" in missing["message"]
    stream = node.error("spawn", "quill", "--mode", "stream", "--cwd", str(project))
    assert stream["code"] == "bad-request" and "pty only" in stream["message"]
    unknown = node.error("spawn", "quil", "--cwd", str(project))
    assert unknown["code"] == "unknown-provider" and "quill" in unknown["detail"]["known"]
    assert node.run("ls")["records"] == []  # nothing refused left a record
    actors = node.run("node", "status")["actors"]
    assert actors["adapter/quill"]["path"] == str(FAKE) and actors["adapter/ghost"]["missing"]
    assert complete(node, "roost spawn ") == ["echo", "claude", "codex", "kimi", "quill", "ghost"]
    checked = node.run("doctor", check=False)["providers"]
    ghost = next(r for r in checked if r["provider"] == "ghost")["findings"]
    assert ghost[0]["level"] == "error" and "pipx install ghost" in ghost[0]["fix"]
    quill = next(r for r in checked if r["provider"] == "quill")["findings"]
    assert quill[0]["level"] == "ok"


def test_node_up_refuses_a_provider_table_it_cannot_use(node: Node, home: Path) -> None:
    table = provider("quill", str(FAKE), home).replace("'^quill> ?$'", "'(quill'")
    node.config.write_text(table)
    err = node.error("node", "up")
    assert err["code"] == "config-invalid"
    line = table.splitlines().index("ready = '(quill'") + 1
    assert err["detail"] == {"file": str(node.config), "key": "providers.quill.ready", "line": line}


def test_a_record_whose_provider_is_no_longer_defined_is_refused_not_launched(
    node: Node, project: Path, home: Path
) -> None:
    node.config.write_text(provider("quill", str(FAKE), home))
    node.up()
    rid = node.run("spawn", "quill", "--cwd", str(project), "--wait-ready")["record"]["id"]
    node.run("stop", rid)
    node.run("node", "stop")
    node.config.write_text("")
    node.up()
    err = node.error("resume", rid)
    assert err["code"] == "unknown-provider" and "quill" not in err["detail"]["known"]
    assert node.record(rid)["state"] == "dormant"


def test_a_power_cut_restores_a_defined_providers_session_by_its_id(
    node: Node, project: Path, home: Path
) -> None:
    """Every roost process and the CLI SIGKILLed at once; ``node up`` resumes the record by the
    id roost gave quill, into the same conversation."""
    node.config.write_text("[node]\nrestore_pause_s = 0\n" + provider("quill", str(FAKE), home))
    node.up()
    cmd = ("spawn", "quill", "--name", "q", "--cwd", str(project), "--restore", "resume")
    spawned = node.run(*cmd)["record"]
    rid, sid = spawned["id"], spawned["provider_session"]
    activity(node, rid, "ready")
    node.run("prompt", rid, "before the cut")
    node.wait_screen(rid, "quill: you said before the cut")
    node.kill_all()
    assert not node.processes()
    restore = node.up("--restore-wait", "120")["restore"]
    assert [(x["name"], x["outcome"]) for x in restore["outcomes"]] == [("q", "resumed")]
    back = node.record(rid)
    assert back["state"] == "live" and back["generation"] == 2 and back["provider_session"] == sid
    node.wait_screen(rid, "quill: you said before the cut")
    assert list(conversations(home)) == [sid]


def test_the_id_may_come_from_the_screen(node: Node, project: Path, home: Path) -> None:
    table = provider("quill", str(FAKE), home).replace(
        FROM_ARGUMENT, "id_screen = 'session: ([0-9a-f-]{36})'"
    )
    node.config.write_text(table)
    node.up()
    rec = node.run("spawn", "quill", "--cwd", str(project))["record"]
    assert rec["provider_session"] is None  # quill names it, and shows it
    learned = wait_for(
        lambda: r if (r := node.record(rec["id"]))["provider_session"] else None, 10, "the id"
    )
    assert [learned["provider_session"]] == list(conversations(home))


def test_a_screen_busy_while_a_prompt_is_typed_is_the_prompt_s_turn(
    node: Node, project: Path, home: Path, tmp_path: Path
) -> None:
    """A CLI whose screen reads busy as a prompt is typed, before its submit key (codex flashes
    its title's spinner so), with a submit delay that lets a round read it: each prompt is one
    turn, its end told once."""
    told_path = tmp_path / "told.jsonl"
    table = provider("quill", str(FAKE), home).replace(RESUME, RESUME + "\nsubmit_delay_s = 0.4")
    node.config.write_text(table + notify_to(told_path))
    node.up()
    spawned = node.run("spawn", "quill", "--cwd", str(project), "--env", "QUILL_FLASH=1")
    rid = spawned["record"]["id"]
    activity(node, rid, "ready")
    for n in range(1, 4):
        node.run("prompt", rid, f"prompt {n}")
        node.wait_screen(rid, f"quill: you said prompt {n}")
        wait_for(lambda: len(told(told_path, "turn-end")) >= n, 15, f"turn {n}'s end")  # noqa: B023
        activity(node, rid, "ready")
    classified = [e["data"] for e in node.events() if e["kind"] == "session.classified"]
    assert sum(1 for c in classified if c.get("turn_end")) == 3, classified
    assert len(told(told_path, "turn-end")) == 3
