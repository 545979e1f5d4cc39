"""What the session commands print and how their errors read, click-free: a record's lines, an
accepted input, an operation, an event line, and an error about the record the command named
(its ``did you mean`` and its next step). The click commands (``roost.cli.sessions``,
``control``, ``events``, ``context``) and the fast path that answers them without click or
pyzmq (``roost.cli.quick``) both print with these, so the two are the same bytes.
"""

from __future__ import annotations

from roost.cli.listing import compact, printable
from roost.wire.errors import RoostError

TYPE_CHECKING = False  # not typing's: its import costs the fast path ~4 ms (mypy reads this)
if TYPE_CHECKING:
    from typing import Any

# Control characters that would move the cursor or ring: dropped from text output (as rich's
# Text dropped them when it printed for us). Escape sequences in screens stay the user's to see.
STRIP = dict.fromkeys((7, 8, 11, 12, 13))


def exit_text(last: dict[str, Any]) -> str:
    """``last_exit`` in words: an exit code, a signal, a loss or a launch error."""
    if "lost" in last:
        return f"lost ({last['lost']})"
    if isinstance(err := last.get("error"), dict):
        return f"failed to start: {err.get('code')}: {err.get('message')}"
    if last.get("signal"):
        import signal  # here: it imports enum, which the fast path's start does without

        number = int(last["signal"])
        try:
            name = f" ({signal.Signals(number).name})"
        except ValueError:
            name = ""
        return f"killed by signal {number}{name}"
    if last.get("code") is not None:
        return f"exited with code {last['code']}"
    return ", ".join(f"{k} {v}" for k, v in sorted(last.items()) if v is not None) or "-"


def record_lines(rec: dict[str, Any]) -> list[str]:
    active = rec.get("active") or {}
    lines = [
        f"id:               {rec['id']}",
        f"name:             {printable(rec.get('name') or '-')}",
        f"provider:         {rec['provider']} ({rec['mode']})",
        f"state:            {rec['state']}"
        + (f" ({rec['attention']})" if rec.get("attention") else ""),
        f"generation:       {rec['generation']}",
        f"provider session: {rec.get('provider_session') or '-'}",
        f"cwd:              {rec['cwd']}",
    ]
    if worktree := rec.get("worktree"):
        lines.append(
            f"worktree:         branch {worktree['branch']} of {worktree['repo']} "
            f"(base {str(worktree['base'])[:12]})"
        )
    if active.get("pid"):
        agent = f"  agent pid: {active['agent_pid']}" if active.get("agent_pid") else ""
        lines.append(f"supervisor pid:   {active['pid']}{agent}")
    if supervisor := active.get("supervisor"):
        release = supervisor.get("roost")
        runs = f"roost {release}" if release else "a release that does not say (before wire 2)"
        lines.append(f"supervisor:       wire {supervisor.get('wire')}, {runs}")
    if rec.get("last_exit"):
        lines.append(f"last exit:        {exit_text(rec['last_exit'])}")
    if rec.get("mode") == "pty":
        lines.append(f"on limit:         {limit_text(rec)}")
    return lines


def limit_text(rec: dict[str, Any]) -> str:
    """The record's usage-limit policy, and the reset time of the limit it shows now."""
    import datetime  # here: only a record in a usage limit prints a time

    policy = rec.get("on_limit") or "wait"
    reset = rec.get("reset_at")
    if rec.get("attention") != "rate-limit" or not isinstance(reset, (int, float)):
        return policy
    at = datetime.datetime.fromtimestamp(reset).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    return f"{policy}; the limit resets at {at}"


def show_lines(doc: dict[str, Any], screen: bool) -> tuple[str, list[str]]:
    """``show``'s text: the record's lines (printed with ``STRIP``), then with ``--screen`` the
    screen's lines (printed as they are)."""
    after: list[str] = []
    if screen:
        text = doc.get("screen")
        if text is None and doc.get("last_screen") is not None:
            after = ["--- last screen (the session is not live) ---", doc["last_screen"]]
        else:
            after = ["--- screen ---", text if text is not None else "(no live session)"]
    lines = record_lines(doc["record"])
    if "usage" in doc:
        lines.append(f"usage:            {usage_text(doc['usage']) or '-'}")
    return "\n".join(lines), after


