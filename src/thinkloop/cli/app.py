"""The ``thinkloop`` command: a thin shell over the library."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from thinkloop.agent import Agent
from thinkloop.cli.approvals import approvals_app
from thinkloop.cli.build import AgentOptions, build_agent
from thinkloop.cli.prompt import prompt
from thinkloop.cli.render import EventPrinter
from thinkloop.cli.serve import keys_app, serve
from thinkloop.cli.sessions import sessions_app
from thinkloop.config import Settings
from thinkloop.context.inputs import context_from_cli
from thinkloop.errors import ThinkloopError
from thinkloop.loop.result import RunResult
from thinkloop.store.open import open_store
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
    task: Annotated[str | None, typer.Argument(help="What the agent should do.")] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="provider:name")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Step limit (default: by task).")] = None,
    timeout: Annotated[float | None, typer.Option(help="Run timeout in seconds.")] = None,
    session: Annotated[str | None, typer.Option(help="Continue this session.")] = None,
    user: Annotated[str | None, typer.Option(help="Who is asking (memory, workspace).")] = None,
    protocol: Annotated[str | None, typer.Option(help="native|json|tags|xml|auto")] = None,
    tools: Annotated[str, typer.Option(
        help="'default', 'none', or tool names separated by commas.")] = "default",
    mcp: Annotated[list[str] | None, typer.Option(
        "--mcp", help="MCP server to use, e.g. 'time=uvx mcp-server-time' (repeatable).")] = None,
    mcp_config: Annotated[Path | None, typer.Option(
        help="JSON/TOML file of MCP servers.")] = None,
    approve: Annotated[str, typer.Option(
        help="Tools that need approval: ask|auto|deny|pause (pause needs --session).")] = "ask",
    as_json: Annotated[bool, typer.Option("--json", help="Print the RunResult as JSON.")] = False,
    judgement: Annotated[str | None, typer.Option(
        help="Judgement plugins: all, off, or a comma list (assess,select,...).")] = None,
    model_pool: Annotated[str | None, typer.Option(
        help="Models for --judgement select: provider:model=capability[/effort],...")] = None,
    file: Annotated[
        list[Path] | None, typer.Option("--file", help="Attach a file (repeatable).")
    ] = None,
    context_url: Annotated[
        str | None, typer.Option("--context-url", help="Page to read as context.")
    ] = None,
    stdio: Annotated[bool, typer.Option(
        "--stdio", help="Container mode: a JSON payload on stdin, results between markers.")
    ] = False,
) -> None:
    """Run TASK with an agent and show its steps live."""
    opts = AgentOptions(model, tools, max_steps, timeout, protocol, approve,
                        judgement=judgement, model_pool=model_pool)
    if stdio:
        from thinkloop.cli.stdio import main_stdio

        raise typer.Exit(main_stdio(opts))
    if task is None:
        raise fail("missing TASK (or use --stdio to read a JSON payload)")
    inputs = RunInputs(task, session, user, file or [], context_url, mcp or [], mcp_config)
    try:
        result = asyncio.run(_run(opts, inputs, quiet=as_json))
    except ThinkloopError as exc:
        raise fail(str(exc)) from None
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False, default=str) + "\n")
    if result.status == "failed":
        raise fail(result.error or "run failed", 1)


@dataclass(frozen=True)
class RunInputs:
    task: str
    session: str | None
    user: str | None
    files: list[Path]
    context_url: str | None
    mcp: list[str]
    mcp_config: Path | None


async def _run(opts: AgentOptions, inputs: RunInputs, *, quiet: bool) -> RunResult:
    async with contextlib.AsyncExitStack() as stack:
        extra = await _mcp_tools(stack, inputs)
        # Sessions and memory live in the durable store (SQLite under THINKLOOP_HOME, or
        # THINKLOOP_DATABASE_URL); it is opened only when a session or user needs it.
        store = open_store() if inputs.session or inputs.user else None
        if store is not None:
            stack.push_async_callback(store.aclose)
        agent = build_agent(opts, Settings(), extra_tools=extra, store=store)
        stack.push_async_callback(_close_model, agent)
        if not quiet:
            Console(stderr=True).print(f"[dim]model: {agent.model.name}[/]", highlight=False)
            agent.subscribe(EventPrinter(Console()))
        context = None
        if inputs.files or inputs.context_url:
            context = await context_from_cli(inputs.files, inputs.context_url)
        handle = agent.start(inputs.task, session=inputs.session, user_id=inputs.user,
                             stream_model=not quiet, context=context)
        result = await handle.result()
        await handle.wait_background()  # post-turn memory jobs finish before the store closes
        return result
    raise AssertionError("unreachable")  # for type checkers: the with-block always returns


async def _mcp_tools(stack: contextlib.AsyncExitStack, inputs: RunInputs) -> list[Tool]:
    if not inputs.mcp and inputs.mcp_config is None:
        return []
    from thinkloop.tools.mcp import load_mcp_file, mcp_tools, parse_mcp_spec

    configs = [parse_mcp_spec(s) for s in inputs.mcp]
    if inputs.mcp_config is not None:
        configs += load_mcp_file(inputs.mcp_config)
    tools: list[Tool] = await stack.enter_async_context(mcp_tools(configs))
    return tools


async def _close_model(agent: Agent) -> None:
    close = getattr(agent.model, "aclose", None)
    if close is not None:
        await close()
    if agent.judgement is not None:
        await agent.judgement.aclose()


@app.command("tools")
def list_tools(
    as_json: Annotated[bool, typer.Option("--json", help="Print schemas as JSON.")] = False,
) -> None:
    """List the built-in tools with their schemas and what each needs."""
    from thinkloop.tools.defaults import all_builtin_tools

    tools = all_builtin_tools()
    if as_json:
        out = [{"name": t.name, "description": t.description, "parameters": t.parameters,
                "needs": needs or None} for t, needs in tools]
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    from rich.table import Table

    table = Table("tool", "description", "arguments", "needs")
    for t, needs in tools:
        props = t.parameters.get("properties", {})
        required = set(t.parameters.get("required", ()))
        args = ", ".join(f"{k}{'' if k in required else '?'}: {v.get('type', 'any')}"
                         for k, v in props.items())
        table.add_row(t.name, t.description.splitlines()[0], args, needs or "-")
    Console().print(table)


app.command("prompt")(prompt)
app.add_typer(sessions_app, name="sessions")
app.add_typer(approvals_app, name="approvals")
app.command("serve")(serve)
app.add_typer(keys_app, name="keys")


def main() -> None:
    # The CLI draws its own progress; keep model loaders' progress bars off the terminal.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_NO_TQDM", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        app()
    except ThinkloopError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {exc}", highlight=False)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
