"""Rendering run events for a person: steps as they happen, then the answer."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from thinkloop.types import Event


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"... [{len(text)} chars]"


class EventPrinter:
    """Prints thoughts, tool calls and observations live; chunks stream as plain text."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._streaming = False

    def __call__(self, event: Event) -> None:
        handler = getattr(self, "on_" + event.type.replace(".", "_"), None)
        if handler is not None:
            handler(event)

    def _end_stream(self) -> None:
        if self._streaming:
            self.console.print()
            self._streaming = False

    def on_chunk(self, event: Event) -> None:
        if event.payload.get("kind") == "text":
            self.console.print(escape(event.payload["content"]), end="", style="dim")
            self._streaming = True

    def on_llm_response(self, event: Event) -> None:
        self._end_stream()
        thought = event.payload.get("thought")
        if thought:
            self.console.print(f"[magenta]thought[/] {escape(_short(thought))}")

    def on_tool_call(self, event: Event) -> None:
        p = event.payload
        self.console.print(
            f"[cyan]step {event.step + 1}[/] [bold]{escape(p['name'])}[/]"
            f"({escape(_short(p['arguments'], 200))})"
        )

    def on_tool_result(self, event: Event) -> None:
        p = event.payload
        style = "red" if p["is_error"] else "green"
        self.console.print(f"  [{style}]->[/] {escape(_short(p['content']))}")

    def on_hook_failed(self, event: Event) -> None:
        self.console.print(f"[yellow]hook {event.payload.get('hook')} failed:[/] "
                           f"{escape(str(event.payload.get('error')))}")

    def on_run_completed(self, event: Event) -> None:
        self._end_stream()
        p = event.payload
        title = "answer" if p["status"] == "completed" else f"answer ({p['status']})"
        if p.get("silent"):
            self.console.print("[dim](silent reply: nothing to deliver)[/]")
        elif p.get("output"):
            self.console.print(Panel(escape(str(p["output"])), title=title, expand=False))
        elif p.get("error"):
            self.console.print(f"[yellow]{p['status']}:[/] {escape(p['error'])}")
        u = p["usage"]
        self.console.print(
            f"[dim]{u['requests']} model calls, {u['input_tokens']} in / "
            f"{u['output_tokens']} out tokens[/]"
        )

    def on_run_cancelled(self, event: Event) -> None:
        self._end_stream()
        self.console.print("[yellow]cancelled[/]")
