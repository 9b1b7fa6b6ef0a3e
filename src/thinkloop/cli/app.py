"""The ``thinkloop`` command: a thin shell over the library."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from thinkloop.agent import Agent
from thinkloop.cli.prompt import cli_prompt_builder, prompt
from thinkloop.cli.render import EventPrinter
from thinkloop.config import Settings, default_model_spec
from thinkloop.context.inputs import context_from_cli
from thinkloop.errors import ThinkloopError
from thinkloop.loop.result import RunResult
from thinkloop.tools.base import Tool

app = typer.Typer(
    name="thinkloop",
    help="thinkloop: an agentic reasoning engine. Run a task with tools on any model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def fail(message: str, code: int = 2) -> typer.Exit:
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="What the agent should do.")],
    model: Annotated[str | None, typer.Option("--model", "-m", help="provider:name")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Step limit (default 12).")] = None,
    timeout: Annotated[float | None, typer.Option(help="Run timeout in seconds.")] = None,
    session: Annotated[str | None, typer.Option(help="Continue this session.")] = None,
    protocol: Annotated[str | None, typer.Option(help="native|json|tags|xml|auto")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the RunResult as JSON.")] = False,
    no_tools: Annotated[bool, typer.Option("--no-tools", help="Run without tools.")] = False,
    file: Annotated[
        list[Path] | None, typer.Option("--file", help="Attach a file (repeatable).")
    ] = None,
    context_url: Annotated[
        str | None, typer.Option("--context-url", help="Page to read as context.")
    ] = None,
) -> None:
    """Run TASK with an agent and show its steps live."""
    settings = Settings()
    spec = model or settings.model or default_model_spec()
    try:
        agent = Agent(
            spec,
            tools=[] if no_tools else _default_tools(),
            max_steps=max_steps or settings.max_steps,
            timeout_s=timeout or settings.timeout_s,
            tool_timeout_s=settings.tool_timeout_s,
            protocol=protocol or settings.protocol,
            prompt=cli_prompt_builder(settings),
        )
    except ThinkloopError as exc:
        raise fail(str(exc)) from None
    if not as_json:
        Console(stderr=True).print(f"[dim]model: {agent.model.name}[/]", highlight=False)
    try:
        result = asyncio.run(_run(agent, task, session, as_json, file or [], context_url))
    except ThinkloopError as exc:
        raise fail(str(exc)) from None
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False, default=str) + "\n")
    if result.status == "failed":
        raise fail(result.error or "run failed", 1)


async def _run(
    agent: Agent, task: str, session: str | None, quiet: bool, files: list[Path],
    context_url: str | None,
) -> RunResult:
    if not quiet:
        agent.subscribe(EventPrinter(Console()))
    try:
        context = await context_from_cli(files, context_url) if files or context_url else None
        handle = agent.start(task, session=session, stream_model=not quiet, context=context)
        return await handle.result()
    finally:
        await _close_model(agent)


async def _close_model(agent: Agent) -> None:
    close = getattr(agent.model, "aclose", None)
    if close is not None:
        await close()


def _default_tools() -> list[Tool]:
    from thinkloop.tools.defaults import default_tools

    return default_tools(os.environ)


@app.command("tools")
def list_tools(
    as_json: Annotated[bool, typer.Option("--json", help="Print schemas as JSON.")] = False,
) -> None:
    """List the built-in tools with their schemas."""
    from thinkloop.tools.defaults import all_builtin_tools

    tools = all_builtin_tools()
    if as_json:
        out = [{"name": t.name, "description": t.description, "parameters": t.parameters}
               for t in tools]
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    from rich.table import Table

    table = Table("tool", "description", "arguments")
    for t in tools:
        props = t.parameters.get("properties", {})
        required = set(t.parameters.get("required", ()))
        args = ", ".join(f"{k}{'' if k in required else '?'}: {v.get('type', 'any')}"
                         for k, v in props.items())
        table.add_row(t.name, t.description.splitlines()[0], args)
    Console().print(table)


app.command("prompt")(prompt)


def main() -> None:
    try:
        app()
    except ThinkloopError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {exc}", highlight=False)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
