"""Running the node as systemd runs it (deploy/systemd/roost-node.service): `node up --foreground`
as the main process of a Type=notify unit (READY=1 on $NOTIFY_SOCKET once it serves, from the
same pid), stopped with SIGTERM to that pid only (KillMode=process): the sessions run on and
answer the next daemon. And `node install-service` writing and enabling the unit, with a
systemctl stand-in that records what it was asked."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from roost.cli import service
from tests.e2e.conftest import Node, alive, wait_for


@pytest.fixture
def notify(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify.sock")
    sock.bind(path)
    sock.settimeout(30)
    try:
        yield sock, path
    finally:
        sock.close()


def foreground(node: Node, notify_path: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "roost", "node", "up", "--foreground"],
        env={**node.env, "NOTIFY_SOCKET": notify_path},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def ready(sock: socket.socket) -> dict[str, str]:
    while True:
        lines = sock.recv(4096).decode().splitlines()
        fields = dict(line.split("=", 1) for line in lines if "=" in line)
        if fields.get("READY") == "1":
            return fields


def test_a_foreground_node_is_the_service_and_a_sigterm_spares_the_sessions(
    node: Node, notify: tuple[socket.socket, str]
) -> None:
    sock, path = notify
    daemon = foreground(node, path)
    try:
        fields = ready(sock)
        assert fields["MAINPID"] == str(daemon.pid)  # the CLI became the daemon: one pid
        assert node.pid() == daemon.pid
        assert daemon.stdout is not None
        line = json.loads(daemon.stdout.readline())
        assert "ready" in line
        rid = node.run("spawn", "echo", "--name", "svc")["record"]["id"]
        node.wait_screen(rid, "echo-ready>")
        supervisor = node.record(rid)["active"]["pid"]

        daemon.send_signal(signal.SIGTERM)  # what `systemctl stop` sends, to the main pid only
        assert daemon.wait(30) == 0
        assert alive(supervisor), "a SIGTERM to the daemon must not end the session"

        again = foreground(node, path)
        try:
            ready(sock)
            node.wait_state(rid, "live")
            node.run("prompt", rid, "after the restart")
            node.wait_screen(rid, "echo: after the restart")
            assert node.record(rid)["active"]["pid"] == supervisor
            refused = node.error("node", "up", "--foreground")  # a second one is refused
            assert refused["code"] == "node-running"
        finally:
            again.send_signal(signal.SIGTERM)
            again.wait(30)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(10)


def test_a_refused_foreground_start_says_so_to_systemd(
    node: Node, notify: tuple[socket.socket, str]
) -> None:
    sock, path = notify
    node.state_dir.mkdir(parents=True)
    (node.state_dir / "state.db").write_bytes(b"not a database" * 512)
    daemon = foreground(node, path)
    try:
        assert daemon.wait(30) != 0
        status = sock.recv(4096).decode()
        assert status.startswith("STATUS=refused: durable-state-damaged"), status
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(10)


def systemctl_standin(
    tmp_path: Path, fail: str = "", said: str = ""
) -> tuple[dict[str, str], Path]:
    """A systemctl on PATH that appends its arguments to a file (and fails on ``fail``, saying
    ``said`` on stderr)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "systemctl.calls"
    script = bindir / "systemctl"
    said = said or f"Failed to {fail}: no bus"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        + (f'case "$*" in *{fail}*) echo "{said}" >&2; exit 1;; esac\n' if fail else "")
        + "exit 0\n"
    )
    script.chmod(0o755)
    home = tmp_path / "home"  # never the user's own systemd directory
    home.mkdir()
    return {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "HOME": str(home)}, calls


