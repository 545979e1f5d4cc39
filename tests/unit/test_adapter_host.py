"""The adapter actor's reading of request bodies: the classification's optional view."""

from __future__ import annotations

import pytest

from roost.actors.adapters import AdapterActor
from roost.adapters.base import LaunchContext, SessionView
from roost.broker.errors import RoostError

CONTEXT = {"mode": "pty", "cwd": "/srv/work/proj", "env": {"CODEX_HOME": "/h"}, "data_dir": "/d"}


def test_a_body_without_a_view_reads_as_an_empty_one() -> None:
    assert AdapterActor._view({"screen": ""}) == SessionView()
    assert AdapterActor._launched({"screen": ""}) is None


def test_the_view_carries_title_identity_launch_time_and_context() -> None:
    body = {"title": "\u2819 hi | proj", "provider_session": "t1", "since": 5, **CONTEXT}
    assert AdapterActor._view(body) == SessionView(
        "\u2819 hi | proj",
        "t1",
        5.0,
        LaunchContext("/srv/work/proj", "pty", {"CODEX_HOME": "/h"}, "/d"),
    )


def test_an_empty_title_is_a_title_not_a_bad_request() -> None:
    """A CLI that never set one: the supervisor sends "" (a refusal here would drop every
    classification of the session)."""
    assert AdapterActor._view({"title": "", "since": 1.0, **CONTEXT}).title == ""


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"since": "now"}, "since"),
        ({"since": True}, "since"),
        ({"title": 5}, "title"),
        ({"title": "x" * 5000}, "title"),
        ({"mode": "tty", "cwd": "/", "data_dir": "/d"}, "mode"),
    ],
)
def test_a_bad_field_is_named(body: dict[str, object], field: str) -> None:
    with pytest.raises(RoostError) as err:
        AdapterActor._view(body)
    assert err.value.code == "bad-request" and err.value.detail == {"field": field}
