"""Exact signals beside the screen, with the real CLIs against the loopback model stand-in.

codex, launched by roost with its OSC 9 notifications on, writes one as a turn ends and one as it
asks for an approval; the supervisor reads both as signals, and the verdicts they bear out say so
(``via``). For every provider, a pty turn's end is reported (``turn_end``) once, within a second of
the model's last byte, whether a signal told it or the screen alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Node, wait_for
from tests.fakes.model_api import APPROVE_COMMAND, HELLO, ModelApi
from tests.real.harness import Cli, claude_env, codex_env, kimi_env
from tests.real.test_roost_real import _activity, _env_args, _kimi_bin

END_WITHIN_S = 1.0


def _spawn(node: Node, cli: Cli, binvar: str, env: dict[str, str], cwd: Path) -> str:
    node.up()
    args = _env_args({**env, binvar: cli.argv[-1]})
    rid = str(
        node.run("spawn", cli.name, "--name", "sig", "--cwd", str(cwd), *args)["record"]["id"]
    )
    _activity(node, "sig", "ready")
    return rid


def _classified(node: Node, rid: str) -> list[dict[str, Any]]:
    return [
        e for e in node.run("events", "--id", rid)["events"] if e["kind"] == "session.classified"
    ]


def _turn_ends(node: Node, rid: str) -> list[dict[str, Any]]:
    return [e for e in _classified(node, rid) if e["data"].get("turn_end")]


def _transcript(node: Node, rid: str) -> bytes:
    return (node.state_dir / "sessions" / rid / "transcript.bin").read_bytes()


def _project(tmp_path: Path) -> Path:
    cwd = tmp_path / "work" / "proj"
    cwd.mkdir(parents=True)
    return cwd


def test_codex_osc9_tells_a_turn_s_end_and_an_approval(
    node: Node, codex: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = _project(tmp_path)
    rid = _spawn(node, codex, "ROOST_CODEX_BIN", codex_env(tmp_path / "homes", model_api, cwd), cwd)
    node.run("prompt", "sig", "hello")
    (end,) = wait_for(lambda: _turn_ends(node, rid), 60, "the turn's end")
    assert b"\x1b]9;" + HELLO.encode() + b"\x07" in _transcript(node, rid)
    assert end["data"]["state"] == "ready" and end["data"]["via"] in ("both", "signal"), end

    node.run("prompt", "sig", "APPROVETEST now")
    seen = wait_for(
        lambda: r if (r := node.record("sig"))["state"] == "attention" else None, 60, "attention"
    )
    assert seen["attention"] == "permission"
    asked = b"\x1b]9;Approval requested: " + APPROVE_COMMAND.encode() + b"\x07"
    wait_for(lambda: asked in _transcript(node, rid), 30, "the approval's OSC 9")
    verdict = wait_for(
        lambda: c if (c := node.run("show", "sig")["classification"])["via"] != "screen" else None,
        15,
        "the approval's signal named as evidence",
    )
    assert verdict["state"] == "attention" and verdict["reason"] == "permission"
    assert not (cwd.parent / "outside_by_mock.txt").exists()  # nobody answered it
    assert len(_turn_ends(node, rid)) == 1
    node.run("stop", "sig")


def _ends_within_a_second(
    node: Node, rid: str, api: ModelApi, *, stop: bool = True
) -> dict[str, Any]:
    """A SLOW answer (streamed over seconds, so a turn that ended early would show): its turn's
    end is reported once, after the model's last byte and within ``END_WITHIN_S`` of it."""
    node.run("prompt", "sig", "SLOW hello")
    (end,) = wait_for(lambda: _turn_ends(node, rid), 60, "the turn's end")
    last = api.last_byte_at(HELLO)
    assert last is not None
    print(f"turn end reported {end['ts'] - last:.3f} s after the model's last byte")
    assert 0 <= end["ts"] - last <= END_WITHIN_S, (end["ts"] - last, end)
    if stop:
        node.run("stop", "sig")
    return dict(end["data"])


