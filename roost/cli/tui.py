"""``roost tui``: a full-screen dashboard of every record, driven by the node's events.

The list is read once; from then on events move it (``roost.cli.feed``), never a poll. The
bottom of the selected record's screen is previewed beside the list (under it in a narrow
terminal), live. A record that newly needs attention rings the terminal bell, pops a notice and
is marked ``!`` until the user moves onto it. The status line says the count, the filter and
whether the node answers. Keys:

    enter, a   attach (the terminal is handed to ``roost attach``; its detach key comes back)
    n          spawn a session          p   a prompt (pty) or a turn (stream)
    s          stop                     r   resume
    f          forget (asks first)      d   a worktree session's diff
    /          filter (words that must all match); escape clears
    ?          the keys and columns     q   quit

Pointed at a hub (``--hub``) it shows every linked node's records with a NODE column and sends
each action to the record's node. It is for a terminal: ``--json`` is refused (``bad-request``;
``roost ls --json`` prints the list as JSON). The app itself is ``roost.cli.dashboard``.
"""

from __future__ import annotations

import os
import sys

import click

from roost.cli.context import Ctx, command
from roost.wire.errors import RoostError


@click.command()
@command
def tui(ctx: Ctx) -> None:
    """A full-screen dashboard of every record (every node's through --hub), moved by events.

    Keys: enter/a attach (Ctrl-] comes back), n spawn, p prompt (a turn on a stream session),
    s stop, r resume, f forget, d diff (a worktree session), / filter (escape clears), ? keys,
    q quit. A record that newly needs attention rings the bell and is marked '!'. --json is
    refused (bad-request): `roost ls --json` prints the list as JSON.
    """
    if ctx.json:
        raise RoostError(
            "bad-request",
            "roost tui is a full-screen dashboard; `roost ls --json` prints the list as JSON",
            {"field": "json"},
        )
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise RoostError(
            "bad-request",
            "roost tui needs a terminal; `roost ls` prints the list",
            {"field": "tty"},
        )
    ctx.quiet = True  # progress notes on stderr would draw over the dashboard
    client = ctx.client()  # a node that is not running is said now, not on a blank screen
    from roost.cli.dashboard import Dashboard  # Textual is loaded for this command only

    # Textual sizes the screen from $COLUMNS and $LINES when they are set, and a shell or a test
    # runner may have left them behind from another window: the terminal's own size wins, and
    # follows it when it is resized (as attach does)
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)
    Dashboard(ctx, client).run()
