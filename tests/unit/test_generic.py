"""roost/adapters/generic.py: a provider the configuration file defines, from its table: its
launches, its screens and where its session id comes from."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import time
from pathlib import Path
from typing import Any, cast

import pytest

from roost import config, providers
from roost.actors.adapter_host import AdapterActor
from roost.actors.runtime.peer import Peer
from roost.adapters.base import ATTENTION_REQUIRED, RESUMED, LaunchContext
from roost.adapters.evidence import Evidence, ProcessInfo
from roost.adapters.generic import GenericAdapter
from roost.adapters.registry import adapters
from roost.provider_spec import parse
from roost.wire import protocol as p
from roost.wire.errors import RoostError

UUID = re.compile(r"^[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}$")
BASE: dict[str, Any] = {
    "command": "quill",
    "args": ["--plain"],
    "resume": ["--resume", "{id}", "--in", "{cwd}"],
    "ready": r"^quill> ?$",
    "busy": "thinking…",
    "attention": {"permission": r"\[y/n\] ?$", "rate-limit": "usage limit"},
    "id_screen": r"session: (\S+)",
}
CTX = LaunchContext("/w/proj", "pty", {}, "/d")


def generic(**table: Any) -> GenericAdapter:
    """quill's table, with these keys (None: without the key)."""
    merged = {k: v for k, v in {**BASE, **table}.items() if v is not None}
    return GenericAdapter(parse("quill", merged))


def test_a_fresh_launch_gives_the_id_roost_chose_where_the_table_asks() -> None:
    launch = generic(fresh=["--session-id", "{new_id}"], id_screen=None).fresh(CTX)
    assert launch.argv[:3] == ["quill", "--plain", "--session-id"]
    assert launch.provider_session == launch.argv[3] and UUID.match(launch.argv[3])


def test_without_an_id_source_roost_keeps_an_id_the_cli_never_sees() -> None:
    launch = generic(resume=["--restore"], id_screen=None).fresh(CTX)
    assert launch.argv == ["quill", "--plain"] and UUID.match(launch.provider_session or "")


def test_a_cli_that_names_its_conversation_starts_without_an_id() -> None:
    launch = generic().fresh(CTX)
    assert launch == type(launch)(["quill", "--plain"], {}, None)


def test_a_resume_names_the_id_and_the_cwd() -> None:
    launch = generic().resume("abc", CTX)
    assert launch.argv == ["quill", "--plain", "--resume", "abc", "--in", "/w/proj"]
    assert launch.provider_session == "abc"


@pytest.mark.parametrize(
    ("screen", "state", "reason"),
    [
        ("Quill 0.9\nquill> ", "ready", None),
        ("Quill 0.9\nquill> hi\n⠋ thinking…", "busy", None),
        ("quill> hi\nAllow quill to write notes.txt? [y/n] ", "attention", "permission"),
        ("quill> hi\nAllow quill to write notes.txt? [y/n] y\nquill: ok\nquill> ", "ready", None),
        ("quill> hi\nusage limit reached\nquill> ", "attention", "rate-limit"),
        ("Loading…", "starting", None),
    ],
)
def test_the_screen_is_read_attention_first_then_busy_then_ready(
    screen: str, state: str, reason: str | None
) -> None:
    seen = generic().classify(screen, exited=False)
    assert (seen.state, seen.reason) == (state, reason)


def test_the_attention_detail_is_the_line_of_the_question() -> None:
    seen = generic().classify("quill> hi\nAllow quill to write notes.txt? [y/n]\n", exited=False)
    assert seen.detail == "Allow quill to write notes.txt? [y/n]"


def _proc(pid: int, name: str) -> ProcessInfo:
    return ProcessInfo(pid, 1, pid, name, f"/bin/{name}", (name,), 0.0)


def test_an_exit_and_a_foreign_shell_are_told() -> None:
    adapter = generic()
    assert adapter.classify("quill> ", exited=True).state == "exited"
    shell = Evidence(_proc(10, "quill"), 20, (_proc(20, "bash"),))
    assert adapter.classify("$ ", exited=False, evidence=shell).state == "shell"


def test_the_resume_verdict_is_the_default_one() -> None:
    adapter = generic()
    assert adapter.verify_resume("quill> ", "abc", []).outcome == RESUMED
    asking = adapter.verify_resume("Allow it? [y/n]", "abc", [])
    assert asking.outcome == ATTENTION_REQUIRED and asking.reason == "permission"


