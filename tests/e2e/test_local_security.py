"""Local security: another OS user cannot reach the node's ipc sockets; secrets stay private."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import stat
import subprocess

import pytest

from roost.client.locate import read_node_info
from tests.e2e.conftest import Node

PROBE = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "try:\n"
    "    s.connect(sys.argv[1])\n"
    "except OSError as e:\n"
    "    print(type(e).__name__); sys.exit(3)\n"
    "print('connected')\n"
)


def _other_user() -> str:
    if os.geteuid() != 0:
        pytest.skip("needs root to run a probe as a second OS user")
    for name in ("nobody", "daemon"):
        try:
            if pwd.getpwnam(name).pw_uid != 0:
                return name
        except KeyError:
            continue
    pytest.skip("no second OS user account on this machine")


def test_a_second_os_user_cannot_connect_to_the_ipc_endpoint(node: Node) -> None:
    other = _other_user()
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 that a second user can run")
    node.up()
    path = read_node_info(node.state_dir).router.removeprefix("ipc://")
    mine = subprocess.run([python, "-c", PROBE, path], capture_output=True, text=True, timeout=20)
    assert mine.stdout.strip() == "connected"  # the probe itself works
    theirs = subprocess.run(
        [python, "-c", PROBE, path], capture_output=True, text=True, timeout=20, user=other
    )
    assert theirs.returncode == 3 and theirs.stdout.strip() == "PermissionError", theirs


def test_runtime_dir_sockets_and_secrets_are_private(node: Node) -> None:
    node.up()
    info = read_node_info(node.state_dir)
    router = info.router.removeprefix("ipc://")
    runtime = os.path.dirname(router)
    assert stat.S_IMODE(os.stat(runtime).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.dirname(runtime)).st_mode) == 0o700
    for sock in (router, info.events.removeprefix("ipc://")):
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    for secret in ("token", "actor-token", "observer-token", "state.db"):
        assert stat.S_IMODE(os.stat(node.state_dir / secret).st_mode) == 0o600, secret
    token = (node.state_dir / "token").read_text().strip()
    for proc in node.processes():  # never on argv
        assert not any(token in arg for arg in proc.cmdline())
    logs = "".join(p.read_text() for p in (node.state_dir / "logs").glob("*"))
    assert token not in logs  # never logged
    with socket.socket(socket.AF_UNIX) as probe:
        probe.connect(router)  # the owner can