def test_install_service_writes_and_enables_the_user_unit(node: Node, tmp_path: Path) -> None:
    env, calls = systemctl_standin(tmp_path)
    node.env.update(env, XDG_CONFIG_HOME=str(tmp_path / "config"))
    doc = node.run("node", "install-service", "--user")
    unit = tmp_path / "config" / "systemd" / "user" / "roost-node.service"
    assert doc["path"] == str(unit) and doc["unit"] == "roost-node.service" and doc["started"]
    text = unit.read_text()
    roost_bin = doc["exec"]
    assert text == service.render(
        service.unit_named("roost-node.service"), roost_bin, str(node.state_dir)
    )
    start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    argv = start.removeprefix("ExecStart=").split()
    # the state directory the command was given (here ROOST_STATE_DIR) is the one it serves
    assert argv[-5:] == ["--state-dir", str(node.state_dir), "node", "up", "--foreground"]
    check = subprocess.run([*argv, "--help"], capture_output=True, text=True, env=node.env)
    assert check.returncode == 0, check.stderr  # the unit runs this very roost
    assert calls.read_text().splitlines() == [
        "--user daemon-reload",
        "--user enable --now roost-node.service",
    ]


def test_install_service_refuses_clearly(node: Node, tmp_path: Path) -> None:
    env, calls = systemctl_standin(tmp_path, fail="enable")
    node.env.update(env, XDG_CONFIG_HOME=str(tmp_path / "config"))
    refused = node.error("node", "install-service", "--user")
    assert refused["code"] == "service-failed"
    assert "enable" in refused["message"] and "no bus" in refused["message"]
    node.env["PATH"] = str(tmp_path / "empty")
    refused = node.error("node", "install-service", "--user", "--no-start")
    assert refused["code"] == "no-systemd"
    assert wait_for(lambda: calls.exists(), 1, "the stand-in to have been called")


def test_install_service_keeps_the_state_directory_named(node: Node, tmp_path: Path) -> None:
    """--state-dir with spaces and a '%' reaches the unit quoted as systemd reads it."""
    env, _ = systemctl_standin(tmp_path)
    node.env.update(env, XDG_CONFIG_HOME=str(tmp_path / "config"))
    del node.env["ROOST_STATE_DIR"]
    odd = tmp_path / "my state 100%"
    doc = node.run("--state-dir", str(odd), "node", "install-service", "--user")
    text = Path(doc["path"]).read_text()
    assert doc["state_dir"] == str(odd)
    start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    assert f'--state-dir "{str(odd).replace("%", "%%")}" node up' in start


def test_install_service_without_a_user_manager(node: Node, tmp_path: Path) -> None:
    """No systemd user manager (a container, an ssh session without lingering): refused with
    what to do instead, and no unit file left behind."""
    env, calls = systemctl_standin(
        tmp_path, fail="--user", said="Failed to connect to bus: No medium found"
    )
    node.env.update(env, XDG_CONFIG_HOME=str(tmp_path / "config"))
    refused = node.error("node", "install-service", "--user")
    assert refused["code"] == "no-user-manager", refused
    message = refused["message"]
    assert "no systemd user manager" in message and "No medium found" in message
    assert "roost --state-dir" in message and "node up" in message
    assert "loginctl enable-linger" in message
    assert not (tmp_path / "config").exists()  # nor the directories made for it
    assert calls.exists()


def test_install_service_failing_leaves_no_unit(node: Node, tmp_path: Path) -> None:
    env, calls = systemctl_standin(tmp_path, fail="enable")
    node.env.update(env, XDG_CONFIG_HOME=str(tmp_path / "config"))
    unit = tmp_path / "config" / "systemd" / "user" / "roost-node.service"
    assert node.error("node", "install-service", "--user")["code"] == "service-failed"
    assert not unit.exists()
    assert calls.read_text().splitlines() == [  # systemd told again, of the unit file gone
        "--user daemon-reload",
        "--user enable --now roost-node.service",
        "--user daemon-reload",
    ]
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text("# the unit installed before\n")
    assert node.error("node", "install-service", "--user")["code"] == "service-failed"
    assert unit.read_text() == "# the unit installed before\n"  # put back as it was