def test_the_id_on_the_screen_is_the_last_one_shown() -> None:
    adapter = generic(id_screen=r"session: ([0-9a-f-]+)")
    assert adapter.discover_identity("session: aa-1\nsession: bb-2\n", CTX, since=0) == "bb-2"
    assert adapter.discover_identity("quill> ", CTX, since=0) is None


def _file(path: Path, text: str, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime, mtime))


def test_the_id_file_is_the_newest_written_since_the_launch(tmp_path: Path) -> None:
    adapter = generic(
        id_screen=None,
        home_env="QUILL_HOME",
        id_file={"dir": "{home}/c/{cwd_sha256}", "glob": "*.json", "regex": '"id": "([^"]+)"'},
    )
    ctx = LaunchContext("/w/proj", "pty", {"QUILL_HOME": str(tmp_path)}, "/d")
    here = tmp_path / "c" / hashlib.sha256(b"/w/proj").hexdigest()
    now = time.time()
    _file(here / "old.json", '{"id": "old"}', now - 100)
    assert adapter.discover_identity("", ctx, since=now - 10) is None
    _file(here / "a.json", '{"id": "first"}', now - 2)
    _file(here / "b.json", '{"id": "second"}', now - 1)
    _file(tmp_path / "c" / "elsewhere" / "c.json", '{"id": "other cwd"}', now)
    assert adapter.discover_identity("", ctx, since=now - 10) == "second"


def test_the_id_may_be_in_the_files_path_and_home_defaults_under_the_users(
    tmp_path: Path,
) -> None:
    adapter = generic(
        id_screen=None,
        home_dir=".quill",
        id_file={"dir": "{home}/s", "glob": "*/*.jsonl", "regex": r"^(\w+)/", "search": "path"},
    )
    _file(tmp_path / ".quill" / "s" / "abc123" / "log.jsonl", "{}", time.time())
    ctx = LaunchContext("/w", "pty", {"HOME": str(tmp_path)}, "/d")
    assert adapter.discover_identity("", ctx, since=0) == "abc123"


def _write(tmp_path: Path, text: str) -> config.Config:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return config.load(path)


TABLE = """[providers.quill]
command = "no-such-quill-here"
resume = ["--resume", "{id}"]
fresh = ["--session-id", "{new_id}"]
ready = '^quill> $'
install = "pipx install quill"
"""


class Stub:
    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}


def test_the_registry_and_the_adapter_host_serve_a_defined_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(providers, "_defined", [])
    cfg = _write(tmp_path, TABLE)
    found = adapters(cfg)
    assert list(found)[-1] == "quill" and providers.defined() == ("quill",)
    actor = AdapterActor(found["quill"], cast(Peer, Stub()), cfg)
    body = {"cwd": str(tmp_path), "env": {}, "data_dir": str(tmp_path)}
    with pytest.raises(RoostError) as missing:
        asyncio.run(actor.launch(cast(p.Header, None), {**body, "mode": "pty"}))
    assert missing.value.code == "provider-missing"
    assert missing.value.detail["program"] == "no-such-quill-here"
    assert "pipx install quill" in missing.value.message
    with pytest.raises(RoostError) as stream:
        asyncio.run(actor.launch(cast(p.Header, None), {**body, "mode": "stream"}))
    assert stream.value.code == "bad-request" and "pty only" in stream.value.message


def test_the_doctor_checks_only_that_the_program_is_there(tmp_path: Path) -> None:
    from roost.adapters import doctor

    cfg = _write(tmp_path, TABLE)
    environ = {"PATH": str(tmp_path), "ROOST_CONFIG": str(cfg.path)}
    missing = doctor.check_all(["quill"], environ)["providers"][0]
    assert missing["missing"] and missing["from"] == f"file {cfg.path}:2"
    assert missing["findings"][0]["level"] == "error"
    assert missing["findings"][0]["fix"].startswith("install it (pipx install quill)")
    program = tmp_path / "no-such-quill-here"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    there = doctor.probe("quill", cfg, environ)
    assert there["path"] == str(program) and there["findings"][0]["level"] == "ok"
    unknown = doctor.check_all(["nope"], environ)["providers"][0]
    assert unknown["findings"][0]["level"] == "error"
