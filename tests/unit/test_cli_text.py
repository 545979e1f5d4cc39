"""The CLI's text output: no Python reprs, `ls` never cuts a
provider session id, headers never wrap, ``--op``/``--grant`` only where they mean something,
``did you mean``, and progress notes that keep stdout clean."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from click.testing import CliRunner

from roost.cli import table
from roost.cli.main import cli
from roost.cli.output import accepted_text, endpoint_text, exit_text, record_lines, records_table
from roost.cli.progress import Progress
from roost.suggest import close_matches, did_you_mean
from tests import kit

SID = "58c38583-bc4a-4105-9b3e-7a6e0d2ae547"
REPR = re.compile(r"\{'|None|True|False|\[\]")


def record(**kw: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": "r3f9a1c2b7e",
        "name": "shepherd",
        "provider": "claude",
        "mode": "stream",
        "state": "dormant",
        "attention": None,
        "generation": 2,
        "provider_session": SID,
        "cwd": "/home/ada/src/app",
        "active": None,
        "last_exit": None,
        "worktree": None,
    }
    rec.update(kw)
    return rec


def test_ls_at_80_columns_keeps_names_and_states_first_and_the_header_on_one_line() -> None:
    """What gives way: the generation, the mode, a long name down to 24 cells, then the provider
    session id (left out whole, never cut); the state and its reason stay whole."""
    long_name = "a rather long display name that people give their sessions " * 2
    rows = [
        record(name=long_name, state="attention", attention="trust-prompt"),
        record(id="r0000000001", name="shepherd"),
    ]
    out = records_table(rows, width=80).splitlines()
    assert out[0].split() == ["ID", "NAME", "PROVIDER", "STATE"]
    assert "attention (trust-prompt)" in out[1] and "shepherd" in out[2]
    assert "…" in out[1] and long_name[:30] in out[1]  # cut, but past the soft 24 cells
    assert not any(SID[:8] in line for line in out)  # left out whole, never cut
    assert len(out) == 3
    assert max(len(line) for line in out) <= 80
    short = records_table([rows[1]], width=80).splitlines()
    assert SID in short[1]  # it fits: nothing gives way but the generation and the mode
    wide = records_table(rows, width=140).splitlines()
    assert wide[0].split()[-2:] == ["PROVIDER", "SESSION"] and long_name[:24] in wide[1]
    full = records_table(rows, width=250).splitlines()[0].split()
    assert full == ["ID", "NAME", "PROVIDER", "MODE", "STATE", "GEN", "PROVIDER", "SESSION"]


def test_ls_on_a_very_narrow_terminal_cuts_names_and_states_last() -> None:
    rows = [record(name="shepherd the reviewer", state="attention", attention="trust-prompt")]
    out = records_table(rows, width=40).splitlines()
    assert out[0].split() == ["ID", "NAME", "PROVIDER", "STATE"]
    assert "r3f9a1c2b7e" in out[1] and "…" in out[1]


def test_ls_off_a_terminal_cuts_nothing() -> None:
    long_name = "n" * 150
    out = records_table([record(name=long_name)], width=None).splitlines()
    assert long_name in out[1] and SID in out[1]


def test_table_counts_wide_characters_as_two_cells() -> None:
    text = table.render([table.Column("A", shrink=True), table.Column("B")], [["日本語", "x"]], 6)
    assert text.splitlines()[1].endswith("x")


def test_show_has_no_python_reprs() -> None:
    lines = record_lines(
        record(
            state="live",
            active={"pid": 4242, "agent_pid": None},
            last_exit={"code": None, "signal": 15},
        )
    )
    text = "\n".join(lines)
    assert not REPR.search(text), text
    assert "killed by signal 15 (SIGTERM)" in text
    assert "supervisor pid:   4242" in text and "agent pid" not in text


def test_show_says_which_supervisor_wire_a_session_speaks() -> None:
    old = {"pid": 1, "supervisor": {"roost": None, "wire": 1}}
    new = {"pid": 2, "supervisor": {"roost": "0.2.0", "wire": 2}}
    old_text = "\n".join(record_lines(record(state="live", active=old)))
    new_text = "\n".join(record_lines(record(state="live", active=new)))
    assert "supervisor:       wire 1, a release that does not say (before wire 2)" in old_text
    assert "supervisor:       wire 2, roost 0.2.0" in new_text
    assert not REPR.search(old_text + new_text)


@pytest.mark.parametrize(
    ("last", "said"),
    [
        ({"code": 0, "signal": None}, "exited with code 0"),
        ({"lost": "supervisor-gone"}, "lost (supervisor-gone)"),
        (
            {"error": {"code": "launch-failed", "message": "no"}},
            "failed to start: launch-failed: no",
        ),
    ],
)
def test_last_exit_in_words(last: dict[str, Any], said: str) -> None:
    assert exit_text(last) == said


def test_accepted_without_a_sequence_number_says_no_none() -> None:
    assert accepted_text("prompt", {"accepted": True, "seq": 12}) == "prompt accepted (event 12)"
    repeated = accepted_text("prompt", {"seq": None, "duplicate": True, "op": {"id": "op-1"}})
    assert "None" not in repeated and "op-1" in repeated


def test_endpoints_in_words() -> None:
    assert endpoint_text("hub", {"endpoint": "tcp://h:1", "linked": True}) == "tcp://h:1 (linked)"
    net = endpoint_text("network", {"router": "tcp://a:1", "curve": True})
    assert net == "router tcp://a:1, curve yes"


READ_ONLY = [
    ["ls"],
    ["show"],
    ["transcript"],
    ["events"],
    ["diff"],
    ["op"],
    ["node", "status"],
    ["node", "up"],
    ["workspace", "ls"],
    ["keys", "show"],
    ["hub", "status"],
    ["doctor"],
    ["config", "show"],
    ["logs"],
    ["completion"],
]


@pytest.mark.parametrize("args", READ_ONLY, ids=" ".join)
def test_read_only_commands_offer_no_op_nor_grant(args: list[str]) -> None:
    out = CliRunner().invoke(cli, [*args, "--help"]).output
    assert "--json" in out and "--op" not in out and "--grant" not in out


@pytest.mark.parametrize(
    "args", [["prompt"], ["stop"], ["forget"], ["turn"], ["spawn"]], ids=" ".join
)
def test_mutating_commands_offer_op_and_grant(args: list[str]) -> None:
    out = CliRunner().invoke(cli, [*args, "--help"]).output
    assert "--op" in out and "--grant" in out


def test_did_you_mean() -> None:
    assert close_matches("ecoh", ["echo", "claude", "codex", "kimi"]) == ["echo"]
    assert close_matches("Shepherd", ["shepherd", "r3f9a1c2b7e"])[0] == "shepherd"
    assert close_matches("r3f9a1c2", ["r3f9a1c2b7e"]) == ["r3f9a1c2b7e"]  # a cut-off id
    assert close_matches("zzz", ["echo"]) == []
    assert did_you_mean(["a", "b"]) == "did you mean 'a' or 'b'?"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_says_nothing_for_a_second_then_one_plain_line_off_a_terminal() -> None:
    clock, out = kit.FakeClock(), io.StringIO()
    progress = Progress("the session to stop", out, clock=clock)
    clock.now = 0.9
    progress.tick()
    assert out.getvalue() == ""
    for clock.now in (1.0, 2.0, 3.0):
        progress.tick()
    progress.done()
    assert out.getvalue() == "roost: waiting for the session to stop\n"


def test_progress_on_a_terminal_counts_and_is_erased() -> None:
    clock, out = kit.FakeClock(), Tty()
    progress = Progress("the node to start", out, clock=clock)
    for clock.now in (1.2, 1.7, 2.1):
        progress.tick()
    progress.done()
    text = out.getvalue()
    assert "waiting for the node to start (1 s)" in text and "(2 s)" in text
    assert text.count("(1 s)") == 1 and text.endswith("\r\x1b[K")


def test_usage_texts() -> None:
    from roost.cli.texts import usage_text
    from roost.cli.usage import usage_lines

    used = {"input": 5198, "output": 20, "cache_read": 14, "cache_write": 10, "cost_usd": 0.0212}
    assert usage_text(used) == "5.2k in · 20 out · $0.0212"
    assert usage_text({**used, "cost_usd": None}) == "5.2k in · 20 out"
    assert usage_text(None) == ""
    doc = {
        "total": used,
        "session": [{"record": "r1", "name": None, "provider": "claude", "usage": used}],
        "provider": [{"provider": "claude", "usage": used}],
        "day": [{"day": "2026-12-03", "usage": {**used, "cost_usd": None}}],
    }
    lines = usage_lines(doc)
    assert lines[0].split() == [
        "by",
        "session",
        "input",
        "cache",
        "rd",
        "cache",
        "wr",
        "output",
        "cost",
        "USD",
    ]
    assert lines[1].split() == ["r1", "5198", "14", "10", "20", "0.0212"]  # no name: the id
    day = next(line for line in lines if "2026-12-03" in line)
    assert day.split()[-1] == "-"  # a day with no cost reported
    assert lines[-1].split() == ["total", "5198", "14", "10", "20", "0.0212"]


def test_show_says_the_usage_limit_policy_and_the_reset() -> None:
    import datetime

    rec: dict[str, Any] = {"id": "r0123456789", "provider": "codex", "mode": "pty"}
    rec.update(state="live", generation=1, cwd="/srv", on_limit="continue")
    assert "on limit:         continue" in record_lines(rec)
    reset = 1796322660.0
    limited = {**rec, "state": "attention", "attention": "rate-limit", "reset_at": reset}
    at = datetime.datetime.fromtimestamp(reset).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    assert f"on limit:         continue; the limit resets at {at}" in " ".join(
        record_lines(limited)
    )
    assert not any(line.startswith("on limit") for line in record_lines({**rec, "mode": "stream"}))