def usage_text(usage: dict[str, Any] | None, *, cost: bool = True) -> str:
    """``12.3k in · 456 out · $0.0123`` (a usage map, roost.wire.usage): every prompt token
    (cached or not) in, the output, and the cost when the provider reported one; "" for none."""
    if not usage:
        return ""
    prompt = sum(int(usage.get(k) or 0) for k in ("input", "cache_read", "cache_write"))
    words = f"{short_count(prompt)} in · {short_count(int(usage.get('output') or 0))} out"
    if cost and usage.get("cost_usd") is not None:
        words += f" · ${usage['cost_usd']:.4f}"
    return words


def short_count(n: int) -> str:
    for size, unit in ((10**9, "G"), (10**6, "M"), (10**3, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def accepted_text(what: str, doc: dict[str, Any]) -> str:
    """``prompt accepted (event 12)``; a repeated operation says it was the first outcome."""
    seq = f" (event {doc['seq']})" if doc.get("seq") is not None else ""
    again = f", already, under operation {doc['op']['id']}" if doc.get("duplicate") else ""
    return f"{what} accepted{seq}{again}"


def op_text(op_id: str, doc: dict[str, Any]) -> str:
    """``roost op``'s line: the operation's state, and its result if it has one."""
    return f"{op_id}: {doc['state']}" + (f" {compact(doc['result'])}" if doc["result"] else "")


def event_line(event: dict[str, Any]) -> str:
    import datetime  # here: only `events` prints times

    ts = datetime.datetime.fromtimestamp(event["ts"]).strftime("%H:%M:%S")
    who = event.get("record") or "node"
    data = event.get("data")
    return f"{event['seq']:>6} {ts} {event['kind']:<20} {who:<12} {compact(data) if data else ''}"


def gap_note(doc: dict[str, Any], after: int) -> str:
    """What stderr says when retention dropped events the reader asked for (``gap``); else ""."""
    if doc.get("gap"):
        return f"note: events {after + 1} to {doc['first_seq'] - 1} were dropped by retention"
    return ""


def roost_line(state_dir: str, *args: str) -> str:
    """The ``roost`` command line of ARGS, with ``--state-dir state_dir`` when that is given
    (not the default one), quoted for a shell."""
    import shlex  # here: only an error's next step is a command line

    given = f"--state-dir {shlex.quote(state_dir)} " if state_dir else ""
    return f"roost {given}{shlex.join(args)}"


def wants_suggestions(err: RoostError, ref: Any) -> bool:
    """Whether ``err`` is the command's ID not found, with no suggestions of its own yet."""
    found = err.detail.get("ref")
    if err.code != "not-found" or not found or found != ref:
        return False
    return "suggestions" not in err.detail


def suggested(err: RoostError, records: list[Any]) -> RoostError:
    """``err`` with ``did you mean`` the records named closest to its ``ref``, if any are."""
    from roost.suggest import close_matches, did_you_mean

    candidates = [c for rec in records for c in (rec["id"], rec.get("name"))]
    matches = close_matches(str(err.detail["ref"]), candidates)
    if not matches:
        return err
    return RoostError(
        err.code, f"{err.message}; {did_you_mean(matches)}", {**err.detail, "suggestions": matches}
    )


def next_step(command: str, code: str, state: str) -> tuple[str, str] | None:
    """What comes next for a record whose state refused the command: (the roost command, the
    words before it, if the message does not say them already)."""
    if code == "session-not-live" and state in ("dormant", "failed"):
        return "resume", "resume it with"
    if code == "session-record-busy" and state in ("live", "attention"):
        return ("stop", "") if command == "forget" else ("show", "see it with")
    return None


def explained(err: RoostError, ref: Any, command: str, state_dir: str) -> RoostError:
    """An error about the record the command's ID (``ref``) named, as the user named it: the
    name typed beside the record id the node said, and the command that comes next
    (``detail.fix``, a command line with ``--state-dir state_dir`` when that is given)."""
    rid = err.detail.get("record") or err.detail.get("id")
    if not isinstance(ref, str) or not ref or not isinstance(rid, str) or "fix" in err.detail:
        return err
    message = err.message
    if ref != rid:
        said = f"record {rid}" if f"record {rid}" in message else rid
        message = message.replace(said, f"{ref} ({rid})")
    detail = dict(err.detail)
    step = next_step(command, err.code, str(err.detail.get("state")))
    if step:
        verb, words = step
        detail["fix"] = roost_line(state_dir, verb, ref)
        message = (
            f"{message}; {words} `{detail['fix']}`" if words else f"{message}: `{detail['fix']}`"
        )
    return RoostError(err.code, message, detail)
