"""A reboot, simulated: every roost process of a node SIGKILLed at once (what a power cut does),
then ``node up`` restores the records whose policy is ``resume``, one at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.conftest import Node, wait_for


def _spawned(node: Node, name: str, project: Path, *extra: str) -> dict[str, Any]:
    rec: dict[str, Any] = node.run("spawn", "echo", "--name", name, "--cwd", str(project), *extra)[
        "record"
    ]
    node.wait_screen(name, "echo-ready>")
    return rec


def _talked(node: Node, name: str, text: str) -> None:
    node.run("prompt", name, text)
    node.wait_screen(name, f"echo: {text}")


def test_a_power_cut_restores_the_records_that_say_resume(node: Node, project: Path) -> None:
    node.config.write_text("[node]\nrestore_pause_s = 0\n")
    node.up()
    alpha = _spawned(node, "alpha", project, "--restore", "resume")
    beta = _spawned(node, "beta", project, "--restore", "resume")
    gamma = _spawned(node, "gamma", project)  # the default policy: never
    delta = _spawned(node, "delta", project, "--restore", "resume")
    assert (alpha["restore_policy"], gamma["restore_policy"]) == ("resume", "never")
    _talked(node, "alpha", "first words")
    _talked(node, "beta", "beta's words")
    node.run("stop", "delta")  # stopped on purpose before the crash: stays dormant
    before = node.events()
    assert node.record("alpha")["state"] == "live"

    node.kill_all()  # the power cut: daemon, state store, adapters, supervisors, agents
    assert not node.processes()

    up = node.up("--restore-wait", "120")  # a loaded machine resumes slowly
    restore = up["restore"]
    assert restore["trigger"] == "boot" and restore["done"] and restore["skipped"] == []
    assert [x["name"] for x in restore["records"]] == ["alpha", "beta"]  # in spawn order
    outcomes = {x["name"]: x["outcome"] for x in restore["outcomes"]}
    assert outcomes == {"alpha": "resumed", "beta": "resumed"}

    # each back live in its own conversation: the echo agent counts the turns it resumed
    for rec, turns in ((alpha, 1), (beta, 1)):
        back = node.record(rec["id"])
        assert back["state"] == "live" and back["generation"] == 2
        assert back["provider_session"] == rec["provider_session"]
        node.wait_screen(rec["id"], f"resumed {rec['provider_session']} ({turns} turns)")
    _talked(node, "alpha", "after the cut")
    for other in (gamma, delta):
        assert node.record(other["id"])["state"] == "dormant"

    # nothing lost from the event log, and each outcome is an event of the batch
    after = node.events()
    seqs = {e["seq"] for e in after}
    assert {e["seq"] for e in before} <= seqs
    lost = {e["record"] for e in after if e["kind"] == "session.lost"}
    assert lost == {alpha["id"], beta["id"], gamma["id"]}
    restored = [e for e in after if e["kind"] == "record.restored"]
    assert [(e["record"], e["data"]["outcome"], e["data"]["remaining"]) for e in restored] == [
        (alpha["id"], "resumed", 1),
        (beta["id"], "resumed", 0),
    ]
    assert {e["data"]["batch"] for e in restored} == {restore["batch"]}


def test_a_resume_that_fails_is_reported_and_resume_all_restores_by_hand(
    node: Node, project: Path
) -> None:
    node.config.write_text("[node]\nrestore_pause_s = 0\n")
    node.up()
    keep = _spawned(node, "keep", project, "--restore", "resume")
    gone = _spawned(node, "gone", project, "--restore", "resume")
    node.kill_all()
    # the provider lost gone's conversation: its resume fails, never a fresh conversation
    (
        node.state_dir / "providers" / "echo" / "sessions" / f"{gone['provider_session']}.jsonl"
    ).unlink()

    restore = node.up("--restore-wait", "120")["restore"]
    outcomes = {x["name"]: x["outcome"] for x in restore["outcomes"]}
    assert outcomes == {"keep": "resumed", "gone": "resume_failed"}
    assert node.record("keep")["state"] == "live"
    wait_for(lambda: node.record("gone")["state"] in ("dormant", "attention"), 20, "gone settles")

    # by hand: every dormant record with policy resume
    node.run("stop", "keep")
    if node.record("gone")["state"] == "attention":
        node.run("stop", "gone")
    by_hand = node.run("resume", "--all")
    assert by_hand["trigger"] == "manual" and by_hand["done"]
    assert {x["name"]: x["outcome"] for x in by_hand["outcomes"]} == {
        "keep": "resumed",
        "gone": "resume_failed",
    }
    node.wait_screen("keep", f"resumed {keep['provider_session']} (0 turns)")
    assert node.error("resume")["code"] == "bad-request"  # neither an ID nor --all
