"""``roost doctor``'s provider checks: is each vendor CLI there, which version, is it logged in.

Run as ``python -m roost.adapters.doctor --json [--provider P ...]``: by the CLI when no node
runs, and by the adapter host (``adapter.doctor``) when one does, so the answer is the node's
environment's. Each CLI is asked with its own commands: ``--version``; claude
``auth status`` (JSON), codex ``login status``; kimi has no status command, so its home's
``credentials/`` and ``config.toml`` tell. Only the verdict and the method are kept from those
answers, never what they print (an account, a key's tail). Every probe has a deadline and runs
in its own process group, killed when it passes.
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
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from roost.adapters.settings import binary
from roost.broker.errors import RoostError
from roost.broker.interpreter import python_module
from roost.config import VENDORS, Config, config_path, load

PROBE_TIMEOUT_S = 15.0  # kimi (Node) takes 4 s for --version on an idle 2-core machine
# provider -> (the release line roost's adapter follows, the version it was tested with)
KNOWN = {"claude": ("2.1", "2.1.332"), "codex": ("0.171", "0.171.0"), "kimi": ("2.1", "2.1.0")}
HOMES = {"claude": "CLAUDE_CONFIG_DIR", "codex": "CODEX_HOME", "kimi": "KIMI_CODE_HOME"}
HOME_DEFAULT = {"claude": ".claude", "codex": ".codex", "kimi": ".kimi-code"}
INSTALL = {
    "claude": "npm install -g @anthropic-ai/claude-code@2.1.332",
    "codex": "npm install -g @openai/codex@0.171.0",
    "kimi": "npm install -g @moonshot-ai/kimi-code@2.1.0 (needs Node >= 22.19)",
}
LOGIN = {
    "claude": "run `claude` and /login (or `claude setup-token`), with the same CLAUDE_CONFIG_DIR",
    "codex": "run `codex login` with the same CODEX_HOME (codex exec also takes CODEX_API_KEY)",
    "kimi": "run `kimi` and /login (or set default_model in $KIMI_CODE_HOME/config.toml)",
}
VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
SECRETS = ("ROOST_TOKEN", "ROOST_ACTOR_TOKEN")

Runner = Callable[[list[str], dict[str, str]], tuple[int | None, str]]


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
    found = binary(provider, cfg, environ)
    env = {k: v for k, v in environ.items() if k not in SECRETS}
    env.update({**cfg.provider_env(provider), "NO_COLOR": "1"})
    report: dict[str, Any] = {"provider": provider, **found, "version": None, "login": None}
    report["home"] = env.get(HOMES[provider]) or str(Path.home() / HOME_DEFAULT[provider])
    line, tested = KNOWN[provider]
    report["known"] = f"{line}.x (tested {tested})"
    if found["missing"]:
        explicit = found["from"] != "default"
        report["findings"] = [
            finding(
                "error" if explicit else "warn",
                f"{provider}: {found['looked_for']!r} not found ({found['from']})",
                f"install it ({INSTALL[provider]}) or name it with providers.{provider}.bin "
                f"in the config file or ROOST_{provider.upper()}_BIN",
            )
        ]
        return report
    report["findings"] = _version(provider, found["path"], env, runner, report)
    if not any(f["level"] == "error" for f in report["findings"]):
        report["findings"] += _login(provider, found["path"], env, runner, report)
    return report


def _version(
    provider: str, path: str, env: dict[str, str], runner: Runner, report: dict[str, Any]
) -> list[dict[str, str]]:
    code, out = runner([path, "--version"], env)
    first = next((ln.strip() for ln in out.splitlines() if ln.strip()), "")[:200]
    report["version_output"] = first
    match = VERSION_RE.search(out)
    if code != 0 or match is None:
        return [
            finding(
                "error",
                f"{provider}: `{path} --version` failed ({first or f'exit {code}'})",
                f"reinstall it: {INSTALL[provider]}",
            )
        ]
    version = match.group(0)
    report["version"] = version
    if provider == "kimi" and (out.lstrip().startswith("kimi, version") or "kimi-cli" in out):
        return [
            finding(
                "error",
                f"kimi: {path} is the legacy Python kimi-cli {version}, which runs an install "
                "script when started bare",
                f"install the Kimi Code CLI ({INSTALL['kimi']}) and name it with "
                "providers.kimi.bin or ROOST_KIMI_BIN",
            )
        ]
    line, tested = KNOWN[provider]
    if ".".join(match.groups()[:2]) != line:
        return [
            finding(
                "warn",
                f"{provider} {version} is not a version roost knows ({line}.x, tested {tested})",
                f"it may work; if sessions misbehave, install {tested}: {INSTALL[provider]}",
            )
        ]
    return [finding("ok", f"{provider} {version} at {path}")]


def _login(
    provider: str, path: str, env: dict[str, str], runner: Runner, report: dict[str, Any]
) -> list[dict[str, str]]:
    state, how = _login_state(provider, path, env, runner)
    report["login"], report["login_how"] = state, how
    if state == "logged-in":
        return [finding("ok", f"{provider} is logged in ({how})")]
    if state == "logged-out":
        return [finding("warn", f"{provider} is not logged in ({how})", LOGIN[provider])]
    return [finding("warn", f"{provider}: could not tell whether it is logged in ({how})")]


def _login_state(provider: str, path: str, env: dict[str, str], runner: Runner) -> tuple[str, str]:
    if provider == "kimi":
        return _kimi_login(Path(env.get(HOMES["kimi"]) or Path.home() / HOME_DEFAULT["kimi"]))
    argv = [path, "auth", "status"] if provider == "claude" else [path, "login", "status"]
    how = " ".join([provider, *argv[1:]])
    code, out = runner(argv, env)
    if provider == "claude":
        try:
            doc = json.loads(out[out.index("{") :])
        except ValueError:
            return "unknown", how
        method = doc.get("authMethod") if isinstance(doc.get("authMethod"), str) else "?"
        return ("logged-in", f"{how}: {method}") if doc.get("loggedIn") else ("logged-out", how)
    if code == 0 and "logged in" in out.lower():
        method = "api key" if "api key" in out.lower() else "chatgpt"
        return "logged-in", f"{how}: {method}"
    if "not logged in" in out.lower():
        return "logged-out", how
    return "unknown", how


def _kimi_login(home: Path) -> tuple[str, str]:
    """kimi has no status command: credentials saved by /login, or a configured model."""
    credentials = home / "credentials"
    with contextlib.suppress(OSError):
        if credentials.is_dir() and any(credentials.iterdir()):
            return "logged-in", "credentials in $KIMI_CODE_HOME/credentials"
    try:
        doc = tomllib.loads((home / "config.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = {}
    if doc.get("default_model"):
        return "logged-in", "default_model in $KIMI_CODE_HOME/config.toml"
    return "logged-out", "no credentials or default_model in $KIMI_CODE_HOME"


async def in_child(provider: str, timeout: float = 45.0) -> dict[str, Any]:
    """``probe`` of ``provider`` in a child process (``python -m roost.adapters.doctor``), so
    that an event loop never waits on a CLI; the built-in echo needs no checks."""
    if provider not in VENDORS:
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
    """Every provider's report, and the config file as this environment reads it."""
    problem = None
    try:
        cfg = load(environ=environ)
    except RoostError as err:
        problem, cfg = err.to_body(), Config(*config_path(environ))
    return {
        "config": {"path": str(cfg.path), "exists": cfg.exists, "error": problem},
        "providers": [probe(p, cfg, environ) for p in providers],
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="roost-doctor")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--provider", action="append", choices=VENDORS)
    args = parser.parse_args()
    doc = check_all(args.provider or list(VENDORS), os.environ)
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
