"""The dashboard's small dialogs: spawn, prompt, and the confirmation before forget.

Each is a modal screen that answers its caller with ``dismiss``: the values typed, or None when
the user pressed escape. Enter in any field submits the dialog.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from roost.providers import MODES, built_in, names

CSS = """
ModalScreen { align: center middle; }
ModalScreen > Vertical {
    width: 72; height: auto; padding: 1 2; border: thick $accent; background: $surface;
}
ModalScreen Label { margin-top: 1; }
"""


class Form(ModalScreen[dict[str, str] | None]):
    """Labelled fields; enter submits every field's value by its name, escape cancels."""

    DEFAULT_CSS = CSS
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, title: str, fields: list[tuple[str, str, str]]) -> None:
        """``fields``: (name, label, initial value)."""
        super().__init__()
        self.title_text, self.fields = title, fields

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text)
            for name, label, value in self.fields:
                yield Label(label)
                yield Input(value=value, id=f"field-{name}")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(
            {name: self.query_one(f"#field-{name}", Input).value for name, _, _ in self.fields}
        )

    def action_cancel(self) -> None:
        self.dismiss(None)


class Confirm(ModalScreen[bool]):
    """A question answered with y (yes) or n / escape (no)."""

    DEFAULT_CSS = CSS
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


def spawn_form(cwd: str, node: str | None) -> Form:
    """Provider, name, cwd and mode; through a hub also the node to spawn on."""
    fields = [
        ("provider", f"provider ({', '.join(names())})", built_in()[0]),
        ("name", "name (optional, unique on the node)", ""),
        ("cwd", "cwd (a registered workspace or a directory on the node)", cwd),
        ("mode", f"mode ({' or '.join(MODES)})", "pty"),
    ]
    if node is not None:
        fields.append(("node", "node", node))
    return Form("spawn a session", fields)


def spawn_body(values: dict[str, str]) -> dict[str, Any]:
    """The ``session.spawn`` body of what the spawn form holds (``roost spawn``'s defaults)."""
    return {
        "provider": values["provider"].strip(),
        "name": values["name"].strip() or None,
        "cwd": values["cwd"].strip(),
        "env": {},
        "mode": values["mode"].strip() or "pty",
    }
