"""``thinkloop prompt``: print the system prompt exactly as the model will see it.

Each section is shown under a rule with its size in tokens, then a table of the sizes. Nothing
is written: bootstrap files that do not exist yet are shown from their templates.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from thinkloop.cli.render import console, escape

if TYPE_CHECKING:
    from thinkloop.core.types import ModelResponse, TextDelta, ToolSpec


class Mode(StrEnum):
    full = "full"
    minimal = "minimal"


class PreviewModel:
    """Stands in for the real model: a preview needs only its name, and needs no API key."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def complete(self, messages: Sequence[Any], tools: Sequence[ToolSpec],
                       settings: Any) -> ModelResponse:
        raise RuntimeError("a prompt preview never calls the model")

    async def stream(self, messages: Sequence[Any], tools: Sequence[ToolSpec],
                     settings: Any) -> AsyncIterator[TextDelta | ModelResponse]:
        raise RuntimeError("a prompt preview never calls the model")
        yield  # pragma: no cover - makes this an async generator


def prompt(
    agent: Annotated[str, typer.Option(
        "--agent", "-a", help="Agent name; its files live in THINKLOOP_HOME/agents/NAME.")
    ] = "thinkloop",
    mode: Annotated[Mode | None, typer.Option(
        help="full (main runs) or minimal (sub-agents); default: minimal for models under 8K "
             "context (the local model), else full.", show_default=False)] = None,
    user: Annotated[str | None, typer.Option(help="Show the prompt for this user id.")] = None,
    session: Annotated[str | None, typer.Option(help="Session id shown in runtime.")] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="provider:name")] = None,
    no_tools: Annotated[bool, typer.Option("--no-tools", help="Without tools.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Sections and sizes as JSON.")] = False,
) -> None:
    """Print the assembled system prompt, section by section, with token sizes."""
    sections, used = render_sections(agent, mode.value if mode else None, user, session, model,
                                     no_tools)
    if as_json:
        doc = [{"name": n, "tokens": t, "text": text} for n, text, t in sections]
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        return
    from rich.table import Table

    out = console(highlight=False)
    for name, text, tokens in sections:
        out.rule(f"[bold]{name}[/] [dim]({tokens} tokens)[/]", align="left")
        out.print(escape(text), soft_wrap=True)
    table = Table("section", "tokens", title=f"{agent} · {used}", title_justify="left")
    for name, _, tokens in sections:
        table.add_row(name, str(tokens))
    table.add_row("[bold]total[/]", f"[bold]{sum(t for _, _, t in sections)}[/]")
    out.print()
    out.print(table)


def render_sections(
    agent_name: str, mode: str | None, user: str | None, session: str | None,
    model: str | None, no_tools: bool,
) -> tuple[list[tuple[str, str, int]], str]:
    """(name, text, tokens) of each section for the agent as ``thinkloop run`` would build it,
    and the prompt mode used."""
    from thinkloop.api import heuristic_count, is_small, prompt_context, tools_prompt
    from thinkloop.cli.build import AgentOptions, build_agent
    from thinkloop.core.settings import load_settings

    settings = load_settings()
    spec = model or settings.model_spec()
    opts = AgentOptions(model=spec, tools="none" if no_tools else "default", name=agent_name)
    preview = PreviewModel(spec)
    a = build_agent(opts, settings, model=preview)
    used = mode or ("minimal" if is_small(preview) else "full")
    ctx = prompt_context(a, used, user_id=user, session_id=session,  # type: ignore[arg-type]
                         seed=False)
    out = [(r.name, r.text, heuristic_count(r.text)) for r in a.prompt.render(ctx)]
    native = a.protocol.model_tools([t.spec for t in a.tools.values()])
    if native and spec.split(":", 1)[0] == "local":
        # The local model reads tools as a short list in its prompt, at most 3 per task
        # (context/focus.py); shown here for the whole set.
        text = tools_prompt(native)
        out.append(("tools (listed; at most 3 offered per task)", text, heuristic_count(text)))
    elif native:
        # Not part of the prompt text, but the model reads these schemas all the same: as
        # sent, compact JSON (indented, they would count a quarter more), one tool a line.
        text = "\n".join(json.dumps({"name": t.name, "description": t.description,
                                     "parameters": t.parameters}, separators=(",", ":"))
                         for t in native)
        out.append(("tools (sent natively)", text, heuristic_count(text)))
    return out, used
