"""The recorded screens and streams of the real CLIs, as the provider tests read them.

Kept in the repository (tests/fixtures/provider-captures), so a clean clone tests against them; a
missing capture is a failure, never a skip.
"""

from __future__ import annotations

from pathlib import Path

CAPTURES = Path(__file__).resolve().parent.parent / "fixtures" / "provider-captures"


def capture(name: str) -> str:
    return (CAPTURES / name).read_text()


def screens(provider: str) -> set[str]:
    """The names of a provider's screen captures."""
    return {p.name for p in CAPTURES.glob(f"{provider}-*.txt")}


def capture_bytes(name: str) -> bytes:
    """A raw capture: the bytes a CLI wrote to its terminal (``*.pty``)."""
    return (CAPTURES / name).read_bytes()
