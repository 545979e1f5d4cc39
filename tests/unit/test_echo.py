"""The echo provider: its adapter and the echo agent program (roost.adapters.echo*)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from roost.adapters.base import BUSY, EXITED, READY, STARTING, LaunchContext
from roost.adapters.echo import AGENT_MODULE, EchoAdapter
from roost.adapters.echo_agent import PROMPT

CTX = LaunchContext(cwd="/work", mode="pty", env={}, data_dir="/data/echo")
BANNER = "roost echo agent 1 - answers every line with 'echo: <line>'; /exit quits"


# -- adapter -------------------------------------------------------------------------------------


def test_fresh_assigns_a_uuid_identity() -> None:
    launch = EchoAdapter().fresh(CTX)
    assert launch.provider_session is not None
    assert str(uuid.UUID(launch.provider_session)) == launch.provider_session
    assert launch.argv == [
        sys.executable,
        "-m",
        AGENT_MODULE,
        "--session-id",
        launch.provider_session,
    ]
    assert launch.env == {"ROOST_ECHO_HOME": "/data/echo"}


def test_fresh_identities_differ() -> None:
    adapter = EchoAdapter()
    assert adapter.fresh(CTX).provider_session != adapter.fresh(CTX).provider_session


def test_resume_uses_the_same_identity() -> None:
    adapter = EchoAdapter()
    session = adapter.fresh(CTX).provider_session
    assert session is not None
    launch = adapter.resume(session, CTX)
    assert launch.argv == [sys.executable, "-m", AGENT_MODULE, "--resume", session]
    assert launch.provider_session == session


def test_an_echo_home_in_the_record_env_is_left_alone() -> None:
    ctx = LaunchContext(cwd="/", mode="pty", env={"ROOST_ECHO_HOME": "/mine"}, data_dir="/d")
    assert EchoAdapter().fresh(ctx).env == {}
    assert EchoAdapter().resume("abc", ctx).env == {}


@pytest.mark.parametrize(
    ("screen", "state"),
    [
        ("", STARTING),
        ("\n   \n", STARTING),
        (f"{BANNER}\nsession abc\n{PROMPT}", READY),
        (f"{BANNER}\nsession abc\n{PROMPT}\n\n\n", READY),
        (f"{PROMPT}echo: hi\n{PROMPT}half-typed", READY),
        (f"{BANNER}\nsession abc", BUSY),
        (f"{PROMPT}hello\necho: hello", BUSY),
        ("  echo-ready> ", BUSY),
    ],
)
def test_classify(screen: str, state: str) -> None:
    assert EchoAdapter().classify(screen, exited=False).state == state


@pytest.mark.parametrize("screen", ["", f"{BANNER}\n{PROMPT}", "echo: x"])
def test_classify_exited(screen: str) -> None:
    assert EchoAdapter().classify(screen, exited=True).state == EXITED


# -- the agent program ---------------------------------------------------------------------------


def run_agent(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ROOST_ECHO_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", AGENT_MODULE, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


def test_fresh_session_answers_and_records_turns(tmp_path: Path) -> None:
    result = run_agent(tmp_path, "--session-id", "s1", stdin="hello\n\nsecond turn\n")
    assert result.returncode == 0, result.stderr
    assert "session s1" in result.stdout
    assert "echo: hello\n" in result.stdout
    assert "echo: second turn\n" in result.stdout
    lines = (tmp_path / "sessions" / "s1.jsonl").read_text().splitlines()
    turns = [json.loads(line) for line in lines]
    assert [(t["user"], t["assistant"]) for t in turns] == [
        ("hello", "echo: hello"),
        ("second turn", "echo: second turn"),
    ]


def test_resume_counts_the_turns(tmp_path: Path) -> None:
    run_agent(tmp_path, "--session-id", "s1", stdin="one\ntwo\nthree\n")
    result = run_agent(tmp_path, "--resume", "s1", stdin="four\n/exit\nnot sent\n")
    assert result.returncode == 0, result.stderr
    assert "resumed s1 (3 turns)" in result.stdout
    assert "echo: four" in result.stdout
    assert "not sent" not in result.stdout
    assert len((tmp_path / "sessions" / "s1.jsonl").read_text().splitlines()) == 4


def test_resume_of_an_unknown_id_fails(tmp_path: Path) -> None:
    result = run_agent(tmp_path, "--resume", "never-made", stdin="hi\n")
    assert result.returncode == 2
    assert "never-made" in result.stderr
    assert "echo: hi" not in result.stdout
    assert not (tmp_path / "sessions" / "never-made.jsonl").exists()


def test_fresh_with_an_existing_id_fails(tmp_path: Path) -> None:
    run_agent(tmp_path, "--session-id", "s1", stdin="one\n")
    result = run_agent(tmp_path, "--session-id", "s1", stdin="two\n")
    assert result.returncode == 2
    assert len((tmp_path / "sessions" / "s1.jsonl").read_text().splitlines()) == 1
