"""Fixtures for the real-CLI tests (helpers and the notes on each CLI are in harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import node as node  # the e2e harness's node, reaped the same way
from tests.fakes.model_api import ModelApi
from tests.real.harness import Cli, need


@pytest.fixture(scope="session")
def claude() -> Cli:
    return need("claude")


@pytest.fixture(scope="session")
def codex() -> Cli:
    return need("codex")


@pytest.fixture(scope="session")
def kimi() -> Cli:
    return need("kimi")


# -- the model stand-in --------------------------------------------------------------------------


@pytest.fixture
def model_api(tmp_path: Path) -> Iterator[ModelApi]:
    api = ModelApi(log_path=tmp_path / "model_api.jsonl").start()
    try:
        yield api
    finally:
        api.close()
