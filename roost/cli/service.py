"""systemd units for a node and a hub: the text of deploy/systemd/ and of `node install-service`.

One function renders each unit, so the files shipped in deploy/ (rendered for
``/usr/local/bin/roost``; ``tests/unit/test_deploy.py`` keeps them equal) and the unit that
``roost node install-service`` writes (rendered for the roost actually running) cannot drift.

Why the units look as they do:

* ``Type=notify``: ``node up --foreground`` (``hub up --foreground``) runs the daemon as the
  unit's main process, and the daemon sends ``READY=1`` once it serves, the moment `node up`
  would have returned; a refusal (a damaged database, a node already serving the directory)
  fails the start with the daemon's error line in the journal.
* ``KillMode=process``: the session supervisors and their agents are detached from the daemon
  but still in the unit's cgroup. With systemd's default (``control-group``) a ``systemctl
  stop``, ``restart`` or an upgrade would kill every session; with ``process`` only the daemon
  gets the signal, shuts down cleanly (its state store and adapter host follow it), and the
  supervisors run on and re-attach to the next daemon.
* Hardening that keeps PTYs working and the agents' work possible: the agents edit the user's
  projects and run their tools, so the file system stays writable and devices stay visible;
  the runtime directory (the ipc sockets the CLI dials) is under /tmp and shared with the CLI,
  so ``PrivateTmp`` stays off. What is left: no new privileges, no realtime, no set-uid files,
  a fixed personality, a private umask.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roost.wire.errors import RoostError

DEPLOYED_BIN = "/usr/local/bin/roost"  # what deploy/systemd/ names; install-service uses its own


@dataclass(frozen=True)
class Unit:
    name: str  # the file name: roost-node.service, roost-node@.service, ...
    kind: str  # "node" or "hub"
    scope: str  # "user" (a user unit) or "system" (a template, one instance per user: %i)


UNITS = (
    Unit("roost-node.service", "node", "user"),
    Unit("roost-node@.service", "node", "system"),
    Unit("roost-hub.service", "hub", "user"),
    Unit("roost-hub@.service", "hub", "system"),
)

HARDENING = """\
# Hardening that keeps PTYs and the agents' work (see roost/cli/service.py): no PrivateTmp (the
# ipc sockets in /tmp are shared with the CLI), no read-only file system (agents edit projects).
PrivateTmp=no
NoNewPrivileges=yes
LockPersonality=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
UMask=0077
"""

KILLMODE = """\
# KillMode=process: stop, restart or an upgrade signals the daemon only. The detached session
# supervisors (and their agents) live in this unit's cgroup too; the default control-group mode
# would kill every session. They outlive the daemon by design and re-attach to the next one.
KillMode=process
"""


def exec_word(word: str) -> str:
    """One word of an ExecStart line as systemd reads it: ``%`` and ``$`` doubled (specifiers,
    variables), and double-quoted when it holds a space, a quote or a backslash."""
    word = word.replace("%", "%%").replace("$", "$$")
    if any(c.isspace() or c in "\"'\\;" for c in word):
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return word


def render(unit: Unit, roost_bin: str = DEPLOYED_BIN, state_dir: str | None = None) -> str:
    """The unit file's text, its ExecStart running ``roost_bin`` (with ``--state-dir
    state_dir`` when one was named: the service serves the directory the installer named)."""
    chosen = f" --state-dir {exec_word(state_dir)}" if state_dir else ""
    if unit.kind == "node":
        what = "roost node: durable, supervised coding-agent sessions"
        start = f"{roost_bin}{chosen} node up --foreground"
        extra = ""
    else:
        what = "roost hub: routes between the nodes of a lab over CurveZMQ"
        state = "%h/.local/state/roost-hub" if unit.scope == "user" else "/var/lib/roost-hub/%i"
        state = exec_word(state_dir) if state_dir else state
        listen = "--listen ${ROOST_HUB_LISTEN}"
        start = f"{roost_bin} --state-dir {state} hub up --foreground {listen}"
        env_file = "%h/.config/roost/hub.env" if unit.scope == "user" else "/etc/roost/hub-%i.env"
        extra = (
            "# where nodes and clients dial; the environment file may change it\n"
            "Environment=ROOST_HUB_LISTEN=tcp://0.0.0.0:7800\n"
            f"EnvironmentFile=-{env_file}\n"
        )
        if unit.scope == "system":
            extra += "StateDirectory=roost-hub/%i\nStateDirectoryMode=0700\n"
    if unit.scope == "user":
        header = (
            f"# {unit.name}: a systemd user unit. `roost {unit.kind} install-service --user`"
            " writes and enables it;\n"
            f"# by hand: copy it to ~/.config/systemd/user/, then `systemctl --user enable --now"
            f" {unit.name}`\n"
            "# (and `loginctl enable-linger $USER` so it runs without a login session).\n"
        )
        description = what
        user = ""
        wanted = "default.target"
    else:
        header = (
            f"# {unit.name}: a systemd system template, one instance per user (%i).\n"
            f"# `sudo roost {unit.kind} install-service` writes it; then `systemctl enable --now"
            f" {unit.name.replace('@', '@USER')}`.\n"
        )
        description = f"{what} (for %i)"
        user = "User=%i\n"
        wanted = "multi-user.target"
    return (
        f"{header}"
        "[Unit]\n"
        f"Description={description}\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n"
        "\n"
        "[Service]\n"
        "# the daemon sends READY=1 once it serves (what `node up` waits for in the background)\n"
        "Type=notify\n"
        "NotifyAccess=main\n"
        f"{user}"
        f"{extra}"
        f"ExecStart={start}\n"
        f"{KILLMODE}"
        "Restart=on-failure\n"
        "RestartSec=2\n"
        "TimeoutStartSec=90\n"
        "TimeoutStopSec=30\n"
        f"{HARDENING}"
        "\n"
        "[Install]\n"
        f"WantedBy={wanted}\n"
    )


def unit_named(name: str) -> Unit:
    for unit in UNITS:
        if unit.name == name:
            return unit
    raise KeyError(name)


@dataclass
class Installed:
    unit: str  # the unit's name as systemctl knows it (an instance for a template)
    path: str  # where its file was written
    commands: list[list[str]]  # the systemctl commands run, in order
    started: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "path": self.path,
            "commands": [" ".join(c) for c in self.commands],
            "started": self.started,
        }


def unit_path(unit: Unit, config_home: Path) -> Path:
    """Where the unit file goes: the user's systemd directory, or /etc/systemd/system."""
    if unit.scope == "user":
        return config_home / "systemd" / "user" / unit.name
    return Path("/etc/systemd/system") / unit.name


