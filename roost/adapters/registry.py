"""The providers roost knows, by name: the built-in echo agent and the vendor CLIs."""

from __future__ import annotations

import importlib

from roost.adapters.base import Adapter
from roost.adapters.echo import EchoAdapter

# provider -> module and class of its adapter (one module per provider)
VENDORS = {"claude": "ClaudeAdapter", "codex": "CodexAdapter", "kimi": "KimiAdapter"}
PROVIDERS = ("echo", *VENDORS)


def adapters() -> dict[str, Adapter]:
    found: dict[str, Adapter] = {"echo": EchoAdapter()}
    for provider, cls in VENDORS.items():
        name = f"roost.adapters.{provider}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name:
                raise
            continue  # not built yet: that provider is simply not offered
        found[provider] = getattr(module, cls)()
    return found
