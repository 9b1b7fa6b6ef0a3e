"""The help screen: every key of every screen, and the chat's commands."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

COMMANDS = "/model [NAME]  /tools  /session [ID]  /agent [NAME]  /clear  /help"

KEYS = (
    ("everywhere", (("F1", "this help · F2 chat · F3 operator · Ctrl-Q quit"),)),
    ("chat", (("Enter", "send the message"), ("Ctrl-C", "abort the run (not the app)"),
              ("y / a / n", "on an approval: approve once / always this tool / deny"),
              ("Tab, Enter", "move to a prompt or a tool call; Enter folds it open"),
              ("PgUp / PgDn", "scroll · Esc back to the message line"),
              ("/commands", COMMANDS))),
    ("operator", (("r, Enter", "runs; Enter opens the selected run (its steps stream)"),
                  ("y / n", "approve / deny what the open run waits on"),
                  ("x", "abort the selected or open run"),
                  ("s", "sessions (Enter: their messages) · Tab next table or tab"),
                  ("m / f", "memory of the run's user / only what the run wrote"),
                  ("t", "the run's trace, a tree with timings, tokens and cost"))),
)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,f1,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        text = Text()
        for where, keys in KEYS:
            text.append(f"{where}\n", style="bold underline")
            for key, what in keys:
                text.append(f" {key:<12}", style="bold")
                text.append(f"{what}\n")
        text.append("Esc, F1 or q closes this help", style="italic")
        with VerticalScroll():
            yield Static(text)

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(result)