def test_codex_turn_end_within_a_second_of_the_last_byte(
    node: Node, codex: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = _project(tmp_path)
    env = codex_env(tmp_path / "homes", model_api, cwd)
    end = _ends_within_a_second(node, _spawn(node, codex, "ROOST_CODEX_BIN", env, cwd), model_api)
    assert end["via"] in ("both", "signal")


def test_claude_turn_end_within_a_second_of_the_last_byte(
    node: Node, claude: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = _project(tmp_path)
    env = claude_env(tmp_path / "homes", model_api, cwd)
    _ends_within_a_second(node, _spawn(node, claude, "ROOST_CLAUDE_BIN", env, cwd), model_api)


def test_kimi_turn_end_within_a_second_of_the_last_byte(
    node: Node, kimi: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    cwd = _project(tmp_path)
    env = kimi_env(tmp_path / "homes", model_api, cwd)
    rid = _spawn(node, _kimi_bin(kimi), "ROOST_KIMI_BIN", env, cwd)
    _ends_within_a_second(node, rid, model_api)


# -- the hooks, through roost ------------------------------------------------------------------


def _said(node: Node, rid: str, event: str) -> list[dict[str, Any]]:
    """The supervisor's log lines of ``event``."""
    path = node.state_dir / "sessions" / rid / "supervisor.log"
    found = []
    for line in path.read_text().splitlines() if path.exists() else []:
        with contextlib.suppress(ValueError):
            found.append(json.loads(line))
    return [e for e in found if isinstance(e, dict) and e.get("event") == event]


def _usage_events(node: Node, rid: str, source: str) -> list[dict[str, Any]]:
    events = node.run("events", "--id", rid)["events"]
    return [
        e["data"]
        for e in events
        if e["kind"] == "session.usage" and e["data"].get("source") == source
    ]


def test_claude_through_roost_its_hooks_end_the_turn_and_its_status_line_costs(
    node: Node, claude: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    """The node writes the record's ``--settings`` file; claude runs its hooks, whose signals
    reach the supervisor's channel: SessionStart names the id roost assigned, Stop ends a
    turn ``via`` a signal within a second of the model's last byte, and the status line's cost
    is the session's usage."""
    cwd = _project(tmp_path)
    env = claude_env(tmp_path / "homes", model_api, cwd)
    rid = _spawn(node, claude, "ROOST_CLAUDE_BIN", env, cwd)
    sid = node.record("sig")["provider_session"]
    started = wait_for(lambda: _said(node, rid, "signal-session"), 30, "SessionStart's signal")
    assert started[0]["provider_session"] == sid and started[0]["how"] == "startup", started
    end = _ends_within_a_second(node, rid, model_api, stop=False)
    assert end["via"] in ("both", "signal"), end
    node.run("prompt", "sig", "/cost")  # claude's own account: "Estimated cost: $0.0126"
    screen = node.wait_screen("sig", "Estimated cost:", timeout=30)
    said = re.search(r"Estimated cost:\s+\$([0-9.]+)", screen)
    assert said is not None, screen
    cost = float(said.group(1))
    node.run("key", "sig", "escape")

    def shown() -> dict[str, Any] | None:
        usage: dict[str, Any] | None = node.run("show", "sig").get("usage")
        return usage if usage and usage["cost_usd"] == pytest.approx(cost, abs=5e-5) else None

    usage = wait_for(shown, 30, f"the status line's cost, ${cost} as /cost says")
    told = _usage_events(node, rid, "statusline")
    print(f"/cost: ${cost}; status line reports: {told}; shown: {usage}")
    assert usage["cost_usd"] > 0
    assert sum(e["usage"]["cost_usd"] for e in told) == pytest.approx(usage["cost_usd"])
    assert node.run("usage")["total"]["cost_usd"] == pytest.approx(usage["cost_usd"])
    assert not _said(node, rid, "signal-dropped"), _said(node, rid, "signal-dropped")
    node.run("stop", "sig")


def test_kimi_through_roost_with_the_integration_ends_a_turn_by_its_hook(
    node: Node, kimi: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    """``roost integrate kimi`` in kimi's home, then kimi through roost: its SessionStart hook
    teaches the session id (roost did not assign it), its Stop hook ends the turn."""
    cwd = _project(tmp_path)
    env = kimi_env(tmp_path / "homes", model_api, cwd)
    integrate = [sys.executable, "-m", "roost", "integrate", "kimi", "--json"]
    done = subprocess.run(integrate, env={**os.environ, **env}, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rid = _spawn(node, _kimi_bin(kimi), "ROOST_KIMI_BIN", env, cwd)
    end = _ends_within_a_second(node, rid, model_api, stop=False)
    assert end["via"] in ("both", "signal"), end
    sessions = _said(node, rid, "signal-session")
    assert sessions and sessions[0]["provider_session"].startswith("session_"), sessions
    assert node.record("sig")["provider_session"] == sessions[0]["provider_session"]
    assert not _said(node, rid, "signal-dropped"), _said(node, rid, "signal-dropped")
    node.run("stop", "sig")


def test_claude_s_clear_moves_the_record_to_its_new_conversation(
    node: Node, claude: Cli, model_api: ModelApi, tmp_path: Path
) -> None:
    """claude's /clear starts a new conversation with a new id in the same process, and runs
    SessionStart with source ``clear``: the record follows it (its hooks stay the session's
    own, not dropped as another CLI's), and a resume continues the new conversation."""
    cwd = _project(tmp_path)
    env = claude_env(tmp_path / "homes", model_api, cwd)
    rid = _spawn(node, claude, "ROOST_CLAUDE_BIN", env, cwd)
    sid = node.record("sig")["provider_session"]
    node.run("prompt", "sig", "greetings before")
    wait_for(lambda: _turn_ends(node, rid), 60, "the first turn's end")
    node.run("prompt", "sig", "/clear")
    rec = wait_for(
        lambda: r if (r := node.record("sig"))["provider_session"] != sid else None,
        30,
        "the new conversation's id",
    )
    new = rec["provider_session"]
    assert rec["state"] == "live" and rec["attention"] is None, rec
    cleared = [s for s in _said(node, rid, "signal-session") if s["how"] == "clear"]
    assert cleared and cleared[0]["provider_session"] == new and cleared[0]["known"] == sid
    turns = len(_turn_ends(node, rid))
    node.run("prompt", "sig", "hello again")
    wait_for(lambda: len(_turn_ends(node, rid)) > turns or None, 60, "the next turn's end")
    assert _turn_ends(node, rid)[-1]["data"]["via"] in ("both", "signal")
    assert not _said(node, rid, "signal-dropped"), _said(node, rid, "signal-dropped")
    node.run("stop", "sig")
    resumed = node.run("resume", "sig", "--wait-ready", "--ready-timeout", "60")["record"]
    assert resumed["provider_session"] == new and resumed["attention"] is None, resumed
    screen = node.wait_screen("sig", "hello again", timeout=30)
    assert "greetings before" not in screen  # the cleared conversation is not the one resumed
    node.run("stop", "sig")
