"""Rendering a run for a person: progress on stderr as it happens, the answer once on stdout,
a recorded run replayed from its audit log. Imported by the commands that run or replay (it
loads rich and the events)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.status import Status

from thinkloop.api import unwrap
from thinkloop.core.events import (
    Chunk,
    Event,
    GuardTruncated,
    HookErrored,
    LlmRequest,
    LlmResponse,
    RunCancelled,
    RunCompleted,
    RunFailed,
    ToolCalled,
    ToolReturned,
)

if TYPE_CHECKING:
    from thinkloop.api import RunResult


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"... [{len(text)} chars]"


class EventPrinter:
    """Shows steps as they happen: a spinner while the model works (with the tokens it has
    written so far), then each tool call and its observation. The answer is not shown here:
    ``print_answer`` prints it once, on stdout, when the run ends."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._status: Status | None = None
        self._tokens = 0

    def __call__(self, event: Event) -> None:
        match event:
            case LlmRequest():
                self._tokens = 0
                self._spin(event.step)
            case Chunk():
                self._tokens += 1
                if self._status is not None:
                    self._status.update(self._label(event.step))
            case LlmResponse(thought=thought):
                self.close()
                if thought:
                    self.console.print(f"[magenta]thought[/] {escape(_short(thought))}")
            case ToolCalled(name=name, arguments=arguments):
                self.console.print(f"[cyan]step {event.step + 1}[/] [bold]{escape(name)}[/]"
                                   f"({escape(_short(arguments, 200))})")
            case ToolReturned(is_error=is_error, content=content):
                style = "red" if is_error else "green"
                # The person reads what the tool gave, not the wrapping and marks the model
                # reads outside content in (spotlight.py).
                shown = unwrap(content)
                outside = " [dim](outside content)[/]" if shown != content else ""
                self.console.print(f"  [{style}]->[/]{outside} {escape(_short(shown))}")
            case GuardTruncated(original_chars=n, kept_chars=kept):
                # The person is told what the model was not shown, and why (the model is
                # told too, in a note after the kept part).
                self.console.print(
                    f"[yellow]note:[/] the task is {n:,} characters: only its first "
                    f"{kept:,} go on to the model ({n - kept:,} cut by the input guard's "
                    "max_message_chars limit)", highlight=False)
            case HookErrored(hook=hook, error=error):
                self.console.print(f"[yellow]hook {hook} failed:[/] {escape(error)}")
            case RunCompleted():
                self.close()
                self._ended(event)
            case RunFailed():
                self.close()
            case RunCancelled():
                self.close()
                self.console.print("[yellow]cancelled[/]")

    def close(self) -> None:
        """Stop the spinner (idempotent)."""
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _spin(self, step: int) -> None:
        self.close()
        if self.console.is_terminal:
            self._status = self.console.status(self._label(step), spinner="dots")
            self._status.start()

    def _label(self, step: int) -> str:
        written = f", {self._tokens} tokens" if self._tokens else ""
        return f"[cyan]step {step + 1}[/] [dim]model is working{written}...[/]"

    def _ended(self, event: RunCompleted) -> None:
        if event.status != "completed":
            why = f": {escape(event.error)}" if event.error else ""
            self.console.print(f"[yellow]run ended {event.status}[/]{why}")
        if event.silent:
            self.console.print("[dim](silent reply: nothing to deliver)[/]")
        elif not event.output and event.status != "no_answer":  # say why stdout is empty
            self.console.print("[dim](no answer: the model's last reply was empty)[/]")
        u = event.usage
        self.console.print(
            f"[dim]{u['requests']} model calls, {u['input_tokens']} in / "
            f"{u['output_tokens']} out tokens[/]"
        )


def print_answer(result: RunResult, console: Console) -> None:
    """The run's answer, once: framed on a terminal, plain text when piped."""
    if result.silent or not result.text:
        return
    if console.is_terminal:
        title = "answer" if result.status == "completed" else f"answer ({result.status})"
        console.print(Panel(escape(result.text), title=title, expand=False))
    else:
        console.print(result.text, markup=False, highlight=False)


class ReplayPrinter(EventPrinter):
    """The live printer, fed from the audit log: a reply's text (streamed live) is printed
    whole, as it appeared."""

    def __call__(self, event: Event) -> None:
        if isinstance(event, LlmResponse) and event.text:
            self.console.print(escape(event.text), style="dim")
        super().__call__(event)
