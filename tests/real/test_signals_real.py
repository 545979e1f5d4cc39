"""Exact signals beside the screen, with the real CLIs against the loopback model stand-in.

codex, launched by roost with its OSC 9 notifications on, writes one as a turn ends and one as it
asks for an approval; the supervisor reads both as signals, and the verdicts they bear out say so
(``via``). For every provider, a pty turn's end is reported (``turn_end``) once, within a second of
the model's last byte, whether a signal told it or the screen alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def _ends_within_a_second(node: Node, rid: str, api: ModelApi) -> dict[str, Any]:
    """A SLOW answer (streamed over seconds, so a turn that ended early would show): its turn's
    end is reported once, after the model's last byte and within ``END_WITHIN_S`` of it."""
    node.run("prompt", "sig", "SLOW hello")
    (end,) = wait_for(lambda: _turn_ends(node, rid), 60, "the turn's end")
    last = api.last_byte_at(HELLO)
    assert last is not None
    print(f"turn end reported {end['ts'] - last:.3f} s after the model's last byte")
    assert 0 <= end["ts"] - last <= END_WITHIN_S, (end["ts"] - last, end)
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
