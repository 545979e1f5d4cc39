"""``roost node up|stop|status``: the node daemon's lifecycle, from the CLI's side of the wire."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click

from roost.cli.context import Ctx, command, reader
from roost.cli.output import console, emit_json, endpoint_text, plain
from roost.cli.progress import Progress, waiting
from roost.cli.restore import follow, print_outcomes, print_plan
from roost.client.client import Client
from roost.client.locate import pid_alive, private_dir, read_node_info
from roost.interpreter import python_module
from roost.wire.errors import RoostError
from roost.wire.limits import check_limit
from roost.wire.policy import check_node_id

UP_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
REPAIR_TIMEOUT = 600.0
STARTING = {  # what a starting daemon is called and is busy with, for the progress note
    "daemon": (
        "node",
        "it checks state.db, starts the state store and adapters, takes the sockets",
    ),
}
STDERR_MAX_BYTES = 10 * 1024 * 1024  # <name>.stderr: rotated to .stderr.1 by the next start
PROBE_S = 5.0  # initialize + node.status of a node.json whose daemon looks alive


@click.group()
def node() -> None:
    """Start, stop and inspect this machine's node."""


def _running_status(ctx: Ctx) -> dict[str, Any] | None:
    """The status of the node serving the directory, or None when none does: a ``node.json``
    whose daemon is gone (pid dead, lock free) is known at once; a live one gets ``PROBE_S``."""
    try:
        with Client.for_state_dir(ctx.state_dir, timeout=PROBE_S) as client:
            return client.call("node.status")
    except RoostError:
        return None


def _print_status(ctx: Ctx, doc: dict[str, Any]) -> None:
    if ctx.json:
        emit_json(doc)
        return
    console.print(f"node {doc['node_id']} (incarnation {doc['incarnation']}, pid {doc['pid']})")
    console.print(f"  state dir: {doc['state_dir']}")
    for name, ep in doc["endpoints"].items():
        console.print(f"  {name}: {endpoint_text(name, ep)}")
    if refused := (doc["endpoints"].get("hub") or {}).get("refused"):
        console.print(
            f"  hub link REFUSED: {refused['code']}: {refused['message']} "
            f"(try {refused['attempts']}, next in {refused['retry_in_s']:g} s)"
        )
    for address, info in sorted(doc.get("actors", {}).items()):
        health = info.get("health") or ("registered" if info.get("registered") else "absent")
        if info.get("missing"):  # registered, but its CLI is not installed: not usable
            looked = f"{info.get('looked_for')} ({info.get('from')}) not found"
            if info.get("from") == "default":
                looked = f"no {info.get('looked_for')} on PATH"
            console.print(f"  {address:<28} {'missing':<10} {looked}")
            continue
        pid = f"pid {info['pid']}" if info.get("pid") else ""
        console.print(f"  {address:<28} {health:<10} {pid}".rstrip())
    if doc.get("records"):
        counts = ", ".join(f"{n} {s}" for s, n in sorted(doc["records"].items()))
        console.print(f"  records: {counts}")
    if (storage := doc.get("storage")) and storage.get("health") != "ok":
        console.print(
            f"  storage: {storage['health']} ({storage.get('code')}, errno "
            f"{storage.get('errno')}), {storage.get('refused')} writes refused, "
            f"{storage.get('free_bytes')} bytes free"
        )
    if kept := doc.get("event_log"):
        console.print(
            f"  event log: retain {kept['retain_events']:,}, oldest retained seq "
            f"{kept['first_seq']}, last seq {kept['last_seq']}"
        )


def _read_line(proc: subprocess.Popen[bytes], timeout: float, progress: Progress) -> dict[str, Any]:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buf = b""
    while b"\n" not in buf:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RoostError("timeout", "the node did not report ready in time; see its log")
        progress.tick()
        ready, _, _ = select.select([proc.stdout], [], [], min(remaining, 0.25))
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
    try:
        doc: dict[str, Any] = json.loads(buf.split(b"\n", 1)[0])
        return doc
    except ValueError:
        raise RoostError("internal", "the node exited during startup; see its log") from None


