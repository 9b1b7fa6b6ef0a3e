"""Rendering a run for a person: progress on stderr as it happens, the answer once on stdout,
a recorded run replayed from its audit log. Imported by the commands that run or replay (it
loads rich and the events)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.status import Status
from rich.text import Text

from thinkloop.api import unwrap
from thinkloop.core.errors import ThinkloopError
from thinkloop.core.events import (
    ApprovalDecided,
    ApprovalRequested,
    Chunk,
    Event,
    GuardTruncated,
    HookErrored,
    LlmRequest,
    LlmResponse,
    ModelInputCut,
    RunCancelled,
    RunCompleted,
    RunFailed,
    ToolCalled,
    ToolReturned,
)

if TYPE_CHECKING:
    from thinkloop.api import Agent, RunResult


# A wait longer than this shows how long it has lasted (a spinner alone looks stuck).
SLOW_S = 2.0
# Tools that put a question to the person at this terminal and read the answer.
ASKS_THE_PERSON = frozenset({"ask_human"})


class Elapsed:
    """A spinner's text that adds the seconds gone once they pass :data:`SLOW_S`: rich renders
    it afresh on each refresh, so the count goes up while the step waits."""

    def __init__(self, markup: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.markup, self.clock, self.started = markup, clock, clock()

    def __rich__(self) -> Text:
        took = self.clock() - self.started
        return Text.from_markup(self.markup + (f" [dim]{took:.0f}s[/]" if took >= SLOW_S
                                               else ""))


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
        self._label: Elapsed | None = None
        self._tokens = 0
        self._running: dict[str, str] = {}  # tool calls in flight: id -> name
        self._cut_said = False  # whether this run's model.input_cut was shown

    def __call__(self, event: Event) -> None:
        match event:
            case LlmRequest():
                self._tokens = 0
                self._spin(self._working(event.step))
            case Chunk():
                self._tokens += 1
                if self._label is not None:
                    self._label.markup = self._working(event.step)
            case LlmResponse(thought=thought):
                self.close()
                if thought:
                    self.console.print(f"[magenta]thought[/] {escape(_short(thought))}")
            case ToolCalled(name=name, arguments=arguments):
                self.close()
                self.console.print(f"[cyan]step {event.step + 1}[/] [bold]{escape(name)}[/]"
                                   f"({escape(_short(arguments, 200))})")
                if name not in ASKS_THE_PERSON:  # no spinner drawn over its question
                    self._running[event.id] = name
                    self._spin(self._tools_running(event.step),
                               keep_clock=len(self._running) > 1)
            case ToolReturned(is_error=is_error, content=content, duration_s=took):
                self._running.pop(event.id, None)
                self.close()
                style = "red" if is_error else "green"
                # The person reads what the tool gave, not the wrapping and marks the model
                # reads outside content in (spotlight.py).
                shown = unwrap(content)
                outside = " [dim](outside content)[/]" if shown != content else ""
                slow = f" [dim]({took:.1f}s)[/]" if took >= SLOW_S else ""
                self.console.print(f"  [{style}]->[/]{slow}{outside} {escape(_short(shown))}")
                if self._running:
                    self._spin(self._tools_running(event.step), keep_clock=True)
            case ApprovalRequested():
                self.close()  # a person is asked on this terminal: no spinner over the prompt
            case ApprovalDecided(approved=True) if self._running:
                self._spin(self._tools_running(event.step))
            case ModelInputCut(window=window, chars=chars) if not self._cut_said:
                # Once per run: each step re-sends the history, cut again about as much.
                self._cut_said = True
                self.console.print(
                    f"[yellow]note:[/] the model's context window ({window:,} tokens) could not "
                    f"hold the whole request: {chars:,} characters were left out of the middle "
                    "of its longest messages (a note there tells it so)", highlight=False)
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

    def _spin(self, markup: str, *, keep_clock: bool = False) -> None:
        """A spinner with ``markup`` and the time it has waited (``keep_clock``: counted
        from the spinner it replaces, as when one of several tool calls returns)."""
        before = self._label
        self.close()
        self._label = Elapsed(markup)
        if keep_clock and before is not None:
            self._label.started = before.started
        if self.console.is_terminal:
            self._status = self.console.status(self._label, spinner="dots")
            self._status.start()

    def _working(self, step: int) -> str:
        written = f", {self._tokens} tokens" if self._tokens else ""
        return f"[cyan]step {step + 1}[/] [dim]model is working{written}...[/]"

    def _tools_running(self, step: int) -> str:
        names = ", ".join(escape(n) for n in self._running.values())
        return f"[cyan]step {step + 1}[/] [dim]{names} running...[/]"

    def _ended(self, event: RunCompleted) -> None:
        if event.status != "completed":
            why = f": {escape(event.error)}" if event.error else ""
            self.console.print(f"[yellow]run ended {event.status}[/]{why}")
        if event.silent:
            self.console.print("[dim](silent reply: nothing to deliver)[/]")
        elif not event.output and event.status != "no_answer":  # say why stdout is empty
            self.console.print("[dim](no answer: the model's last reply was empty)[/]")
        u = event.usage
        calls = "model call" if u["requests"] == 1 else "model calls"
        self.console.print(
            f"[dim]{u['requests']} {calls}, {u['input_tokens']} in / "
            f"{u['output_tokens']} out tokens[/]"
        )


async def load_local(agent: Agent, progress: Console) -> None:
    """Load a local model's weights before the run, saying what loads (file and size), so
    the first step's spinner is not a silent wait on the load."""
    from thinkloop.api import local_of

    local = local_of(agent.model)
    note = local.loading_note() if local is not None else None
    if local is None or note is None:
        return
    if progress.is_terminal:
        shown: contextlib.AbstractContextManager[Any] = progress.status(f"[dim]{note}[/]")
    else:
        progress.print(f"[dim]{note}[/]", highlight=False)
        shown = contextlib.nullcontext()
    # A failed load is left to the run: its first call meets the same error and reports it.
    with shown, contextlib.suppress(ThinkloopError):
        await asyncio.to_thread(local.load)


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
