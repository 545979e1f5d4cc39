"""Hosts for a lab test: Linux network namespaces made by the test, joined by veth pairs.

Each host is a namespace with its loopback up; ``join`` links two hosts with a veth pair and an
address each from a private /24 (10.x.y.0/24, used only inside these namespaces). The root
namespace gets no address and no route, so nothing the lab sends can leave the machine. Everything
is deleted by ``close`` (the fixture's finaliser), pass or fail. Needs root and ``ip netns``; the
fixture skips with the reason where either is missing.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import uuid


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


class Hosts:
    """Namespaces by host name; ``prefix(host)`` runs a command on that host."""

    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex[:6]
        self.net = random.randrange(16, 250)  # 10.<net>.<link>.0/24: private, per test
        self.names: dict[str, str] = {}
        self.links = 0

    @staticmethod
    def why_not() -> str:
        """Why this machine cannot make a lab, or "" when it can."""
        if shutil.which("ip") is None:
            return "no `ip` command (iproute2)"
        if os.geteuid() != 0:
            return "making network namespaces needs root"
        probe = f"roost-probe-{uuid.uuid4().hex[:6]}"
        made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
        if made.returncode != 0:
            return f"`ip netns add` is not permitted here: {made.stderr.strip()}"
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
        return ""

    def add(self, host: str) -> str:
        name = f"roost-{self.tag}-{host}"
        _ip("netns", "add", name)
        self.names[host] = name
        _ip("-n", name, "link", "set", "lo", "up")
        return name

    def join(self, a: str, b: str) -> tuple[str, str]:
        """A veth pair between hosts ``a`` and ``b``; their addresses (a's, b's)."""
        self.links += 1
        left, right = f"r{self.tag}{self.links}a", f"r{self.tag}{self.links}b"
        _ip("link", "add", left, "type", "veth", "peer", "name", right)
        addresses = (f"10.{self.net}.{self.links}.1", f"10.{self.net}.{self.links}.2")
        for dev, host, address in ((left, a, addresses[0]), (right, b, addresses[1])):
            _ip("link", "set", dev, "netns", self.names[host])
            _ip("-n", self.names[host], "addr", "add", f"{address}/24", "dev", dev)
            _ip("-n", self.names[host], "link", "set", dev, "up")
        return addresses

    def prefix(self, host: str) -> list[str]:
        return ["ip", "netns", "exec", self.names[host]]

    def close(self) -> None:
        for name in self.names.values():  # deleting a namespace deletes its veth ends
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        self.names.clear()
