"""The operator's tools: the config file, notifications, doctor, logs, completion.

Each runs against a real node in the test's tmp dir, with the test's own configuration file
(``ROOST_CONFIG``, set by the harness) and, for the provider checks, small stand-in CLIs on a
private PATH that print a version and a login status as the real ones do.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import FAKES, CliError, JsonLines, Node, wait_for
from tests.e2e.test_attach import Terminal

SYSTEM_PATH = "/usr/bin:/bin"  # no vendor CLI here (checked below): the "none installed" machine


def write_config(node: Node, text: str) -> None:
    node.config.write_text(text)


def script(directory: Path, name: str, body: str) -> Path:
    """An executable stand-in ``name`` in ``directory``: a Python script."""
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(f"#!{sys.executable}\nimport sys, os, json\n{body}\n")
    path.chmod(0o755)
    return path


def notifications(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def node_log(node: Node) -> list[dict[str, Any]]:
    text = (node.state_dir / "logs" / "node.log").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(autouse=True)
def no_vendor_cli_on_the_system_path() -> None:
    for name in ("claude", "codex", "kimi"):
        assert not any(Path(d, name).exists() for d in SYSTEM_PATH.split(":")), name


# -- notifications ------------------------------------------------------------------------------


def test_notifications_fire_from_the_node_with_no_client_connected(
    node: Node, tmp_path: Path, project: Path
) -> None:
    """Attention, a turn's end and an exit each reach the command as JSON on stdin, and a
    desktop notification through notify-send; a failing and a hanging command are logged and
    hold up nothing."""
    out, desktop = tmp_path / "events.jsonl", tmp_path / "desktop.txt"
    writer = f"open({str(out)!r}, 'a').write(sys.stdin.read())"
    bindir = tmp_path / "bin"
    script(bindir, "notify-send", f"open({str(desktop)!r}, 'a').write(repr(sys.argv[1:]) + '\\n')")
    write_config(
        node,
        f"""
[notify]
desktop_on = ["attention"]

[[notify.command]]
argv = [{json.dumps(sys.executable)}, "-c", {json.dumps("import sys; " + writer)}]

[[notify.command]]
on = ["exit"]
shell = "echo failing on purpose >&2; exit 3"

[[notify.command]]
on = ["turn-end"]
argv = ["sleep", "30"]
timeout_s = 0.5
""",
    )
    node.env["PATH"] = f"{bindir}:{node.env['PATH']}"
    node.up()
    claude = [f"--env=ROOST_CLAUDE_BIN={FAKES / 'claude'}", "--env=FAKE_CLAUDE_SCREEN=permission"]
    rid = node.run("spawn", "claude", "--name", "asker", "--cwd", str(project), *claude)["record"]
    node.run("prompt", "asker", "touch it")  # the permission screen comes after this returns
    seen = wait_for(lambda: [n for n in notifications(out) if n["event"] == "attention"], 15)
    assert seen[0]["record"]["id"] == rid["id"]
    assert seen[0]["record"]["name"] == "asker" and seen[0]["record"]["attention"] == "permission"
    assert (
        seen[0]["kind"] == "record.state"
        and seen[0]["node"] == node.run("node", "status")["node_id"]
    )
    wait_for(lambda: desktop.exists() and "asker" in desktop.read_text(), 10, "notify-send")
    assert "needs you: permission" in desktop.read_text()

    node.run("spawn", "echo", "--mode", "stream", "--name", "st", "--cwd", str(project))
    node.run("turn", "st", "hello")  # accepted: the turn ends after the command has returned
    ended = wait_for(lambda: [n for n in notifications(out) if n["event"] == "turn-end"], 15)
    assert ended[0]["data"]["status"] == "completed" and ended[0]["record"]["name"] == "st"

    node.run("spawn", "echo", "--name", "quitter", "--cwd", str(project))
    node.run("prompt", "quitter", "/exit")  # the agent quits on its own
    gone = wait_for(lambda: [n for n in notifications(out) if n["event"] == "exit"], 15)
    assert gone[0]["record"]["name"] == "quitter" and gone[0]["kind"] == "session.exited"

    def logged() -> list[dict[str, Any]] | None:
        lines = node_log(node)
        return lines if {e["event"] for e in lines} >= {"notify-failed", "notify-timeout"} else None

    events = wait_for(logged, 10, "the failing and the hanging command in node.log")
    failed = next(e for e in events if e["event"] == "notify-failed")
    assert failed["exit"] == 3 and "failing on purpose" in failed["stderr"]
    assert node.run("node", "status")["actors"]["state"]["health"] == "running"


def test_each_prompt_to_the_echo_agent_ends_one_turn(node: Node, tmp_path: Path) -> None:
    """The echo agent answers before its screen is ever classified busy: each prompt typed still
    ends one turn, told once (turn-end), however short the turn."""
    out = tmp_path / "turns.jsonl"
    writer = f"import sys; open({str(out)!r}, 'a').write(sys.stdin.read())"
    write_config(
        node,
        f"""