NO_BUS = ("Failed to connect to bus", "No medium found", "DBUS_SESSION_BUS_ADDRESS")


def install(
    kind: str,
    *,
    user: bool,
    roost_bin: str,
    config_home: Path,
    instance: str,
    start: bool,
    run: Callable[[list[str]], subprocess.CompletedProcess[str]],
    state_dir: str | None = None,
    instead: str = "roost node up",
) -> Installed:
    """Write the unit, reload systemd and enable it (``--now`` when ``start``); refused with
    ``no-systemd`` where systemctl is missing, ``no-user-manager`` where ``systemctl --user``
    finds no user manager (``instead``: the command that runs it without one) and
    ``service-failed`` naming the command that failed. A refusal leaves the unit file as it
    was (none, or the one installed before)."""
    unit = unit_named(f"roost-{kind}.service" if user else f"roost-{kind}@.service")
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        raise RoostError(
            "no-systemd",
            "systemctl is not on PATH: this machine does not run systemd; deploy/ has the units"
            " to adapt by hand",
        )
    path = unit_path(unit, config_home)
    try:
        before: str | None = path.read_text()
    except OSError:
        before = None
    made = [d for d in (path.parent, *path.parent.parents) if not d.exists()]  # made here
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(unit, roost_bin, state_dir))
    except PermissionError:
        raise RoostError(
            "service-failed",
            f"cannot write {path}: a system unit needs root (sudo), or use --user",
            {"path": str(path)},
        ) from None
    scope = ["--user"] if user else []
    name = unit.name if user else unit.name.replace("@.", f"@{instance}.")
    commands = [
        [systemctl, *scope, "daemon-reload"],
        [systemctl, *scope, "enable", *(["--now"] if start else []), name],
    ]
    for command in commands:
        done = run(command)
        if done.returncode != 0:
            _put_back(path, before, made)
            if command is not commands[0]:  # systemd read the new file: it reads the old again
                run(commands[0])
            said = (done.stderr or done.stdout).strip()[:400]
            if user and any(sign in said for sign in NO_BUS):
                raise RoostError(
                    "no-user-manager",
                    f"no systemd user manager is running here (`systemctl --user` said: {said});"
                    f" nothing was installed. Run the node without systemd: `{instead}`; or,"
                    " where systemd runs, `loginctl enable-linger $USER`, log in again and"
                    " repeat this command",
                    {"unit": name, "fix": instead},
                )
            raise RoostError(
                "service-failed",
                f"`{' '.join(command[1:])}` failed: {said}; the unit file was not kept",
                {"unit": name, "exit": done.returncode},
            )
    return Installed(name, str(path), commands, start)


def _put_back(path: Path, before: str | None, made: list[Path]) -> None:
    """The unit file as it was before this install: removed (with the directories made for
    it), or its old text restored."""
    try:
        if before is None:
            path.unlink(missing_ok=True)
            for directory in made:
                directory.rmdir()
        else:
            path.write_text(before)
    except OSError:
        pass
