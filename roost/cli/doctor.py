"""``roost doctor``: what works, what does not, and what to do about it.

Findings, each ``ok``, ``warn`` or ``error`` with what to do: the configuration file; the node
(running or not, its actors, its storage, its endpoints); each provider CLI (found or not, its
version against the ones roost knows, logged in or not); the permissions of the state directory
and its secrets. Providers are checked in the node's environment when a node runs (``node.doctor``,
answered by its adapter host), else in this shell's (``python -m roost.adapters.doctor``, one
child process per provider, run side by side). Exit 1 when any finding is an ``error``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import click

from roost.cli.context import Ctx, reader
from roost.cli.output import emit_json
from roost.config import load
from roost.interpreter import python_module
from roost.providers import vendors
from roost.wire.errors import RoostError
from roost.wire.policy import HUB

Finding = dict[str, str]
PROBE_TIMEOUT_S = 60.0
NODE_TIMEOUT_S = 5.0
# state-directory entries and the permission bits they must not exceed
PRIVATE = {
    ".": 0o700,
    "logs": 0o700,
    "keys": 0o700,
    "token": 0o600,
    "observer-token": 0o600,
    "scoped-tokens.json": 0o600,
    "actor-token": 0o600,
    "keys/node.secret": 0o600,
    "state.db": 0o600,
    "state.db-wal": 0o600,
    "state.db-shm": 0o600,
}


def finding(area: str, level: str, what: str, fix: str = "") -> Finding:
    return {"area": area, "level": level, "what": what, "fix": fix}


def check_config() -> tuple[list[Finding], dict[str, Any]]:
    try:
        cfg = load()
    except RoostError as err:
        fix = "correct that line, or move the file away to use the defaults"
        return [finding("config", "error", err.message, fix)], {"error": err.to_body()}
    what = f"config file {cfg.path}" if cfg.exists else f"no config file ({cfg.path}): defaults"
    return [finding("config", "ok", what)], {"path": str(cfg.path), "exists": cfg.exists}


def check_node(ctx: Ctx) -> tuple[list[Finding], dict[str, Any] | None]:
    try:
        with dataclasses.replace(ctx, timeout=min(ctx.timeout, NODE_TIMEOUT_S)).client() as client:
            status = client.call("node.status")
    except RoostError as err:
        if err.code == "node-not-running":
            what, fix = "no node is running for this state directory", "roost node up"
            return [finding("node", "warn", what, fix)], None
        fix = "read logs/node.log (roost logs); if it stays so: kill -TERM <pid in node.json>"
        return [finding("node", "error", f"the node does not answer: {err}", fix)], None
    found = [finding("node", "ok", f"node {status['node_id']} serving (pid {status.get('pid')})")]
    for name, info in sorted((status.get("actors") or {}).items()):
        if info.get("health") == "failed":
            found.append(
                finding(
                    "node",
                    "error",
                    f"{name} has failed and is not restarted",
                    f"read logs/{name}.log, then roost node stop and roost node up",
                )
            )
    storage = status.get("storage") or {}
    if storage.get("health") not in (None, "ok"):
        found.append(
            finding(
                "node",
                "error",
                f"storage {storage['health']} ({storage.get('code')})",
                "free space on the state directory's disk; no restart needed",
            )
        )
    for name, ep in (status.get("endpoints") or {}).items():
        found.append(finding("endpoints", "ok", f"{name}: {_endpoint(ep)}"))
    return found, status


def _endpoint(ep: Any) -> str:
    if isinstance(ep, dict):
        return ", ".join(f"{k} {v}" for k, v in ep.items() if k != "server_key")
    return str(ep)


def check_providers(
    ctx: Ctx, status: dict[str, Any] | None
) -> tuple[list[Finding], list[Any], str]:
    reports: list[dict[str, Any]] | None = None
    seen_by = "the node's environment"
    if status is not None:
        try:
            reports = ctx.call("node.doctor", timeout=PROBE_TIMEOUT_S)["providers"]
        except RoostError as err:
            if err.code not in ("unknown-method", "forbidden"):
                raise
    if reports is None and ctx.remote is not None:  # a node elsewhere: not this shell's to check
        return [], [], "nowhere (the node did not answer)"
    if reports is None:
        seen_by = "this shell's environment (no node answered)"
        reports = probe_here()
    found = []
    for rep in reports:
        if rep.get("error"):
            failed = rep["error"]
            what = f"{rep['provider']}: not checked: {failed.get('code')}: {failed.get('message')}"
            found.append(finding("providers", "warn", what, "run roost doctor again"))
        found += [{"area": "providers", **f} for f in rep.get("findings") or []]
    return found, reports, seen_by


def probe_here() -> list[dict[str, Any]]:
    """Each provider (each vendor's CLI and each the config file defines) checked by
    ``roost.adapters.doctor`` in a child process, all at once."""
    argv = python_module("roost.adapters.doctor", "--json", "--provider")
    try:
        checked = (*vendors(), *load().defined_providers())
    except RoostError:  # check_config reports it
        checked = vendors()
    procs = [
        subprocess.Popen(
            [*argv, p], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        for p in checked
    ]
    reports = []
    for provider, proc in zip(checked, procs, strict=True):
        try:
            out, _ = proc.communicate(timeout=PROBE_TIMEOUT_S)
            reports.append(json.loads(out)["providers"][0])
        except (subprocess.TimeoutExpired, ValueError, KeyError, IndexError):
            proc.kill()
            proc.wait()
            error = {"code": "timeout", "message": "the provider check did not finish"}
            reports.append({"provider": provider, "error": error, "findings": []})
    return reports


def check_files(state_dir: Path, status: dict[str, Any] | None) -> list[Finding]:
    if not state_dir.is_dir():
        return [finding("files", "warn", f"no state directory yet ({state_dir})", "roost node up")]
    paths = {state_dir / rel: bits for rel, bits in PRIVATE.items()}
    for ep in ((status or {}).get("endpoints") or {}).values():
        if isinstance(ep, str) and ep.startswith("ipc://"):
            sock = Path(ep[len("ipc://") :])
            paths[sock], paths[sock.parent] = 0o600, 0o700
    found = [f for path, bits in paths.items() if (f := _permission(path, bits)) is not None]
    private = f"{state_dir}: private (0700 directories, 0600 secrets)"
    return found or [finding("files", "ok", private)]


def _permission(path: Path, allowed: int) -> Finding | None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return finding(
            "files",
            "error",
            f"{path} is owned by another user (uid {st.st_uid})",
            f"chown {os.getuid()} {path}",
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & ~allowed & 0o777:
        return finding(
            "files",
            "error",
            f"{path} is mode {mode:04o}: others may read it",
            f"chmod {allowed:o} {path}",
        )
    return None


@click.command()
@reader
def doctor(ctx: Ctx) -> None:
    """Check the config file, the node, each provider CLI and the state directory's
    permissions; each finding says what to do. Exits 1 when something is broken. Through a hub
    without --node: every node's, each in its own environment."""
    if not ctx.node and _is_hub(ctx):
        fleet_doctor(ctx)
        return
    findings, config = check_config()
    node_findings, status = check_node(ctx)
    provider_findings, providers, seen_by = check_providers(ctx, status)
    findings += node_findings + provider_findings
    if ctx.remote is None:
        findings += check_files(ctx.state_dir, status)
    ok = not any(f["level"] == "error" for f in findings)
    doc = {
        "ok": ok,
        "findings": findings,
        "config": config,
        "node": status,
        "providers": providers,
        "providers_seen_by": seen_by,
    }
    if ctx.json:
        emit_json(doc)
    else:
        _print(findings, seen_by)
    if not ok:
        sys.exit(1)


def _is_hub(ctx: Ctx) -> bool:
    try:
        with dataclasses.replace(ctx, timeout=min(ctx.timeout, NODE_TIMEOUT_S)).client() as client:
            return client.target == HUB
    except RoostError:
        return False  # check_node says what is wrong with the node


def one_node(ctx: Ctx, known: dict[str, Any]) -> dict[str, Any]:
    """A linked node's checks through the hub (``ctx`` addresses it): the node, its providers
    in its own environment."""
    node_id = known["node_id"]
    if not known["linked"]:
        what = f"node {node_id} is not linked to the hub (for {known.get('gone_s', 0):.0f} s)"
        fix = "start its node (roost node up), or mend its network to the hub"
        found = [finding("node", "error", what, fix)]
        return {"node_id": node_id, "ok": False, "findings": found, "node": None, "providers": []}
    node_findings, status = check_node(ctx)
    provider_findings, providers, _ = check_providers(ctx, status)
    findings = node_findings + provider_findings
    ok = not any(f["level"] == "error" for f in findings)
    return {
        "node_id": node_id,
        "ok": ok,
        "findings": findings,
        "node": status,
        "providers": providers,
    }


def fleet_doctor(ctx: Ctx) -> None:
    """``roost --hub ... doctor``: every node the hub knows, checked at once, each in its own
    environment; exit 1 when any finding of any node is an error."""
    findings, config = check_config()
    known = ctx.call("hub.nodes", target="hub")["nodes"]
    quiet = dataclasses.replace(ctx, quiet=True)
    with ThreadPoolExecutor(max_workers=8) as pool:
        nodes = list(
            pool.map(lambda n: one_node(dataclasses.replace(quiet, node=n["node_id"]), n), known)
        )
    ok = not any(f["level"] == "error" for f in findings) and all(n["ok"] for n in nodes)
    doc = {"ok": ok, "findings": findings, "config": config, "nodes": nodes}
    if ctx.json:
        emit_json(doc)
    else:
        _print(findings, "")
        if not nodes:
            click.echo("no nodes have linked to this hub since it started")
        for node in nodes:
            click.echo(f"node {node['node_id']}:" + ("" if node["ok"] else " ERRORS"))
            _print(node["findings"], "the node's environment", indent="  ")
    if not ok:
        sys.exit(1)


MARK = {"ok": "ok   ", "warn": "warn ", "error": "ERROR"}


def _print(findings: list[Finding], seen_by: str, indent: str = "") -> None:
    area = ""
    for f in findings:
        if f["area"] != area:
            area = f["area"]
            extra = f" (checked in {seen_by})" if area == "providers" else ""
            click.echo(f"{indent}{area}{extra}:")
        click.echo(f"{indent}  {MARK[f['level']]} {f['what']}")
        if f["fix"] and f["level"] != "ok":
            click.echo(f"{indent}        -> {f['fix']}")