[[notify.command]]
on = ["turn-end"]
argv = [{json.dumps(sys.executable)}, "-c", {json.dumps(writer)}]
""",
    )
    node.up()
    rid = node.run("spawn", "echo", "--name", "quick", "--wait-ready")["record"]["id"]
    for n in range(1, 4):
        node.run("prompt", "quick", f"question {n}")
        node.wait_screen("quick", f"echo: question {n}")
        wait_for(lambda: len(notifications(out)) >= n, 15, f"turn-end {n}")  # noqa: B023
    time.sleep(1.5)  # nothing more comes: one turn-end for each prompt
    told = notifications(out)
    assert [(t["event"], t["record"]["id"], t["data"]["state"]) for t in told] == [
        ("turn-end", rid, "ready")
    ] * 3


def test_two_prompts_typed_quickly_end_two_turns(node: Node, tmp_path: Path) -> None:
    """Two prompts typed before the screen is read again are two turns: two turn-ends."""
    out = tmp_path / "turns.jsonl"
    writer = f"import sys; open({str(out)!r}, 'a').write(sys.stdin.read())"
    write_config(
        node,
        f"""
[[notify.command]]
on = ["turn-end"]
argv = [{json.dumps(sys.executable)}, "-c", {json.dumps(writer)}]
""",
    )
    node.up()
    rid = node.run("spawn", "echo", "--name", "quick", "--wait-ready")["record"]["id"]
    node.run("prompt", "quick", "first")
    node.run("prompt", "quick", "second")
    node.wait_screen("quick", "echo: second")
    wait_for(lambda: len(notifications(out)) >= 2, 15, "two turn-ends")
    time.sleep(1.5)  # nothing more comes
    assert [(t["event"], t["record"]["id"]) for t in notifications(out)] == [("turn-end", rid)] * 2


def test_node_up_refuses_a_config_file_it_cannot_use(node: Node) -> None:
    write_config(node, '[spawn]\nmode = "pty"\n\n[notify]\ndesktop = "yes"\n')
    err = node.error("node", "up")
    assert err["code"] == "config-invalid"
    assert err["detail"] == {"file": str(node.config), "key": "notify.desktop", "line": 5}
    assert f"{node.config}:5" in err["message"]
    write_config(node, "[spawn]\nmodes = 'pty'\n")
    err = node.error("node", "up")
    assert err["detail"]["key"] == "spawn.modes" and err["detail"]["line"] == 2


# -- the config file in force -----------------------------------------------------------------


def test_the_file_names_the_provider_binary_and_env_and_the_spawn_defaults(
    node: Node, tmp_path: Path, project: Path
) -> None:
    home, other = tmp_path / "claude-home", tmp_path / "other-home"
    write_config(
        node,
        f"""
