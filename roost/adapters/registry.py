"""The adapter of each provider ``roost.providers`` registers, imported when it is wanted; a
provider the configuration file defines gets the generic adapter built from its table."""

from __future__ import annotations

import importlib

from roost.adapters.base import Adapter
from roost.config import Config
from roost.provider_spec import ProviderSpec
from roost.providers import adapter_path, define, fixed


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


def configured(spec: ProviderSpec) -> Adapter:
    """The adapter of a provider the configuration file defines."""
    from roost.adapters.generic import GenericAdapter

    return GenericAdapter(spec)


def adapters(cfg: Config | None = None) -> dict[str, Adapter]:
    """An adapter of every provider whose module is there, by name, and one of each provider
    ``cfg`` defines (which this process then knows by name: ``roost.providers.define``)."""
    found: dict[str, Adapter] = {}
    for provider in fixed():
        module = adapter_path(provider).partition(":")[0]
        try:
            found[provider] = adapter(provider)
        except ModuleNotFoundError as err:
            if err.name != module:
                raise
            continue  # not built yet: that provider is simply not offered
    if cfg is not None:
        specs = cfg.provider_specs()
        define(tuple(specs))
        found.update((name, configured(spec)) for name, spec in specs.items())
    return found
