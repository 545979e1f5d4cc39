"""``roost doctor``'s provider checks: is each vendor CLI there, which version, is it logged in.

Run as ``python -m roost.adapters.doctor --json [--provider P ...]``: by the CLI when no node
runs, and by the adapter host (``adapter.doctor``) when one does, so the answer is the node's
environment's. Each CLI is asked ``--version``, checked against the versions its adapter knows
(``Adapter.cli``), and then whether it is logged in, the way its adapter tells
(``Adapter.login_state``: a status command, or the files in the CLI's home). Only the verdict and
the method are kept from those answers, never what they print (an account, a key's tail). Every
probe has a deadline and runs in its own process group, killed when it passes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roost.adapters.base import Adapter, Runner, VendorCli
from roost.adapters.registry import adapter
from roost.adapters.settings import binary
from roost.config import Config, config_path, load
from roost.interpreter import python_module
from roost.providers import built_in, vendors
from roost.wire.errors import RoostError

PROBE_TIMEOUT_S = 15.0  # kimi (Node) takes 4 s for --version on an idle 2-core machine
VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
SECRETS = ("ROOST_TOKEN", "ROOST_ACTOR_TOKEN")


def run(argv: list[str], env: dict[str, str]) -> tuple[int | None, str]:
    """``argv``'s exit code (None: it did not end in time, or could not start) and output."""
    try:
        proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=env.get("HOME") or None,
        )
    except OSError as exc:
        return None, f"cannot start: {exc.strerror}"
    try:
        out, _ = proc.communicate(timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, f"no answer within {PROBE_TIMEOUT_S:g} s"
    return proc.returncode, out.decode("utf-8", "replace")


def finding(level: str, what: str, fix: str = "") -> dict[str, str]:
    return {"level": level, "what": what, "fix": fix}


def probe(
    provider: str, cfg: Config, environ: Mapping[str, str], runner: Runner = run
) -> dict[str, Any]:
    """One provider's report: the binary, its version against roost's, its login."""
    if provider in cfg.defined_providers():
        return probe_defined(provider, cfg, environ)
    prov = adapter(provider)
    cli = _cli(prov)
    found = binary(provider, cfg, environ)
    env = {k: v for k, v in environ.items() if k not in SECRETS}
    env.update({**cfg.provider_env(provider), "NO_COLOR": "1"})
    report: dict[str, Any] = {"provider": provider, **found, "version": None, "login": None}
    report["home"] = env.get(cli.home_env) or str(Path.home() / cli.home_dir)
    report["known"] = f"{cli.line}.x (tested {cli.tested})"
    if found["missing"]:
        explicit = found["from"] != "default"
        report["findings"] = [
            finding(
                "error" if explicit else "warn",
                f"{provider}: {found['looked_for']!r} not found ({found['from']})",
                f"install it ({cli.pinned}) or name it with providers.{provider}.bin "
                f"in the config file or {prov.bin_env}",
            )
        ]
        return report
    report["findings"] = _version(prov, found["path"], env, runner, report)
    if not any(f["level"] == "error" for f in report["findings"]):
        report["findings"] += _login(prov, found["path"], env, runner, report)
    return report


def probe_defined(provider: str, cfg: Config, environ: Mapping[str, str]) -> dict[str, Any]:
    """A provider the configuration file defines: only whether its program is there; roost
    knows no versions of it and no way to tell its login."""
    found = binary(provider, cfg, environ)
    report: dict[str, Any] = {"provider": provider, **found, "version": None, "login": None}
    if found["missing"]:
        install = cfg.provider_specs()[provider].install
        fix = f"install it ({install}) or" if install else "install it, or"
        what = f"{provider}: {found['looked_for']!r} not found ({found['from']})"
        report["findings"] = [finding("error", what, f"{fix} correct providers.{provider}.command")]
    else:
        what = f"{provider} at {found['path']} (defined in the config file: no version check)"
        report["findings"] = [finding("ok", what)]
    return report


def _cli(prov: Adapter) -> VendorCli:
    if prov.cli is None:
        raise RoostError("bad-request", f"{prov.provider} is built in: it has no CLI to check")
    return prov.cli


def _version(
    prov: Adapter, path: str, env: dict[str, str], runner: Runner, report: dict[str, Any]
) -> list[dict[str, str]]:
    provider, cli = prov.provider, _cli(prov)
    code, out = runner([path, "--version"], env)
    first = next((ln.strip() for ln in out.splitlines() if ln.strip()), "")[:200]
    report["version_output"] = first
    match = VERSION_RE.search(out)
    if code != 0 or match is None:
        return [
            finding(
                "error",
                f"{provider}: `{path} --version` failed ({first or f'exit {code}'})",
                f"reinstall it: {cli.pinned}",
            )
        ]
    version = match.group(0)
    report["version"] = version
    problem = prov.version_problem(out, version, path)
    if problem is not None:
        return [finding("error", *problem)]
    if ".".join(match.groups()[:2]) != cli.line:
        return [
            finding(
                "warn",
                f"{provider} {version} is not a version roost knows "
                f"({cli.line}.x, tested {cli.tested})",
                f"it may work; if sessions misbehave, install {cli.tested}: {cli.pinned}",
            )
        ]
    return [finding("ok", f"{provider} {version} at {path}")]


def _login(
    prov: Adapter, path: str, env: dict[str, str], runner: Runner, report: dict[str, Any]
) -> list[dict[str, str]]:
    provider = prov.provider
    state, how = prov.login_state(path, env, runner)
    report["login"], report["login_how"] = state, how
    if state == "logged-in":
        return [finding("ok", f"{provider} is logged in ({how})")]
    if state == "logged-out":
        return [finding("warn", f"{provider} is not logged in ({how})", _cli(prov).login)]
    return [finding("warn", f"{provider}: could not tell whether it is logged in ({how})")]


async def in_child(provider: str, timeout: float = 45.0) -> dict[str, Any]:
    """``probe`` of ``provider`` in a child process (``python -m roost.adapters.doctor``), so
    that an event loop never waits on a CLI; the built-in echo needs no checks."""
    if provider in built_in():
        return {"provider": provider, "findings": [finding("ok", f"{provider} is built in")]}
    proc = await asyncio.create_subprocess_exec(
        *python_module("roost.adapters.doctor", "--json", "--provider", provider),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        raise RoostError("timeout", "the provider checks did not finish in time") from None
    try:
        found: dict[str, Any] = json.loads(out)["providers"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        raise RoostError("internal", "the provider checks printed no report") from None
    return found


def check_all(providers: list[str], environ: Mapping[str, str]) -> dict[str, Any]:
    """Every provider's report (none named: each vendor's and each the file defines), and the
    config file as this environment reads it."""
    problem = None
    try:
        cfg = load(environ=environ)
    except RoostError as err:
        problem, cfg = err.to_body(), Config(*config_path(environ))
    known = (*vendors(), *cfg.defined_providers())
    return {
        "config": {"path": str(cfg.path), "exists": cfg.exists, "error": problem},
        "providers": [
            probe(p, cfg, environ) if p in known else _unknown(p, known) for p in providers or known
        ],
    }


def _unknown(provider: str, known: tuple[str, ...]) -> dict[str, Any]:
    what = f"{provider!r} is not a provider with a CLI to check (known: {', '.join(known)})"
    return {"provider": provider, "findings": [finding("error", what)]}


def main() -> None:
    parser = argparse.ArgumentParser(prog="roost-doctor")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--provider", action="append", help="a vendor or one the file defines")
    args = parser.parse_args()
    doc = check_all(args.provider or [], os.environ)
    if args.json:
        print(json.dumps(doc, sort_keys=True))
        return
    for prov in doc["providers"]:
        for item in prov["findings"]:
            fix = f"\n    fix: {item['fix']}" if item["fix"] else ""
            print(f"{item['level']:<5} {item['what']}{fix}")
    sys.exit(0)


if __name__ == "__main__":
    main()