[providers.claude]
bin = {json.dumps(str(FAKES / "claude"))}
env = {{ CLAUDE_CONFIG_DIR = {json.dumps(str(home))} }}

[spawn]
mode = "stream"
size = "30x90"
env = {{ FROM_CONFIG = "1" }}
""",
    )
    node.env.pop("ROOST_CLAUDE_BIN", None)
    node.up()
    rec = node.run("spawn", "claude", "--name", "c", "--cwd", str(project))["record"]
    assert rec["mode"] == "stream" and (rec["rows"], rec["cols"]) == (30, 90)
    assert "FROM_CONFIG" in rec["env"]
    turn = node.run("turn", "c", "hi", "--wait")["turn"]
    assert turn["state"] == "completed", turn
    assert list(home.glob("projects/*/*.jsonl")), "the file's CLAUDE_CONFIG_DIR reached claude"
    # flags and the record's --env win over the file
    node.run("spawn", "claude", "--name", "p", "--mode", "pty", "--cwd", str(project))
    assert node.record("p")["mode"] == "pty"
    env = f"--env=CLAUDE_CONFIG_DIR={other}"
    node.run("spawn", "claude", "--name", "o", "--cwd", str(project), env)
    node.run("turn", "o", "hi", "--wait")
    assert list(other.glob("projects/*/*.jsonl")) and len(list(home.glob("projects/*/*"))) == 1


def test_config_show_says_where_each_value_came_from(node: Node) -> None:
    write_config(node, '[providers.codex]\nbin = "/opt/codex"\n\n[attach]\ndetach_key = "ctrl-a"\n')
    node.env["ROOST_CODEX_BIN"] = "/from/env/codex"
    doc = node.run("config", "show")
    values = {v["key"]: v for v in doc["values"]}
    assert values["providers.codex.bin"]["value"] == "/from/env/codex"  # the variable wins
    assert values["providers.codex.bin"]["source"] == {"kind": "env", "where": "ROOST_CODEX_BIN"}
    assert values["attach.detach_key"]["source"] == {"kind": "file", "where": f"{node.config}:5"}
    assert values["spawn.mode"] == {**values["spawn.mode"], "value": "pty", "from": "default"}
    assert values["config_file"]["source"]["where"] == "ROOST_CONFIG"
    flag = node.run("--state-dir", str(node.state_dir), "config", "show")["values"]
    assert {v["key"]: v["from"] for v in flag}["state_dir"] == "flag --state-dir"
    text = subprocess.run(
        [sys.executable, "-m", "roost", "config", "show"],
        env=node.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "providers.codex.bin" in text and "(env ROOST_CODEX_BIN)" in text


def test_the_detach_key_comes_from_the_file(node: Node, project: Path) -> None:
    write_config(node, '[attach]\ndetach_key = "ctrl-a"\n')
    node.up()
    node.run("spawn", "echo", "--name", "e", "--cwd", str(project))
    term = Terminal(node, "e")
    try:
        term.wait_text("Ctrl-A detaches")
        term.type(b"\x01")
        term.wait_text("detached from")
        assert term.wait_exit() == 0
    finally:
        term.close()
    assert node.record("e")["state"] == "live"


# -- doctor and node status --------------------------------------------------------------------


def stand_ins(bindir: Path, *, codex_version: str = "0.171.0") -> None:
    """claude 2.1.332 logged in, codex logged out (its status names a key tail), legacy kimi."""
    script(
        bindir,
        "claude",
        "if sys.argv[1:] == ['--version']: print('2.1.332 (Claude Code)')\n"
        "elif sys.argv[1:3] == ['auth', 'status']:\n"
        "    print(json.dumps({'loggedIn': True, 'authMethod': 'api_key', 'email': 'a@b.c'}))",
    )
    script(
        bindir,
        "codex",
        f"if sys.argv[1:] == ['--version']: print('codex-cli {codex_version}')\n"
        "elif sys.argv[1:3] == ['login', 'status']: print('Not logged in'); sys.exit(1)",
    )
    script(bindir, "kimi", "print('kimi, version 1.52.0'); print('kimi-cli is deprecated')")


def doctor(node: Node) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "roost", "--json", "doctor"],
        env=node.env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    return proc.returncode, json.loads(proc.stdout)


def by_provider(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["provider"]: p for p in doc["providers"]}


@pytest.mark.parametrize("running", [False, True], ids=["node-down", "node-up"])
def test_doctor_with_stand_in_clis(node: Node, tmp_path: Path, running: bool) -> None:
    stand_ins(tmp_path / "bin", codex_version="0.150.2")
    node.env["PATH"] = f"{tmp_path / 'bin'}:{SYSTEM_PATH}"
    for var in ("ROOST_CLAUDE_BIN", "ROOST_CODEX_BIN", "ROOST_KIMI_BIN"):
        node.env.pop(var, None)
    if running:
        node.up()
    code, doc = doctor(node)
    seen = by_provider(doc)
    assert doc["providers_seen_by"].startswith("the node's" if running else "this shell's")
    assert seen["claude"]["version"] == "2.1.332" and seen["claude"]["login"] == "logged-in"
    assert seen["claude"]["path"] == str(tmp_path / "bin" / "claude")
    assert seen["codex"]["version"] == "0.150.2" and seen["codex"]["login"] == "logged-out"
    levels = {p: [f["level"] for f in rep["findings"]] for p, rep in seen.items()}
    assert levels["claude"] == ["ok", "ok"]
    assert levels["codex"] == ["warn", "warn"]  # a version roost does not know; logged out
    assert levels["kimi"] == ["error"]  # the legacy kimi-cli
    assert "legacy" in seen["kimi"]["findings"][0]["what"] and seen["kimi"]["findings"][0]["fix"]
    assert code == 1 and doc["ok"] is False
    assert "a@b.c" not in json.dumps(doc)  # only the verdict and method of a status, never more
    node_findings = [f for f in doc["findings"] if f["area"] == "node"]
    assert node_findings[0]["level"] == ("ok" if running else "warn")


def test_doctor_with_no_cli_installed(node: Node) -> None:
    node.env["PATH"] = SYSTEM_PATH
    for var in ("ROOST_CLAUDE_BIN", "ROOST_CODEX_BIN", "ROOST_KIMI_BIN"):
        node.env.pop(var, None)
    node.up()
    code, doc = doctor(node)
    for provider, rep in by_provider(doc).items():
        assert rep["missing"] is True and rep["looked_for"] == provider
        assert [f["level"] for f in rep["findings"]] == ["warn"]
        assert "install" in rep["findings"][0]["fix"]
    assert code == 0 and doc["ok"] is True  # nothing is broken: nothing is installed
    assert {f["area"] for f in doc["findings"]} >= {"config", "node", "endpoints", "files"}


def test_doctor_finds_a_secret_others_may_read(node: Node) -> None:
    node.up()
    token = node.state_dir / "token"
    token.chmod(0o644)
    code, doc = doctor(node)
    bad = [f for f in doc["findings"] if f["area"] == "files" and f["level"] == "error"]
    assert code == 1 and bad and f"chmod 600 {token}" == bad[0]["fix"]
    assert stat.S_IMODE(token.stat().st_mode) == 0o644  # doctor reports, never changes


def test_node_status_says_missing_for_an_adapter_without_its_cli(node: Node) -> None:
    """`node status` says an adapter is missing when its CLI is not installed."""
    node.env["PATH"] = SYSTEM_PATH
    node.env.pop("ROOST_CLAUDE_BIN", None)
    node.env["ROOST_KIMI_BIN"] = str(FAKES / "kimi")
    node.up()
    actors = node.run("node", "status")["actors"]
    assert actors["adapter/claude"]["missing"] is True
    assert actors["adapter/claude"]["looked_for"] == "claude"
    assert actors["adapter/kimi"]["missing"] is False
    text = subprocess.run(
        [sys.executable, "-m", "roost", "node", "status"],
        env=node.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(ln for ln in text.splitlines() if "adapter/claude" in ln)
    assert "missing" in line and "no claude on PATH" in line and "registered" not in line


# -- completion ---------------------------------------------------------------------------------


def complete(node: Node, words: str) -> list[str]:
    """What bash completion offers for ``words`` (the last word is being completed)."""
    env = {
        **node.env,
        "_ROOST_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "roost"], env=env, capture_output=True, text=True, timeout=20
    )
    return [line.split(",", 1)[1] for line in proc.stdout.splitlines() if "," in line]


def test_completion_offers_records_from_the_node_providers_and_keys(
    node: Node, project: Path
) -> None:
    started = time.monotonic()
    assert complete(node, "roost show ") == []  # no node: nothing, and at once
    assert time.monotonic() - started < 5
    node.up()
    rid = node.run("spawn", "echo", "--name", "shepherd", "--cwd", str(project))["record"]["id"]
    assert complete(node, "roost show sh") == ["shepherd"]
    assert set(complete(node, "roost attach ")) == {"shepherd", rid}
    assert complete(node, "roost events --id sh") == ["shepherd"]
    assert complete(node, "roost spawn ") == ["echo", "claude", "codex", "kimi"]
    assert complete(node, "roost key shepherd shi") == ["shift-tab"]
    assert "pageup" in complete(node, "roost key shepherd ")
    assert "_ROOST_COMPLETE=bash_complete" in node.run("completion", "bash")["script"]
    assert "_ROOST_COMPLETE" in node.run("completion", "fish")["script"]


ODD = ("Fix Login!", "a, b 🚀 $(x) *")  # names a shell would split, expand or glob


def bash_completes(node: Node, *words: str) -> list[str]:
    """What real bash, with the script of ``roost completion bash``, puts in COMPREPLY for
    ``words`` (the last one being completed): each entry as bash would insert it."""
    script = node.run("completion", "bash")["script"]
    env = {**node.env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{node.env['PATH']}"}
    probe = (
        f"{script}\n"
        f"COMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}\n"
        "_roost_completion roost\n"
        'printf "%s\\0" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", probe],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    return [w for w in proc.stdout.split("\0") if w]


def shell_words(inserted: str) -> list[str]:
    """The words bash makes of a command line holding ``inserted``."""
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", f'printf "%s\\0" {inserted}'],
        capture_output=True,
        text=True,
        timeout=10,
        cwd="/",
    )
    return [w for w in proc.stdout.split("\0") if w]


def test_completion_quotes_names_a_shell_would_split(
    node: Node, project: Path, tmp_path: Path
) -> None:
    """A name with spaces, punctuation or emoji completes as one word: bash inserts it escaped
    (``roost show Fix\\ Login\\!`` runs), zsh gets it whole on its own line (its ``compadd``
    quotes it), fish's script splits each line at its first comma only."""
    node.up()
    for name in ODD:
        node.run("spawn", "echo", "--name", name, "--cwd", str(project))
    (fix,) = bash_completes(node, "roost", "show", "Fix")
    assert shell_words(fix) == ["Fix Login!"], fix
    (odd,) = bash_completes(node, "roost", "attach", "a,")
    assert shell_words(odd) == [ODD[1]], odd
    (again,) = bash_completes(node, "roost", "show", "Fix\\ L")  # a word typed escaped
    assert shell_words(again) == ["Fix Login!"], again
    assert node.run("show", shell_words(fix)[0])["record"]["name"] == "Fix Login!"
    zsh = subprocess.run(
        [sys.executable, "-m", "roost"],
        env={
            **node.env,
            "_ROOST_COMPLETE": "zsh_complete",
            "COMP_WORDS": "roost show a",
            "COMP_CWORD": "2",
        },
        capture_output=True,
        text=True,
        timeout=20,
    ).stdout.splitlines()
    assert zsh[:2] == ["plain", ODD[1]], zsh
    fish_script = node.run("completion", "fish")["script"]
    assert 'string split -m 1 ","' in fish_script, fish_script
    fish = subprocess.run(
        [sys.executable, "-m", "roost"],
        env={
            **node.env,
            "_ROOST_COMPLETE": "fish_complete",
            "COMP_WORDS": "roost show a",
            "COMP_CWORD": "a",
        },
        capture_output=True,
        text=True,
        timeout=20,
    ).stdout.splitlines()
    assert [line.split(",", 1)[1].split("\t")[0] for line in fish] == [ODD[1]], fish
    if shutil.which("fish"):  # fish itself, where it is installed: the candidates it offers
        script = tmp_path / "roost.fish"
        script.write_text(fish_script)
        env = {**node.env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{node.env['PATH']}"}
        for typed, whole in (("Fix", ODD[0]), ("a,", ODD[1])):
            offered = subprocess.run(
                ["fish", "--no-config", "-c", f'source {script}; complete -C "roost show {typed}"'],
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout
            assert [line.split("\t")[0] for line in offered.splitlines()] == [whole], offered


# -- logs ---------------------------------------------------------------------------------------


def test_logs_json_is_one_document_and_a_clean_stop_warns_of_nothing(node: Node) -> None:
    """``logs --json`` prints one document, as every command's ``--json`` does (``--follow``:
    one line each); a clean ``node stop`` says its children stopped, not that they exited."""
    node.up()
    node.run("node", "stop")
    proc = subprocess.run(
        [sys.executable, "-m", "roost", "--json", "logs", "--lines", "1000"],
        env=node.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 1, proc.stdout[:2000]
    lines = json.loads(proc.stdout)["lines"]
    assert any(x.get("event") == "node-serving" for x in lines), lines
    stopped = [x for x in lines if x.get("event") == "child-stopped"]
    assert {x["child"] for x in stopped} == {"state", "adapters"}, stopped
    warned = [x for x in lines if x.get("level") in ("warning", "error")]
    assert warned == [], warned


def test_logs_readable_json_and_followed_across_a_rotation(node: Node, project: Path) -> None:
    node.up()
    text = subprocess.run(
        [sys.executable, "-m", "roost", "logs"],
        env=node.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    serving = next(ln for ln in text.splitlines() if "node-serving" in ln)
    assert " INFO " in serving and "[node]" in serving and "node_id=" in serving
    assert serving[:4].isdigit() and serving[10] == " "  # starts with the date and time
    rid = node.run("spawn", "echo", "--name", "e", "--cwd", str(project))["record"]["id"]
    follower = JsonLines(node.env, "logs", "e", "--follow", "--lines", "1")
    try:
        follower.get()  # the last line so far: it reads, so what comes next is new
        node.run("stop", "e")
        wait_for(
            lambda: any(x.get("event") == "agent-exited" for x in follower.drain()), 15, "exit"
        )
        log = node.state_dir / "sessions" / rid / "supervisor.log"
        os.replace(log, log.with_suffix(".log.1"))  # rotated away: a new file takes its place
        log.write_text(json.dumps({"event": "after-rotation", "level": "info"}) + "\n")
        wait_for(
            lambda: any(x.get("event") == "after-rotation" for x in follower.drain()), 10, "new"
        )
    finally:
        follower.close()
    lines = node.run("logs", rid, "--lines", "3")["lines"]  # --json: the file's own lines
    assert lines[-1].get("event") == "after-rotation"
    with pytest.raises(CliError) as err:
        node.run("logs", "nosuch")
    assert err.value.code == "not-found"
