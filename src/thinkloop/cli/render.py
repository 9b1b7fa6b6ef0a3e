"""What every command shares, kept light: ``thinkloop --help`` imports this module, so rich
(and the events, the store) load with a command's first output, not with the help
(``printers.py`` renders runs)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


# How ``thinkloop run`` (and ``runs resume``) exits, by the run's status (documented in the
# README and --help).
EXIT_CODES: dict[str, int] = {
    "completed": 0, "failed": 1, "max_steps": 3, "loop_detected": 4, "budget_exceeded": 5,
    "blocked": 6, "paused": 7, "timeout": 8, "no_answer": 9, "cancelled": 130,
}
USAGE_ERROR = 2


def console(**options: Any) -> Console:
    """A rich ``Console(**options)``; rich is imported here, with the first output."""
    from rich.console import Console

    return Console(**options)


def escape(text: str) -> str:
    """``rich.markup.escape``, imported on first use."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def fail(message: str, code: int = USAGE_ERROR) -> typer.Exit:
    """Print ``error: message`` on stderr; the exit to raise (every command's one error form)."""
    console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(message)}",
                                               highlight=False)
    return typer.Exit(code)


def first_sentence(text: str) -> str:
    """The first sentence of a description, whole even when the docstring wraps it."""
    paragraph = " ".join(text.strip().split("\n\n", 1)[0].split())
    return _SENTENCE_END.split(paragraph, 1)[0]
