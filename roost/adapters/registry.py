"""The providers roost knows, by name."""

from __future__ import annotations

from roost.adapters.base import Adapter
from roost.adapters.echo import EchoAdapter


def adapters() -> dict[str, Adapter]:
    return {a.provider: a for a in (EchoAdapter(),)}
