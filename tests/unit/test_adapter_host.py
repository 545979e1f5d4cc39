"""The adapter actor's reading of request bodies: the classification's optional view."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from roost.actors import adapter_host as adapters_host
from roost.actors.adapter_host import AdapterActor
from roost.actors.runtime.peer import Peer
from roost.adapters.base import Adapter, Classification, Launch, LaunchContext, SessionView
from roost.adapters.evidence import Evidence
from roost.wire import protocol as p
from roost.wire.errors import RoostError

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


class Stub:
    """A peer the actor registers its handlers on (nothing is sent in these tests)."""

    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}


def turn_body(**extra: object) -> dict[str, object]:
    session = "6f9619ff-8b86-4d01-b42d-00cf4fc964ff"  # a UUID: claude checks it
    return {"provider_session": session, "first": False, **CONTEXT, "mode": "stream", **extra}


@pytest.mark.parametrize("provider", ["claude", "codex", "kimi", "echo"])
def test_a_turn_plan_without_text_says_where_the_text_goes(provider: str) -> None:
    """The plan, its text argument replaced, is the command asked with that text."""
    from roost.adapters.registry import adapters

    actor = AdapterActor(adapters()[provider], cast(Peer, Stub()))
    text = "-rm -rf / ; $(x) 'quoted'"
    plan = asyncio.run(actor.turn(cast(p.Header, None), turn_body()))
    asked = asyncio.run(actor.turn(cast(p.Header, None), turn_body(text=text)))
    assert isinstance(plan["text_arg"], int) and "text_arg" not in asked
    argv = list(plan["argv"])
    argv[plan["text_arg"]] = text
    assert argv == asked["argv"] and plan["env"] == asked["env"]


def test_a_command_that_takes_the_text_otherwise_has_no_plan() -> None:
    slot = adapters_host.TEXT_SLOT
    assert adapters_host.text_arg(Launch(["x", "-p", slot])) == 2
    assert adapters_host.text_arg(Launch(["x", f"--prompt={slot}"])) is None
    assert adapters_host.text_arg(Launch(["x", slot, slot])) is None
    assert adapters_host.text_arg(Launch(["x", slot], env={"PROMPT": slot})) is None
    assert adapters_host.text_arg(Launch(["x"])) is None


def test_an_echo_record_may_ask_for_its_text_inside_an_argument() -> None:
    """ROOST_ECHO_PROMPT_ATTACHED=1: no plan for any text (tests that hold the adapter host on a
    turn's acceptance rely on it), and the command takes the text all the same."""
    from roost.adapters.registry import adapters

    actor = AdapterActor(adapters()["echo"], cast(Peer, Stub()))
    env = {**cast(dict[str, str], CONTEXT["env"]), "ROOST_ECHO_PROMPT_ATTACHED": "1"}
    plan = asyncio.run(actor.turn(cast(p.Header, None), turn_body(env=env)))
    assert plan["text_arg"] is None
    asked = asyncio.run(actor.turn(cast(p.Header, None), turn_body(env=env, text="-x")))
    assert "--print=-x" in asked["argv"]


# -- fork ----------------------------------------------------------------------------------------

SOURCES = {
    "claude": "11111111-2222-4333-8444-555555555555",
    "codex": "01a22acc-1207-7de3-a35d-56fcd1fb0061",
    "kimi": "session_e2e5fa5d-2216-45bd-b742-506d61563be4",
    "echo": "e-1",
}


@pytest.mark.parametrize("provider", sorted(SOURCES))
def test_a_fork_s_first_turn_is_the_fork_and_its_plan_takes_any_text(provider: str) -> None:
    from roost.adapters.registry import adapters

    actor = AdapterActor(adapters()[provider], cast(Peer, Stub()))
    source = SOURCES[provider]
    # the fork's id as its launch plan assigned it (claude, echo), or none (codex, kimi choose it)
    new = "0b6f1c7e-7d59-4f6c-9a53-2f0e4c1d8b21" if provider in ("claude", "echo") else None
    body = turn_body(first=True, fork=source, provider_session=new)
    plan = asyncio.run(actor.turn(cast(p.Header, None), body))
    asked = asyncio.run(actor.turn(cast(p.Header, None), {**body, "text": "-x y"}))
    assert (
        "fork" in asked["argv"]
        or "--fork-session" in asked["argv"]
        or any(" fork " in arg for arg in asked["argv"])
    )
    assert source in asked["argv"] and asked["provider_session"] == new
    argv = list(plan["argv"])
    argv[plan["text_arg"]] = "-x y"
    assert argv == asked["argv"]
    later = asyncio.run(actor.turn(cast(p.Header, None), turn_body(fork=source, text="-x y")))
    assert source not in later["argv"]  # only the first turn forks


class Forkless(Adapter):
    provider = "plain"

    def fresh(self, ctx: LaunchContext) -> Launch:
        return Launch(["sh"])

    def resume(self, provider_session: str, ctx: LaunchContext) -> Launch:
        return Launch(["sh", provider_session])

    def classify(
        self, screen: str, *, exited: bool, evidence: Evidence | None = None
    ) -> Classification:
        return Classification("ready")


def test_a_provider_without_a_fork_says_so() -> None:
    actor = AdapterActor(Forkless(), cast(Peer, Stub()))
    with pytest.raises(RoostError) as err:
        asyncio.run(actor.launch(cast(p.Header, None), {**CONTEXT, "fork": "s1"}))
    assert err.value.code == "provider-cannot-fork" and err.value.detail == {"provider": "plain"}
    with pytest.raises(RoostError) as err:
        asyncio.run(actor.turn(cast(p.Header, None), turn_body(first=True, fork="s1", text="hi")))
    assert err.value.code == "provider-cannot-fork"


def test_a_fork_check_refuses_the_source_s_own_id() -> None:
    from roost.adapters.registry import adapters

    actor = AdapterActor(adapters()["echo"], cast(Peer, Stub()))
    body = {"screen": "resumed n-1 (1 turns)\necho-ready> ", "samples": [], **CONTEXT}
    same = asyncio.run(
        actor.verify_resume(
            cast(p.Header, None), {**body, "fork": "s-1", "provider_session": "s-1"}
        )
    )
    assert same["outcome"] == "resume_failed" and "source" in same["detail"]
    new = asyncio.run(
        actor.verify_resume(
            cast(p.Header, None), {**body, "fork": "s-1", "provider_session": "n-1"}
        )
    )
    unknown = asyncio.run(actor.verify_resume(cast(p.Header, None), {**body, "fork": "s-1"}))
    assert new["outcome"] == unknown["outcome"] == "resumed"  # the screen shows n-1
    blank = {**body, "screen": "echo-ready> ", "fork": "s-1"}
    undecided = asyncio.run(actor.verify_resume(cast(p.Header, None), blank))
    assert undecided["outcome"] is None  # no id of its own known yet: not verified
    shown_source = {**body, "screen": "resumed s-1 (1 turns)\necho-ready> ", "fork": "s-1"}
    same = asyncio.run(actor.verify_resume(cast(p.Header, None), shown_source))
    assert same["outcome"] == "resume_failed"