def run_in_foreground(argv: list[str]) -> NoReturn:
    """Become the daemon (same pid: a service manager's main process); its ready or error line
    goes to stdout, its readiness to systemd (sd_notify) when it runs under one."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)


def launch_detached(argv: list[str], logs: Path, name: str) -> dict[str, Any]:
    """Start a daemon in its own session and read the one line it announces (ready or error)."""
    stderr = logs / f"{name}.stderr"
    rotate_stderr(stderr)
    with open(stderr, "ab") as err:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
            close_fds=True,
        )
    label, doing = STARTING.get(name, (name, ""))
    progress = Progress(f"the {label} (pid {proc.pid}) to start" + (f": {doing}" if doing else ""))
    try:
        line = _read_line(proc, UP_TIMEOUT, progress)
    finally:
        progress.done()
        assert proc.stdout is not None
        proc.stdout.close()
    if "error" in line:
        raise RoostError.from_body(line["error"])
    return line


def rotate_stderr(path: Path) -> None:
    """Keep ``<name>.stderr`` (what a daemon and its children print outside their JSON logs:
    a crash's traceback) bounded. The daemon and every child share that file as their fd 2, so
    none of them can rotate it; the CLI does, before it starts a daemon (none writes it then)."""
    try:
        if path.stat().st_size >= STDERR_MAX_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
    except OSError:  # none yet, or the rename refused: the start matters more
        pass


@node.command("up")
@click.option("--node-id", help="name this node (only on first start; stored afterwards)")
@click.option(
    "--new-node-id",
    metavar="ID",
    help="serve under a new node id from now on (a copy of another node's state.db: see "
    "docs/OPERATIONS.md, Backups); its live records become dormant",
)
@click.option("--listen", help="also serve clients on tcp://ADDRESS:PORT (CURVE unless loopback)")
@click.option(
    "--retain-events",
    metavar="N",
    help="keep the newest N events (default 1,000,000, at least 1,000; stored for later starts)",
)
@click.option("--hub", "hub_ep", help="dial out to a hub at tcp://ADDRESS:PORT (CURVE)")
@click.option("--hub-key", help="the hub's CURVE public key (roost keys show, on the hub)")
@click.option("--no-hub", is_flag=True, help="forget the hub this node linked to before")
@click.option(
    "--foreground",
    is_flag=True,
    help="run the daemon in this process (a service manager's main process; see deploy/)",
)
@click.option(
    "--restore-wait",
    type=float,
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="wait this long for the records it restores after a reboot (0: return at once)",
)
@reader
def up(
    ctx: Ctx,
    node_id: str | None,
    new_node_id: str | None,
    listen: str | None,
    retain_events: str | None,
    hub_ep: str | None,
    hub_key: str | None,
    no_hub: bool,
    foreground: bool,
    restore_wait: float,
) -> None:
    """Start the node in the background; returns once it serves. --node-id, --retain-events
    and --hub are stored: a later plain `node up` keeps them. --foreground runs the daemon in
    this process instead (systemd's Type=notify: it says READY=1 once it serves).

    Records that were running when the machine went down and whose restore policy is resume
    (spawn --restore) are cold-resumed one at a time; it says which, and waits up to
    --restore-wait for their outcomes.

    --new-node-id brings a copy of another node's state up as a node of its own: the stored id
    is replaced, and the records that were live in the copy become dormant (their supervisors
    are the other node's; none is signalled). A node id another node on this machine serves is
    refused node-id-conflict."""
    for given in (node_id, new_node_id):
        if given:
            check_node_id(given)
    if node_id and new_node_id:
        raise RoostError(
            "bad-request", "--node-id and --new-node-id together", {"field": "node-id"}
        )
    if hub_ep and no_hub:
        raise RoostError("bad-request", "--hub and --no-hub together", {"field": "hub"})
    keep = None if retain_events is None else check_limit(retain_events)
    running = _running_status(ctx)
    if running is not None and foreground:
        raise RoostError(
            "node-running",
            "a node already serves this state directory; `roost node stop` it first (its "
            "sessions keep running)",
            {"pid": running.get("pid")},
        )
    if running is not None and new_node_id not in (None, running["node_id"]):
        raise RoostError(
            "node-running",
            "a node serves this state directory under another id; `roost node stop` it first",
            {"node_id": running["node_id"]},
        )
    if running is not None:
        _check_running(running, node_id, keep)
        _check_hub(running, hub_ep, hub_key, no_hub)
        _print_status(ctx, {**running, "already_running": True})
        return
    state_dir = private_dir(ctx.state_dir)
    logs = private_dir(state_dir / "logs")
    argv = python_module("roost.actors.node", "--state-dir", str(state_dir))
    if node_id:
        argv += ["--node-id", node_id]
    if new_node_id:
        argv += ["--new-node-id", new_node_id]
    if listen:
        argv += ["--listen", listen]
    if keep is not None:
        argv += ["--retain-events", str(keep)]
    if hub_ep:
        argv += [f"--hub={hub_ep}", f"--hub-key={hub_key or ''}"]  # a z85 key may start with -
    if no_hub:
        argv += ["--no-hub"]
    if foreground:
        run_in_foreground(argv)
    line = launch_detached(argv, logs, "daemon")
    ready = {**line["ready"], "already_running": False}
    plan = ready.pop("restore", None) or {"records": [], "skipped": []}
    if not ctx.json:
        _print_status(ctx, ready)
        print_plan(plan)
    if plan["records"] or plan["skipped"]:
        with ctx.client() as client:
            plan = follow(client, plan, restore_wait)
        if not ctx.json:
            print_outcomes(plan)
    if ctx.json:
        emit_json({**ready, "restore": plan})


def _check_running(running: dict[str, Any], node_id: str | None, keep: int | None) -> None:
    """``node up`` of a node that already serves: refuse options it was not started with."""
    if node_id and node_id != running["node_id"]:
        raise RoostError(
            "durable-state-conflict", "a node with another id serves this state directory"
        )
    current = (running.get("event_log") or {}).get("retain_events")
    if keep is not None and current is not None and keep != current:
        raise RoostError(
            "node-running",
            f"the node serves with --retain-events {current}; stop it to change the limit",
            {"retain_events": current},
        )


def _check_hub(
    running: dict[str, Any], hub_ep: str | None, hub_key: str | None, no_hub: bool
) -> None:
    """``node up --hub``/``--no-hub`` of a running node: only what it already does."""
    linked = (running.get("endpoints") or {}).get("hub") or {}
    other = hub_ep and (hub_ep, hub_key) != (linked.get("endpoint"), linked.get("server_key"))
    if other or (no_hub and linked):
        raise RoostError(
            "node-running",
            "the node serves with another hub link; stop it to change the link",
            {"hub": linked.get("endpoint")},
        )


@node.command("run")
@click.option("--node-id", help="name this node (only on first start; stored afterwards)")
@click.option("--listen", help="also serve clients on tcp://ADDRESS:PORT (CURVE unless loopback)")
@click.option("--hub", "hub_ep", help="dial out to a hub at tcp://ADDRESS:PORT (CURVE)")
@click.option("--hub-key", help="the hub's CURVE public key (roost keys show, on the hub)")
@click.option(
    "--stop-sessions", is_flag=True, help="on SIGTERM, stop live sessions before the daemon"
)
@reader
def run(
    ctx: Ctx,
    node_id: str | None,
    listen: str | None,
    hub_ep: str | None,
    hub_key: str | None,
    stop_sessions: bool,
) -> None:
    """A container's main process: runs the daemon (`node up --foreground`) as its child and
    starts it again whenever it dies, so that sessions outlive a daemon crash or restart as
    they do on a host; reaps orphans (it is PID 1). SIGTERM stops the daemon (its sessions
    first with --stop-sessions) and ends it; so does `roost node stop` run inside."""
    from roost import init

    if node_id:
        check_node_id(node_id)
    roost = python_module("roost", "--state-dir", str(private_dir(ctx.state_dir)))
    daemon = [*roost, "node", "up", "--foreground"]
    if node_id:
        daemon += ["--node-id", node_id]
    if listen:
        daemon += ["--listen", listen]
    if hub_ep:
        daemon += [f"--hub={hub_ep}", f"--hub-key={hub_key or ''}"]
    sys.exit(init.Init(daemon, init.stopper(roost, stop_sessions)).serve())


@node.command("stop")
@click.option("--stop-sessions", is_flag=True, help="stop live sessions first")
@command(op=False)
def stop(ctx: Ctx, stop_sessions: bool) -> None:
    """Stop the daemon; live sessions keep running unless --stop-sessions."""
    info = read_node_info(ctx.state_dir)
    reply = ctx.call("node.shutdown", {"stop_sessions": stop_sessions}, timeout=60.0)
    deadline = time.monotonic() + STOP_TIMEOUT
    with waiting(f"the node (pid {info.pid}) to exit") as progress:
        while _alive(info.pid) and time.monotonic() < deadline:
            progress.tick()
            time.sleep(0.05)  # polling a pid that has no other way to say it exited
    doc = {**reply, "node_id": info.node_id, "pid": info.pid, "stopped": not _alive(info.pid)}
    if ctx.json:
        emit_json(doc)
    else:
        console.print(f"node {info.node_id} stopped" if doc["stopped"] else "node still stopping")


_alive = pid_alive  # roost.cli.hub waits on it too


@node.command("status")
@reader
def status(ctx: Ctx) -> None:
    """Node id, incarnation, pid, endpoints, actors and their health."""
    _print_status(ctx, ctx.call("node.status"))


@node.command("repair")
@click.option("--node-id", help="the node id, when the damaged file no longer holds it")
@reader
def repair(ctx: Ctx, node_id: str | None) -> None:
    """Salvage a damaged state.db (refused by `node up` with durable-state-damaged) into a new
    file; the damaged one is kept beside it as state.db.damaged-<time>. The node must be
    stopped."""
    if node_id:
        check_node_id(node_id)
    argv = python_module("roost.actors.state.repair", "--state-dir", str(ctx.state_dir))
    proc = subprocess.run(
        [*argv, *(["--node-id", node_id] if node_id else [])],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=REPAIR_TIMEOUT,
    )
    try:
        doc: dict[str, Any] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RoostError("internal", "the repair printed no report; see its stderr") from None
    if "error" in doc:
        raise RoostError.from_body(doc["error"])
    if ctx.json:
        emit_json(doc)
        return
    if not doc["repaired"]:
        console.print("state.db passes the check: nothing to repair")
        return
    console.print(f"damaged: {'; '.join(doc['problems'])}")
    console.print(f"kept the damaged file as {doc['damaged_file']}; state.db is the salvaged copy")
    for table, kept in doc["tables"].items():
        lost = kept.get("unreadable") or []
        console.print(
            f"  {table:<10} {kept['kept']:>8} rows kept, {len(lost)} unreadable ranges "
            + ", ".join("-".join(plain(end) for end in span) for span in lost)
        )


@node.command("claim")
@click.option("--lease-ms", type=int, default=30_000, help="lease length; renew before it lapses")
@click.option("--take-over", is_flag=True, help="fence the current holder's grant")
@click.option("--renew", default="", help="renew this grant instead of claiming anew")
@reader
def claim(ctx: Ctx, lease_ms: int, take_over: bool, renew: str) -> None:
    """Take the node's controller lease: while it lasts, others may not spawn, add workspaces
    or stop the node without its grant (--grant G or ROOST_GRANT)."""
    body = {"lease_ms": lease_ms, "take_over": take_over, "renew": renew or None}
    doc = ctx.call("node.claim", body)
    c = doc["claim"]
    text = f"grant {c['grant']} on the node, {c['expires_in_ms']} ms"
    emit_json(doc) if ctx.json else console.print(text)


@node.command("release")
@click.argument("grant_id", metavar="GRANT")
@reader
def release(ctx: Ctx, grant_id: str) -> None:
    """Release the node's controller lease."""
    doc = ctx.call("node.release", {"grant": grant_id})
    emit_json(doc) if ctx.json else console.print("released the node")
