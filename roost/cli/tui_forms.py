"""The dashboard's dialogs: spawn, prompt, the confirmation before forget, and the pages of text
(a diff, the keys).

Each is a modal screen that answers its caller with ``dismiss``: the values typed, or None when
the user pressed escape. Enter in any field submits the dialog; a value the dialog can tell is
wrong is said in it, and what was typed stays.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from roost.providers import MODES, names
from roost.wire.errors import RoostError

CSS = """
ModalScreen { align: center middle; }
ModalScreen > Vertical {
    width: 80; max-width: 100%; height: auto; max-height: 100%; padding: 0 1;
    border: thick $accent; background: $surface;
}
ModalScreen Label { margin-top: 1; }
Form Label { margin-top: 0; }
Form Input, Form Input:focus { border: none; height: 1; padding: 0 1; }
Form Input { background: $boost; }
Form Input:focus { background: $accent 50%; }
ModalScreen .hint { color: $text-muted; margin-top: 1; }
ModalScreen .error { color: $error; margin-top: 1; }
ModalScreen .error.none { display: none; }
"""
SIZE_RE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")
HINT = "enter submits · escape cancels · tab moves to the next field"


class Form(ModalScreen[dict[str, str] | None]):
    """Labelled fields; enter submits every field's value by its name, escape cancels."""

    DEFAULT_CSS = CSS
    SCOPED_CSS = False  # the rules name the screens they are for
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(
        self,
        title: str,
        fields: list[tuple[str, str, str]],
        check: Callable[[dict[str, str]], object] | None = None,
        error: str = "",
    ) -> None:
        """``fields``: (name, label, initial value). ``check`` raises ``RoostError`` on values
        that cannot be sent: the form stays, with the message. ``error``: said when it opens
        (the last attempt failed)."""
        super().__init__()
        self.title_text, self.fields, self.check, self.error = title, fields, check, error

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text, markup=False)
            for name, label, value in self.fields:
                yield Label(label, markup=False)
                yield Input(value=value, id=f"field-{name}")
            yield Label(self.error, id="form-error", classes="error", markup=False)
            yield Label(HINT, classes="hint")

    def on_mount(self) -> None:
        self.query_one("#form-error").set_class(not self.error, "none")
        self.query(Input).first().focus()

    def values(self) -> dict[str, str]:
        return {name: self.query_one(f"#field-{name}", Input).value for name, _, _ in self.fields}

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        values = self.values()
        if self.check is not None:
            try:
                self.check(values)
            except RoostError as err:
                label = self.query_one("#form-error", Label)
                label.update(f"{err.code}: {err.message}")
                label.remove_class("none")
                return
        self.dismiss(values)

    def action_cancel(self) -> None:
        self.dismiss(None)


class Confirm(ModalScreen[bool]):
    """A question answered with y (yes) or n / escape (no)."""

    DEFAULT_CSS = CSS
    SCOPED_CSS = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes"),
        Binding("n", "answer(False)", "no"),
        Binding("escape", "answer(False)", "no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"{self.question}  [y/n]", markup=False)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class Page(ModalScreen[None]):
    """A page of text to read (a worktree's diff, the keys): the arrows and page keys scroll it,
    escape or q closes it."""

    DEFAULT_CSS = (
        CSS
        + """
    Page > Vertical { width: 100%; height: 100%; padding: 0 1; }
    Page VerticalScroll { height: 1fr; }
    """
    )
    SCOPED_CSS = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "close"),
        Binding("up", "scroll(-1)", show=False),
        Binding("down", "scroll(1)", show=False),
        Binding("pageup", "scroll(-20)", show=False),
        Binding("pagedown,space", "scroll(20)", show=False),
    ]

    def __init__(self, title: str, text: str | Text) -> None:
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text, markup=False)
            with VerticalScroll(id="page"):
                yield Static(self.text, markup=False)
            yield Label("arrows and page keys scroll · escape or q closes", classes="hint")

    def action_scroll(self, lines: int) -> None:
        self.query_one("#page", VerticalScroll).scroll_relative(y=lines, animate=False)

    def action_close(self) -> None:
        self.dismiss(None)


def spawn_form(values: dict[str, str], node: str | None, error: str = "") -> Form:
    """Provider, name, cwd, mode, worktree, env and size, filled with ``values`` (the defaults,
    or what was typed before a spawn failed); through a hub also the node to spawn on."""
    fields = [
        ("provider", f"provider ({', '.join(names())})"),
        ("name", "name (optional, unique on the node)"),
        ("cwd", "cwd (a registered workspace or a directory on the node)"),
        ("mode", f"mode ({' or '.join(MODES)})"),
        ("worktree", "worktree: empty for none, + for a new branch roost/<name>, or a branch"),
        ("env", "env: KEY=VALUE pairs, separated by spaces (added to the configured ones)"),
        ("size", "size of its terminal, ROWSxCOLS (empty: the node's default)"),
    ]
    if node is not None:
        fields.append(("node", "node"))
    return Form(
        "spawn a session",
        [(name, label, values.get(name, "")) for name, label in fields],
        check=spawn_body,
        error=error,
    )


def spawn_body(values: dict[str, str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``session.spawn`` body of what the spawn form holds, ``env`` (the configured
    ``spawn.env``) under what was typed; ``bad-request`` naming the field that is wrong."""
    mode = values.get("mode", "").strip() or "pty"
    if mode not in MODES:
        raise RoostError(
            "bad-request", f"mode is {' or '.join(MODES)}, not {mode!r}", {"field": "mode"}
        )
    typed = {}
    for pair in values.get("env", "").split():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RoostError(
                "bad-request", f"env takes KEY=VALUE pairs, not {pair!r}", {"field": "env"}
            )
        typed[key] = value
    body: dict[str, Any] = {
        "provider": values["provider"].strip(),
        "name": values["name"].strip() or None,
        "cwd": values["cwd"].strip(),
        "env": {**(env or {}), **typed},
        "mode": mode,
    }
    if size := values.get("size", "").strip():
        match = SIZE_RE.match(size)
        if not match:
            raise RoostError(
                "bad-request",
                f"size is ROWSxCOLS, for example 40x120, not {size!r}",
                {"field": "size"},
            )
        body["rows"], body["cols"] = int(match.group(1)), int(match.group(2))
    worktree = values.get("worktree", "").strip()
    if worktree:
        body["worktree"] = True if worktree == "+" else worktree
    return body
