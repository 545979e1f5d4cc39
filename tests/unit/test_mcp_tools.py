"""``roost mcp``'s tools without a node: their arguments checked against their own schemas, and
how a record that needs a human is reported."""

from __future__ import annotations

from typing import Any

import pytest

from roost.cli import mcp_tools
from roost.wire.errors import RoostError


def field(tool: str, args: dict[str, Any]) -> str:
    with pytest.raises(RoostError) as refused:
        mcp_tools.checked(mcp_tools.BY_NAME[tool], args)
    assert refused.value.code == "bad-request"
    return str(refused.value.detail["field"])


def test_arguments_that_fit_the_schema_pass_and_nulls_are_dropped() -> None:
    spawn = mcp_tools.BY_NAME["spawn"]
    args = {"provider": "echo", "env": {"A": "1"}, "mode": "stream", "name": None}
    assert mcp_tools.checked(spawn, args) == {
        "provider": "echo",
        "env": {"A": "1"},
        "mode": "stream",
    }
    key = mcp_tools.BY_NAME["key"]
    assert mcp_tools.checked(key, {"id": "a", "keys": ["escape", "enter"]})["keys"] == [
        "escape",
        "enter",
    ]
    stop = mcp_tools.BY_NAME["stop"]
    assert mcp_tools.checked(stop, {"id": "a", "grace_ms": 0}) == {"id": "a", "grace_ms": 0}


@pytest.mark.parametrize(
    ("tool", "args", "bad"),
    [
        ("spawn", {}, "provider"),
        ("spawn", {"provider": "echo", "mode": "tty"}, "mode"),
        ("spawn", {"provider": "echo", "env": {"A": 1}}, "env"),
        ("spawn", {"provider": "echo", "cwdd": "/"}, "cwdd"),
        ("prompt", {"id": "a"}, "text"),
        ("prompt", {"id": "a", "text": 5}, "text"),
        ("prompt", {"id": "a", "text": "x", "op": "o" * 129}, "op"),
        ("key", {"id": "a", "keys": []}, "keys"),
        ("key", {"id": "a", "keys": ["entr"]}, "keys"),
        ("stop", {"id": "a", "grace_ms": True}, "grace_ms"),
        ("stop", {"id": "a", "grace_ms": 60_001}, "grace_ms"),
        ("wait", {"id": "a", "timeout": -1}, "timeout"),
        ("events", {"limit": 0}, "limit"),
        ("show", {"id": ""}, "id"),
    ],
)
def test_arguments_outside_the_schema_are_bad_request_naming_the_field(
    tool: str, args: dict[str, Any], bad: str
) -> None:
    assert field(tool, args) == bad


def test_an_unknown_tool_is_bad_request() -> None:
    with pytest.raises(RoostError) as refused:
        mcp_tools.run(None, "attach", {})  # type: ignore[arg-type]  # refused before any call
    assert refused.value.code == "bad-request" and "the tools: list, show" in refused.value.message


def test_a_record_in_attention_needs_a_human_with_its_reason() -> None:
    assert mcp_tools.human({"state": "attention", "attention": "permission"}) == {
        "needs_human": True,
        "attention": "permission",
    }
    assert mcp_tools.human({"state": "live", "attention": None}) == {
        "needs_human": False,
        "attention": None,
    }
    doc = mcp_tools.with_record(
        {"record": {"id": "r1", "state": "attention", "attention": "login"}}
    )
    assert doc["needs_human"] is True and doc["attention"] == "login"


def test_every_schema_is_an_object_of_described_properties() -> None:
    for tool in mcp_tools.TOOLS:
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        for name, prop in schema["properties"].items():
            assert prop["type"] in mcp_tools.JSON_TYPES, (tool.name, name)
            assert prop["description"], (tool.name, name)
