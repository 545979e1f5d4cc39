"""Hosts for a lab test: Linux network namespaces made by the test, joined by veth pairs.

Each host is a namespace with its loopback up; ``join`` links two hosts with a veth pair and an
address each from a private /24 (10.x.y.0/24, used only inside these namespaces). The root
namespace gets no address and no route, so nothing the lab sends can leave the machine. Everything
is deleted by ``close`` (the fixture's finaliser), pass or fail. Needs root and ``ip netns``; the
fixture skips with the reason where either is missing.

A slow, lossy link (needs ``nft``; ``why_no_nft`` says when it is missing): ``lossy`` has
nftables drop a share of a host's packets in and out on its links (not loopback), at random, so
TCP retransmits as on a bad network; ``cut`` drops all of them (a broken network) until it is
undone; ``slow_connects`` drops the first SYNs of each connection a host makes to a port, so each
connect waits for TCP's SYN retransmissions: what random loss does to a connection now and then,
made certain. ``relay`` (run as ``python netns.py relay``, in a host) is a TCP relay that writes
on each chunk it reads a fixed time later, in each direction, so a connection through it has that
much more delay each way.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
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

    @staticmethod
    def why_no_nft() -> str:
        """Why packets cannot be dropped here, or "" when they can."""
        return "" if shutil.which("nft") else "no `nft` command (nftables) to drop packets with"

    def _nft(self, host: str, rules: list[str]) -> None:
        subprocess.run(
            [*self.prefix(host), "nft", "-f", "-"],
            input="\n".join(rules) + "\n",
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        )

    def _drop(self, host: str, table: str, which: str) -> None:
        rules = [f"add table inet {table}"]
        for chain, hook, dev in (("in", "input", "iifname"), ("out", "output", "oifname")):
            rules.append(
                f"add chain inet {table} {chain} {{ type filter hook {hook} priority 0; }}"
            )
            rules.append(f'add rule inet {table} {chain} {dev} != "lo" {which}drop')
        self._nft(host, rules)

    def lossy(self, host: str, percent: int) -> None:
        """Drop ``percent`` % of ``host``'s packets on its links, in and out, at random (gone with
        the namespace)."""
        self._drop(host, f"roost{self.tag}loss", f"numgen random mod 100 < {percent} ")

    def cut(self, host: str, *, cut: bool = True) -> None:
        """Drop every packet of ``host``'s links, in and out (a network that broke), or with
        ``cut=False`` stop dropping them."""
        table = f"roost{self.tag}cut"
        if cut:
            self._drop(host, table, "")
        else:
            self._nft(host, [f"delete table inet {table}"])

    def slow_connects(self, host: str, port: int, drops: int) -> None:
        """Drop the first ``drops`` SYNs of every connection ``host`` makes to ``port``, so each
        connect waits for TCP to send its SYN again that many times (Linux: 1 s apart for the
        first four since 6.6, tcp_syn_linear_timeouts; 1, 2, 4 ... s before)."""
        table = f"roost{self.tag}syn"
        syn = f"tcp dport {port} tcp flags & (syn | ack) == syn"
        rules = [f"add table inet {table}"]
        rules.append(f"add chain inet {table} out {{ type filter hook output priority 0; }}")
        # set n: the source ports whose SYN was dropped n times; the last one lets it through
        for n in range(1, drops + 1):
            rules.append(
                f"add set inet {table} s{n} "
                "{ type inet_service; flags dynamic, timeout; timeout 2m; }"
            )
        rules.append(f"add rule inet {table} out {syn} tcp sport @s{drops} accept")
        for n in range(drops - 1, 0, -1):
            again = f"add @s{n + 1} {{ tcp sport }} drop"
            rules.append(f"add rule inet {table} out {syn} tcp sport @s{n} {again}")
        rules.append(f"add rule inet {table} out {syn} add @s1 {{ tcp sport }} drop")
        self._nft(host, rules)

    def prefix(self, host: str) -> list[str]:
        return ["ip", "netns", "exec", self.names[host]]

    def close(self) -> None:
        for name in self.names.values():  # deleting a namespace deletes its veth ends
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        self.names.clear()


async def _carry(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """One direction of a relayed connection: each chunk written ``delay`` seconds after it was
    read, in order; the end of the stream passed on the same way, a reset at once (raised)."""
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue()

    async def read() -> None:
        try:
            while chunk := await reader.read(65536):
                chunks.put_nowait((loop.time() + delay, chunk))
        except OSError:
            chunks.put_nowait((0.0, None))
            return
        chunks.put_nowait((loop.time() + delay, b""))

    reading = asyncio.create_task(read())
    try:
        while True:
            due, chunk = await chunks.get()
            if chunk is None:
                raise ConnectionResetError("the other end reset the connection")
            await asyncio.sleep(max(0.0, due - loop.time()))
            if not chunk:
                writer.write_eof()
                return
            writer.write(chunk)
            await writer.drain()
    finally:
        reading.cancel()


async def _relay(listen: str, upstream: str, delay: float) -> None:
    up_host, up_port = upstream.rsplit(":", 1)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(up_host, int(up_port))
        except OSError:
            writer.close()
            return
        ways = [
            asyncio.create_task(_carry(reader, up_writer, delay)),
            asyncio.create_task(_carry(up_reader, writer, delay)),
        ]
        # a reset on either side ends both; a clean end waits for the other direction's end
        await asyncio.wait(ways, return_when=asyncio.FIRST_EXCEPTION)
        for task in ways:
            task.cancel()
        await asyncio.gather(*ways, return_exceptions=True)
        for w in (writer, up_writer):
            w.close()

    server = await asyncio.start_server(serve, listen, 0)
    port = server.sockets[0].getsockname()[1]
    print(json.dumps({"port": port}), flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":  # python netns.py relay LISTEN_HOST UPSTREAM_HOST:PORT DELAY_S
    if len(sys.argv) != 5 or sys.argv[1] != "relay":
        sys.exit("usage: netns.py relay LISTEN_HOST UPSTREAM_HOST:PORT DELAY_S")
    asyncio.run(_relay(sys.argv[2], sys.argv[3], float(sys.argv[4])))
