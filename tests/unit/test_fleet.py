"""The hub's placement rule and the fleet view's lines, from the nodes' status answers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from roost.actors.hub import fleet
from roost.actors.node import checkup
from roost.cli.fleet import _row, providers
from roost.providers import vendors
from roost.wire.errors import RoostError
from roost.wire.policy import check_node_id


def status(
    live: int = 0,
    attention: int = 0,
    load: float = 0.0,
    cpus: int = 2,
    free: int = 8000,
    codex: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    codex = codex or {"installed": True, "version": "0.171.0", "login": "logged-in"}
    return {
        "roost": "0.1.0",
        "records": {"live": live - attention, "attention": attention, "dormant": 3},
        "storage": {"health": "ok"},
        "accepting": True,
        "host": {
            "load": [load, 0, 0],
            "cpus": cpus,
            "memory_mb": {"total": 16000, "available": free},
        },
        "providers": {"echo": {"installed": True, "login": None}, "codex": codex},
        **extra,
    }


def line(node_id: str, doc: dict[str, Any] | None, error: str | None = None) -> dict[str, Any]:
    known = {"node_id": node_id, "linked": doc is not None or error != "not linked"}
    return fleet.row(known, doc, error)


def test_a_row_counts_live_and_waiting_sessions() -> None:
    row = line("a", status(live=3, attention=1))
    assert row["sessions"] == {"live": 3, "attention": 1, "records": 6}
    assert row["healthy"] and row["problem"] is None


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        (status(storage={"health": "full", "code": "storage-full"}), "storage full"),
        (status(records=None, storage=None), "storage not answering"),
        (status(accepting=False), "not accepting sessions (held by a claim or stopping)"),
        (status(free=100), "100 MB of memory available"),
    ],
)
def test_an_unhealthy_node_is_no_candidate(doc: dict[str, Any], problem: str) -> None:
    row = line("a", doc)
    assert row["problem"] == problem and not row["healthy"]
    assert fleet.candidate(row, "echo") == problem


@pytest.mark.parametrize(
    ("codex", "why"),
    [
        ({"installed": False, "problem": "codex: 'codex' not found"}, "codex is not installed"),
        ({"installed": True, "login": "logged-out"}, "codex is not logged in"),
        ({"installed": True, "login": "unknown"}, "cannot tell whether codex is logged in"),
        ({"installed": None, "problem": "not checked: timeout"}, "codex not checked: timeout"),
    ],
)
def test_a_provider_that_cannot_run_there_is_said(codex: dict[str, Any], why: str) -> None:
    assert (fleet.candidate(line("a", status(codex=codex)), "codex") or "").startswith(why)


def test_the_least_loaded_node_is_picked_and_every_choice_explained() -> None:
    lines = [
        line("busy", status(live=4)),  # 4 sessions on 2 CPUs
        line("hot", status(load=3.0)),  # idle, but its machine is loaded
        line("calm", status(live=1, load=0.2)),
        line("gone", None, "not linked"),
        line("mute", None, "timeout"),
    ]
    placed = fleet.place(lines, "codex")
    assert placed["node"] == "calm"
    assert placed["why"].startswith("the least loaded of 3 that can run codex: 1 live sessions")
    why = {c["node_id"]: c for c in placed["candidates"]}
    assert why["gone"] == {"node_id": "gone", "eligible": False, "why": "not linked (down)"}
    assert why["mute"]["why"] == "timeout" and not why["mute"]["eligible"]
    assert why["busy"]["load"] > why["hot"]["load"] > why["calm"]["load"]


def test_ties_go_to_the_first_node_id_and_a_lone_candidate_is_said_so() -> None:
    placed = fleet.place([line("b", status()), line("a", status())], "echo")
    assert placed["node"] == "a"
    alone = fleet.place([line("b", status()), line("a", None, "timeout")], "echo")
    assert alone["node"] == "b" and alone["why"].startswith("the only node that can run echo")


def test_no_node_that_fits_is_refused_with_every_reason() -> None:
    lines = [line("a", status(codex={"installed": False})), line("b", None, "not linked")]
    with pytest.raises(RoostError) as refused:
        fleet.place(lines, "codex")
    assert refused.value.code == "no-node-fits"
    assert "a: codex is not installed; b: not linked (down)" in refused.value.message
    assert [c["node_id"] for c in refused.value.detail["candidates"]] == ["a", "b"]
    with pytest.raises(RoostError, match="none linked"):
        fleet.place([], "echo")


def test_the_fleet_line_shows_providers_with_their_login() -> None:
    doc = status(live=2, attention=1, load=0.5, codex={"installed": True, "login": "logged-out"})
    row = _row(line("lab-1", doc))
    assert row == ["lab-1", "ok", "0.1.0", "echo, codex (logged out)", "2", "1", "0.5/2", "8000"]
    assert providers({"codex": {"installed": False}, "echo": {"installed": True}}) == "echo"
    down = _row({"node_id": "x", "linked": False, "gone_s": 12.4})
    assert down[:2] == ["x", "down (12 s)"]


def test_auto_is_no_node_id() -> None:
    for reserved in ("auto", "hub"):
        with pytest.raises(RoostError, match="not 'hub' or 'auto'"):
            check_node_id(reserved)
    assert check_node_id("autumn") == "autumn"


class Adapters:
    """The adapter host as the node's checks call it: each provider's report, counted."""

    def __init__(self) -> None:
        self.calls = 0
        self.failing = False
        self.login = "logged-in"

    async def call(self, target: str, method: str, body: Any = None, **kw: Any) -> dict[str, Any]:
        self.calls += 1
        await asyncio.sleep(0.01)
        provider = target.split("/", 1)[1]
        if self.failing:
            raise RoostError("unavailable", "the adapter host is restarting")
        return {
            "provider": provider,
            "missing": False,
            "version": "1.2.3",
            "login": self.login,
            "findings": [{"level": "ok", "what": "fine"}],
        }


def test_a_node_answers_from_its_last_checks_and_makes_them_again_when_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> None:
        adapters = Adapters()
        checks = checkup.ProviderChecks(adapters)
        first, second = await asyncio.gather(checks.latest(), checks.latest())  # one check
        per_check = len(vendors())
        assert adapters.calls == per_check and first == second
        assert first["echo"]["installed"] and first["echo"]["login"] is None
        assert first["codex"] == {
            "installed": True,
            "version": "1.2.3",
            "login": "logged-in",
            "problem": None,
            "checked_s_ago": 0.0,
        }
        await checks.latest()
        assert adapters.calls == per_check  # fresh: answered from the last checks
        adapters.login = "logged-out"
        monkeypatch.setattr(checkup, "FRESH_S", 0.0)
        stale = await checks.latest()  # answered at once, checked again behind the answer
        assert stale["codex"]["login"] == "logged-in"
        assert checks._running is not None
        await checks._running
        assert (await checks.latest())["codex"]["login"] == "logged-out"
        adapters.failing = True  # a check the adapters did not answer keeps the last good one
        await checks.check()
        assert (await checks.latest())["codex"]["login"] == "logged-out"

    asyncio.run(main())


def test_a_first_check_the_adapters_do_not_answer_says_so() -> None:
    async def main() -> None:
        adapters = Adapters()
        adapters.failing = True
        latest = await checkup.ProviderChecks(adapters).latest()
        assert latest["codex"]["installed"] is None
        assert latest["codex"]["problem"] == "not checked: unavailable"
        row = line("a", status(codex={k: v for k, v in latest["codex"].items()}))
        assert fleet.candidate(row, "codex") == "codex not checked: unavailable"

    asyncio.run(main())
