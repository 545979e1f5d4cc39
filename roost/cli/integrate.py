"""``roost signal`` (a hook's sender, see ``roost.cli.hook``) and ``roost integrate kimi``.

kimi reads hooks only from its own ``config.toml``, beside its provider keys, so roost's are
opt-in: ``roost integrate kimi`` appends one block between two marker comments, each hook
running ``roost signal kimi``; ``--remove`` takes that block out. Nothing outside the block is
ever rewritten: the file stays byte for byte what it was, and removing the block gives back
exactly the file before it was added. A file whose markers are not one begin and one end, in
that order, is refused (``integration-damaged``), as is a file that would not be TOML with the
block in it (``integration-failed``): kimi would not start with it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from roost import hooks
from roost.cli import hook
from roost.cli.context import Ctx, reader
from roost.cli.output import emit_json
from roost.wire.errors import RoostError

# kimi's home: the variable, else under ~ (the kimi adapter's ``VendorCli``, which the CLI does
# not import; tests/unit/test_integrate.py holds the two equal)
KIMI_HOME = ("KIMI_CODE_HOME", ".kimi-code")
BEGIN = "# >>> roost signal hooks: `roost integrate kimi --remove` takes this block out >>>"
END = "# <<< roost signal hooks <<<"


def kimi_block() -> str:
    """The block ``roost integrate kimi`` appends: a newline (ending a last line that had none,
    so removing it is exact), the begin marker, one ``[[hooks]]`` table per event, the end."""
    command = json.dumps(hooks.hook_command("kimi"))  # a JSON string is a TOML basic string
    lines = ["", BEGIN]
    for event in hooks.KIMI_EVENTS:
        lines += ["[[hooks]]", f'event = "{event}"', f"command = {command}"]
        lines += [f"timeout = {hooks.HOOK_TIMEOUT_S}", ""]
    return "\n".join([*lines[:-1], END, ""])


def find_block(text: str) -> tuple[int, int] | None:
    """Where the block is in ``text`` (from its leading newline to after the end marker's
    line), None when there is none; ``integration-damaged`` when the markers are amiss."""
    begins, ends = text.count(BEGIN), text.count(END)
    if begins == ends == 0:
        return None
    start, stop = text.find(BEGIN), text.find(END)
    if begins != 1 or ends != 1 or stop < start:
        raise RoostError(
            "integration-damaged",
            f"the file has {begins} begin and {ends} end marker(s) of roost's block, not one "
            "of each in order: mend or remove them by hand",
        )
    if start > 0 and text[start - 1] == "\n":
        start -= 1
    stop += len(END)
    if text.startswith("\n", stop):
        stop += 1
    return start, stop


def with_block(text: str) -> str:
    """``text`` with roost's block: appended, or the one there replaced in place."""
    found = find_block(text)
    if found is None:
        return text + kimi_block()
    start, stop = found
    return text[:start] + kimi_block() + text[stop:]


def without_block(text: str) -> str:
    found = find_block(text)
    return text if found is None else text[: found[0]] + text[found[1] :]


def _check_toml(text: str) -> None:
    import tomllib

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise RoostError(
            "integration-failed", f"kimi's config.toml would not be TOML: {err}"
        ) from None
    hooks = doc.get("hooks")
    if not isinstance(hooks, list) or not all(isinstance(h, dict) for h in hooks):
        raise RoostError("integration-failed", "kimi's config.toml has `hooks` of another kind")


def kimi_config(env: dict[str, str]) -> Path:
    """kimi's config.toml: under ``KIMI_CODE_HOME``, else ``~/.kimi-code``."""
    home_env, home_dir = KIMI_HOME
    return Path(env.get(home_env) or Path.home() / home_dir) / "config.toml"


def write_same_mode(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` at once, keeping its mode (0600 for a new file: the
    file holds API keys)."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o600
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config.toml.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def integrate_kimi(path: Path, *, remove: bool) -> dict[str, Any]:
    """Add (or with ``remove`` take out) roost's block in ``path``; what was done."""
    try:
        before = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as err:
        raise RoostError("integration-failed", f"cannot read kimi's config.toml: {err}") from None
    after = without_block(before) if remove else with_block(before)
    if not remove:
        _check_toml(after)
    if after != before:
        write_same_mode(path, after)
    return {
        "provider": "kimi",
        "path": str(path),
        "installed": not remove,
        "changed": after != before,
        "events": [] if remove else list(hooks.KIMI_EVENTS),
    }


@click.command()
@click.argument("source", type=click.Choice(sorted(hook.SOURCES)))
@reader
def signal(ctx: Ctx, source: str) -> None:
    """Send what an agent CLI's hook reports (its JSON document on stdin) to the session's
    signal channel. Run by the hooks roost gives claude and kimi, never by hand: without the
    channel in the environment it does nothing. --json prints the signal it sent (null: none)."""
    stdin = b"" if sys.stdin.isatty() else sys.stdin.buffer.read(hook.MAX_STDIN)
    sent, text = hook.run(source, stdin, os.environ)
    if ctx.json:
        emit_json({"source": source, "signal": sent})
    elif text:
        click.echo(text)


@click.group()
def integrate() -> None:
    """Give an agent CLI roost's hooks in its own configuration (opt-in)."""


@integrate.command()
@click.option("--remove", is_flag=True, help="take roost's block out again")
@reader
def kimi(ctx: Ctx, remove: bool) -> None:
    """Append roost's hooks to kimi's config.toml ($KIMI_CODE_HOME or ~/.kimi-code), in a
    marked block, so live kimi sessions send exact signals; the rest of the file is never
    rewritten. Sessions started afterwards use them."""
    done = integrate_kimi(kimi_config(dict(os.environ)), remove=remove)
    if ctx.json:
        emit_json(done)
        return
    what = "removed from" if remove else "installed in"
    if not done["changed"]:
        what = "were not in" if remove else "already in"
    click.echo(f"roost's kimi hooks {what} {done['path']}")
