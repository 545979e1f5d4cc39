"""Following a restore (``node up`` after a reboot, ``roost resume --all``) from the CLI's side.

The node answers with the plan of a batch (``records`` to resume one at a time, ``skipped`` with
the reason, ``after_seq``); each outcome is a ``record.restored`` event of that batch. The CLI
reads them through ``events.since`` until every record of the batch has one or ``wait_s`` has
passed; then it says what is still pending and how to watch it.
"""

from __future__ import annotations

import time
from typing import Any

from roost.cli.output import console
from roost.cli.progress import Progress
from roost.client.client import Client

POLL_S = 0.2
WATCH = "roost events --follow"


def follow(client: Client, plan: dict[str, Any], wait_s: float) -> dict[str, Any]:
    """The plan with ``outcomes`` (the ``record.restored`` data seen, with ``record``),
    ``pending`` (how many records have none yet) and ``done``."""
    expected = len(plan["records"]) + len(plan["skipped"])
    outcomes: list[dict[str, Any]] = []
    after = int(plan.get("after_seq") or 0)
    deadline = time.monotonic() + wait_s
    progress = Progress(f"the restore of {len(plan['records'])} records ({WATCH} shows it)")
    try:
        while len(outcomes) < expected:
            page = client.call("events.since", {"after": after, "limit": 1000})
            for event in page["events"]:
                after = max(after, int(event["seq"]))
                data = event.get("data") or {}
                if event["kind"] == "record.restored" and data.get("batch") == plan["batch"]:
                    outcomes.append({"record": event.get("record"), **data})
            if len(outcomes) >= expected or time.monotonic() >= deadline:
                break
            if not page["events"]:
                progress.tick()
                time.sleep(POLL_S)  # polling the event log, with the deadline above
    finally:
        progress.done()
    pending = expected - len(outcomes)
    return {**plan, "outcomes": outcomes, "pending": pending, "done": pending == 0}


def print_plan(plan: dict[str, Any]) -> None:
    if not plan["records"] and not plan["skipped"]:
        return
    if plan["records"]:
        names = ", ".join(_name(x) for x in plan["records"])
        apart = f", {plan['pause_s']:g} s apart" if len(plan["records"]) > 1 else ""
        console.print(f"restoring {len(plan['records'])} records one at a time{apart}: {names}")


def print_outcomes(followed: dict[str, Any]) -> None:
    for done in followed["outcomes"]:
        why = done.get("reason") or (done.get("error") or {}).get("code")
        console.print(
            f"  {_name({'id': done['record'], 'name': done.get('name')})}: {done['outcome']}"
            + (f" ({why})" if why else "")
        )
    if followed["pending"]:
        console.print(f"  still restoring {followed['pending']}: follow with `{WATCH}`")


def _name(rec: dict[str, Any]) -> str:
    return f"{rec['id']} ({rec['name']})" if rec.get("name") else str(rec["id"])
