"""roost run from a directory that holds a ``roost`` package of its own (a checkout of roost, or
a repository an agent works in): every process roost starts imports the installed roost, never
the code in the caller's working directory or in a session's.

The planted ``roost/__init__.py`` appends its pid and argv to a marker file outside that
directory and exits at once, so any process that imported it leaves a line there. The CLI itself
runs as the installed ``roost`` script runs (``-P``: its own directory, never the working
directory, on ``sys.path``); what it starts, and everything below that, runs with the hostile
directory as its working directory: the daemon, its state store and adapter host, the zygote and
its forks, supervisors started without a zygote, the provider checks, ``node repair`` and the
hub.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Node, client_keys, free_port

PLANTED = """\
import os, sys
with open({marker!r}, "a") as out:
    out.write(f"{{os.getpid()}} {{sys.argv!r}}\\n")
os._exit(17)
"""


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """A directory holding a ``roost`` package that leaves a line in ``tmp_path/imported``."""
    repo = tmp_path / "repo"
    for package in ("roost", "roost/actors", "roost/actors/node", "roost/actors/supervisor"):
        (repo / package).mkdir(parents=True)
        (repo / package / "__init__.py").write_text(
            PLANTED.format(marker=str(tmp_path / "imported"))
        )
    return repo


def roost_in(node: Node, cwd: Path, *args: str, timeout: float = 90.0) -> tuple[int, Any]:
    """``roost --json ARGS`` with ``cwd`` as the working directory: 0 or 1, and its document."""
    doc = node.run(*args, check=False, timeout=timeout, cwd=cwd)
    return (1 if "error" in doc else 0), doc


def assert_untouched(hostile: Path, after: str) -> None:
    marker = hostile.parent / "imported"
    ran = marker.read_text() if marker.exists() else ""
    assert not ran, f"after {after}, processes imported the roost of the working directory:\n{ran}"


@pytest.mark.parametrize("zygote", ["1", "0"], ids=["zygote", "no-zygote"])
def test_a_node_run_from_a_hostile_directory_imports_only_the_installed_roost(
    node: Node, hostile: Path, zygote: str
) -> None:
    node.env["ROOST_ZYGOTE"] = zygote
    code, up = roost_in(node, hostile, "node", "up")
    assert_untouched(hostile, "node up")
    assert code == 0 and up["node_id"], up

    code, spawned = roost_in(node, hostile, "spawn", "echo", "--name", "pty", "--cwd", str(hostile))
    assert code == 0, spawned
    assert_untouched(hostile, "spawn of a session in that directory")
    node.run("prompt", "pty", "hello from a hostile repository")
    node.wait_screen("pty", "echo: hello from a hostile repository")
    code, streamed = roost_in(
        node,
        hostile,
        "spawn",
        "echo",
        "--name",
        "stream",
        "--mode",
        "stream",
        "--cwd",
        str(hostile),
    )
    assert code == 0, streamed
    assert node.run("turn", "stream", "a turn", "--wait")["turn"]["state"] == "completed"
    assert_untouched(hostile, "a prompt and a turn")
    supervisors = [r["active"]["pid"] for r in node.run("ls")["records"]]
    assert len(supervisors) == 2 and all(supervisors)

    _, checked = roost_in(node, hostile, "doctor")  # the adapter host's provider checks
    assert checked["providers_seen_by"] == "the node's environment", checked
    assert not [p for p in checked["providers"] if p.get("error")], checked["providers"]
    assert_untouched(hostile, "doctor with the node up")

    code, stopped = roost_in(node, hostile, "node", "stop", "--stop-sessions")
    assert code == 0 and stopped["stopped"], stopped
    code, repaired = roost_in(node, hostile, "node", "repair")
    assert code == 0 and repaired["repaired"] is False, repaired
    _, checked = roost_in(node, hostile, "doctor")  # the CLI's own provider checks
    assert checked["providers_seen_by"].startswith("this shell's"), checked
    assert not [p for p in checked["providers"] if p.get("error")], checked["providers"]
    assert_untouched(hostile, "node repair and doctor with the node down")


def test_a_hub_run_from_a_hostile_directory_imports_only_the_installed_roost(
    tmp_path: Path, hostile: Path
) -> None:
    hub = Node(tmp_path / "hub")
    try:
        hub.run("keys", "new")
        client_keys(hub, tmp_path / "me.json", "operator", "me")  # a hub needs a key it allows
        listen, events = f"tcp://127.0.0.1:{free_port()}", str(free_port())
        code, up = roost_in(hub, hostile, "hub", "up", "--listen", listen, "--events-port", events)
        assert_untouched(hostile, "hub up")
        assert code == 0 and up["hub"] is True, up
        code, stopped = roost_in(hub, hostile, "hub", "stop")
        assert code == 0 and stopped["stopped"] is True, stopped
    finally:
        hub.kill_all()
