"""The adapter of each provider ``roost.providers`` registers, imported when it is wanted."""

from __future__ import annotations

import importlib

from roost.adapters.base import Adapter
from roost.providers import adapter_path, names


def adapter_class(provider: str) -> type[Adapter]:
    """``provider``'s adapter class (KeyError: not a provider; ModuleNotFoundError: its module
    is not there)."""
    module, _, name = adapter_path(provider).partition(":")
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, Adapter) and cls.provider == provider):
        raise TypeError(f"{module}:{name} is not the adapter of {provider!r}")
    return cls


def adapter(provider: str) -> Adapter:
    return adapter_class(provider)()


def adapters() -> dict[str, Adapter]:
    """An adapter of every provider whose module is there, by name."""
    found: dict[str, Adapter] = {}
    for provider in names():
        module = adapter_path(provider).partition(":")[0]
        try:
            found[provider] = adapter(provider)
        except ModuleNotFoundError as err:
            if err.name != module:
                raise
            continue  # not built yet: that provider is simply not offered
    return found
