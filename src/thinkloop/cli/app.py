"""The ``thinkloop`` command: a thin shell over the library."""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from thinkloop.cli.approvals import approvals_app
from thinkloop.cli.channel import channel
from thinkloop.cli.config import config
from thinkloop.cli.guard import guard_app
from thinkloop.cli.host import host
from thinkloop.cli.prompt import prompt
from thinkloop.cli.render import EXIT_CODES, USAGE_ERROR, console, fail, first_sentence
from thinkloop.cli.runs import runs_app, trace
from thinkloop.cli.schedules import schedules_app
from thinkloop.cli.serve import keys_app, serve, worker
from thinkloop.cli.sessions import sessions_app
from thinkloop.cli.ui import ui
from thinkloop.core.errors import StoreError, ThinkloopError

if TYPE_CHECKING:
    # The engine (pydantic, tracing, guards, the store), asyncio and rich load when a command
    # runs, so that ``--help`` starts quickly (benchmarks/startup.py).
    import asyncio
    from collections.abc import Coroutine

    from rich.console import Console

    from thinkloop.api import Agent, RunHandle, RunResult
    from thinkloop.cli.build import AgentOptions
    from thinkloop.core.settings import Settings
    from thinkloop.core.tool import Tool

app = typer.Typer(
    name="thinkloop",
    help="thinkloop: an agentic reasoning engine. Run a task with tools on any model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: typer's rich help imports rich.markdown and rich.traceback, most of
    # what ``thinkloop --help`` took (issue 19); every sub-app says the same.
    rich_markup_mode=None,
    context_settings={"max_content_width": 100},
)


RUN_EPILOG = (
    "Exit codes: 0 completed, 1 failed or error, 2 usage error, 3 max_steps, 4 loop_detected, "
    "5 budget_exceeded, 6 blocked, 7 paused, 8 timeout, 9 no_answer, 10 completed but every "
    "call was refused, 130 cancelled."
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        sys.stdout.write(f"thinkloop {version('thinkloop')}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")]
    = False,
) -> None:
    """thinkloop: an agentic reasoning engine. Run a task with tools on any model."""


def read_task(task: str | None) -> str:
    """The task from the argument, or from standard input for ``-`` or a piped stdin."""
    if task is None or task == "-":
        if task is None and sys.stdin.isatty():
            raise fail("no task: give it as an argument, or '-' to read it from stdin")
        task = sys.stdin.read()
    if not task.strip():
        raise fail("the task is empty")
    return task.strip()


@app.command(epilog=RUN_EPILOG)
def run(
    task: Annotated[str | None, typer.Argument(
        help="What the agent should do; '-' (or no argument with piped input) reads stdin.",
        show_default=False)] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="provider:name")] = None,
    fallback: Annotated[list[str] | None, typer.Option(
        "--fallback", metavar="MODEL", help="A model tried when the model fails (repeatable, "
        "in order; default: THINKLOOP_FALLBACKS).", show_default=False)] = None,
    max_steps: Annotated[int | None, typer.Option(help="Step limit (default: by task).")] = None,
    history_turns: Annotated[int | None, typer.Option(
        help="Each request keeps the session's last N user turns (default: all that fit).",
        show_default=False)] = None,
    timeout: Annotated[float | None, typer.Option(help="Run timeout in seconds.")] = None,
    session: Annotated[str | None, typer.Option(help="Continue this session.")] = None,
    user: Annotated[str | None, typer.Option(help="Who is asking (memory, workspace).")] = None,
    protocol: Annotated[str | None, typer.Option(help="native|json|tags|xml|auto")] = None,
    tools: Annotated[str, typer.Option(
        help="'default', 'none', or tool names separated by commas.")] = "default",
    mcp: Annotated[list[str] | None, typer.Option(
        "--mcp", help="MCP server to use, e.g. 'time=uvx mcp-server-time' (repeatable); "
        "'trusted:time=...' lets its tool annotations (read-only, closed-world) skip "
        "approval.")] = None,
    mcp_config: Annotated[Path | None, typer.Option(
        help="JSON/TOML file of MCP servers.")] = None,
    approve: Annotated[str | None, typer.Option(
        help="Tools that need approval (shell, file writes, messages): ask|auto|deny|pause "
             "(pause needs --session). Default: ask on a terminal, else refuse them.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the RunResult as JSON.")] = False,
    judgement: Annotated[str | None, typer.Option(
        help="Judgement plugins: all, off, or a comma list (assess,select,...).")] = None,
    model_pool: Annotated[str | None, typer.Option(
        help="Models for --judgement select: provider:model=capability[/effort],...")]
    = None,
    file: Annotated[
        list[Path] | None, typer.Option("--file", help="Attach a file (repeatable).")
    ] = None,
    context_url: Annotated[
        str | None, typer.Option("--context-url", help="Page to read as context.")
    ] = None,
    stdio: Annotated[bool, typer.Option(
        "--stdio", help="Container mode: a JSON payload on stdin, results between markers.")
    ] = False,
    isolation: Annotated[str, typer.Option(
        help="off|plan: plan-then-execute, outside content read in quarantine.")] = "off",
    workspace: Annotated[Path | None, typer.Option(
        help="The directory the file and shell tools work in, e.g. '.' for this project "
             "(default: a folder per user under THINKLOOP_TOOLS_WORKSPACE).",
        show_default=False)] = None,
) -> None:
    """Run TASK with an agent: its steps live on stderr, the answer on stdout."""
    from thinkloop.cli.build import AgentOptions

    if max_steps is not None and max_steps < 1:
        raise fail(f"--max-steps must be at least 1, got {max_steps}")
    if timeout is not None and not timeout > 0:
        raise fail(f"--timeout must be more than 0 seconds, got {timeout:g}")
    # Read once and passed down; container mode reads its own, with the payload's secrets.
    if history_turns is not None and history_turns < 1:
        raise fail(f"--history-turns must be at least 1, got {history_turns}")
    settings = None if stdio else _settings().with_arguments({"history_turns": history_turns})
    opts = AgentOptions(model=model, fallbacks=fallback or [], tools=tools,
                        max_steps=max_steps, timeout_s=timeout,
                        protocol=protocol, approve=approve, judgement=judgement,
                        model_pool=model_pool, isolation=isolation,
                        workspace=_workspace(workspace, settings))
    if stdio:
        from thinkloop.cli.stdio import main_stdio

        raise typer.Exit(main_stdio(opts))
    assert settings is not None
    text = read_task(task)
    inputs = RunInputs(text, session, user, file or [], context_url, mcp or [], mcp_config)
    try:
        result = _run_to_end(_run(opts, inputs, settings, quiet=as_json))
    except ThinkloopError as exc:
        # A broken store is an error (1), not a usage mistake (2).
        raise fail(str(exc), 1 if isinstance(exc, StoreError) else 2) from None
    from thinkloop.cli.refusals import REFUSED_EXIT, line, only_refused, refused

    denied = refused(result)
    if not as_json:  # (the answer, or --json's document, was printed once the turn was saved)
        err = console(stderr=True, soft_wrap=True, highlight=False)
        for item in denied:
            err.print(line(item), markup=False)
    code = EXIT_CODES.get(result.status, 1)
    if code == 0 and only_refused(result):
        code = REFUSED_EXIT
    if result.status == "failed":
        raise fail(result.error or "run failed", code)
    if code:
        raise typer.Exit(code)


def _run_to_end(main: Coroutine[Any, Any, RunResult]) -> RunResult:
    """``asyncio.run(main)``, but Ctrl-C exits at once once ``main`` has unwound (the turn
    saved, skipped jobs released, the store closed): what is left then is a local model's
    native call in a worker thread, which closing the loop would wait for (seconds)."""
    import asyncio
    import os

    runner = asyncio.Runner()
    try:
        return runner.run(main)
    except KeyboardInterrupt:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    finally:
        runner.close()


@dataclass(frozen=True)
class RunInputs:
    task: str
    session: str | None
    user: str | None
    files: list[Path]
    context_url: str | None
    mcp: list[str]
    mcp_config: Path | None


async def _run(
    opts: AgentOptions, inputs: RunInputs, settings: Settings, *, quiet: bool
) -> RunResult:
    import asyncio

    from thinkloop.api import context_from_cli, open_store
    from thinkloop.cli.build import build_agent
    from thinkloop.cli.printers import EventPrinter, load_local

    async with contextlib.AsyncExitStack() as stack:
        extra = await _mcp_tools(stack, inputs)
        # Sessions, memory and run records live in the durable store (SQLite under
        # THINKLOOP_HOME, or THINKLOOP_DATABASE_URL); memory only when a session or user
        # needs it. Every run is recorded (``thinkloop runs``).
        store = open_store(settings=settings)
        stack.push_async_callback(store.aclose)
        await store.connect()  # a damaged store is one error now, not tracebacks mid-run
        agent = build_agent(opts, settings, extra_tools=extra, store=store,
                            memory=bool(inputs.session or inputs.user))
        stack.push_async_callback(agent.aclose)  # before the store: the stack unwinds LIFO
        printer = None
        progress = console(stderr=True)
        if not quiet:
            # soft_wrap: a long workspace path stays whole, to be copied.
            progress.print(f"[dim]model: {agent.model.name}{_where(agent, inputs.user)}[/]",
                           highlight=False, soft_wrap=True)
            printer = EventPrinter(progress)
            agent.subscribe(printer)
            await load_local(agent, progress)
        context = None
        if inputs.files or inputs.context_url:
            context = await context_from_cli(inputs.files, inputs.context_url,
                                             settings=settings.tools)
        began = asyncio.Event()
        agent.subscribe(lambda _event: began.set())
        handle = agent.start(inputs.task, session=inputs.session, user_id=inputs.user,
                             stream_model=not quiet, context=context)
        waiting = asyncio.create_task(_say_waiting(began, None if quiet else progress,
                                                   inputs.session))
        try:
            result = await handle.result()
        finally:
            waiting.cancel()
            if printer is not None:
                printer.close()
        if quiet:  # --json: the result first, the jobs after, as the answer is
            from thinkloop.cli.refusals import refused

            doc = {**result.to_dict(), "refused": refused(result)}
            sys.stdout.write(json.dumps(doc, ensure_ascii=False, default=str) + "\n")
            sys.stdout.flush()
        else:
            from thinkloop.cli.printers import print_answer

            print_answer(result, console(soft_wrap=True))  # the answer first, the jobs after
        await _post_turn_jobs(agent, handle, None if quiet else console(stderr=True))
        return result
    raise AssertionError("unreachable")  # for type checkers: the with-block always returns


# After this long without its first event, a run is waiting for its session: say so.
WAIT_NOTE_S = 2.0


async def _say_waiting(began: asyncio.Event, progress: Console | None,
                       session: str | None) -> None:
    import asyncio

    if progress is None or session is None:
        return
    try:
        await asyncio.wait_for(began.wait(), WAIT_NOTE_S)
    except TimeoutError:
        progress.print(f"[dim]waiting for session {session!r}: another run is using it…[/]",
                       highlight=False)


async def _post_turn_jobs(agent: Agent, handle: RunHandle, progress: Console | None) -> None:
    """Wait for the turn's memory jobs (before the store closes), then those earlier runs
    left owed, saying so; Ctrl-C stops them at once and leaves them owed to the next run:
    the answer was already printed and the session turn saved."""
    import asyncio

    if progress is not None and not handle.background.done():
        progress.print("[dim]saving memory… (Ctrl-C skips it; the answer is saved)[/]",
                       highlight=False)
    tasks: list[asyncio.Task[Any]] = [handle.background]
    try:
        await handle.wait_background()
        tasks.append(asyncio.create_task(agent.finish_owed_jobs()))
        await asyncio.shield(tasks[-1])
    except asyncio.CancelledError:
        # post_turn retries once when cancelled (a loop shutting down); Ctrl-C means stop.
        for task in tasks:
            for _ in range(3):
                task.cancel()
                done, _pending = await asyncio.wait({task}, timeout=0.3)
                if done:
                    break
        # Skipped jobs stay owed; released, the next run takes them (not after an hour).
        await asyncio.wait_for(agent.sessions.release_jobs(handle.state.run_id), 1.0)
        raise


# The built-in tools that read or write the workspace (tools/builtin/files.py, shell.py).
WORKSPACE_TOOLS = frozenset({"read_file", "write_file", "edit_file", "list_dir", "glob", "grep",
                             "shell"})


def _where(agent: Agent, user: str | None) -> str:
    """`` · workspace: DIR`` when the agent has tools that work in one: where files go."""
    if not WORKSPACE_TOOLS & set(agent.tools):
        return ""
    from thinkloop.api import Workspace

    return f" · workspace: {Workspace.of(agent.config.tools).root(user)}"


def _settings() -> Settings:
    from thinkloop.core.settings import load_settings

    try:
        return load_settings()
    except ThinkloopError as exc:  # a bad thinkloop.toml or environment value
        raise fail(str(exc)) from None


def _workspace(path: Path | None, settings: Settings | None) -> Path | None:
    """``--workspace``: an existing directory that neither holds THINKLOOP_HOME nor lies inside
    it (but for thinkloop's own workspaces folder there)."""
    if path is None:
        return None
    chosen = path.expanduser().resolve()
    if not chosen.is_dir():
        raise fail(f"--workspace {path}: no such directory")
    from thinkloop.core.settings import workspace_clash

    clash = workspace_clash(chosen, (settings or _settings()).home)
    if clash:  # the same rule the settings apply to THINKLOOP_TOOLS_WORKSPACE
        raise fail(f"--workspace {path} {clash}")
    return chosen


async def _mcp_tools(stack: contextlib.AsyncExitStack, inputs: RunInputs) -> list[Tool]:
    if not inputs.mcp and inputs.mcp_config is None:
        return []
    from thinkloop.api import load_mcp_file, mcp_tools, parse_mcp_spec

    configs = [parse_mcp_spec(s) for s in inputs.mcp]
    if inputs.mcp_config is not None:
        configs += load_mcp_file(inputs.mcp_config)
    tools: list[Tool] = await stack.enter_async_context(mcp_tools(configs))
    return tools


@app.command("tools")
def list_tools(
    as_json: Annotated[bool, typer.Option("--json", help="Print schemas as JSON.")] = False,
) -> None:
    """List the built-in tools with their schemas and what each needs."""
    from thinkloop.api import load_plugin_hooks, load_plugin_tools
    from thinkloop.cli.build import all_builtin_tools

    found, failed = load_plugin_tools()
    tools = [*all_builtin_tools(), *((t, "installed plugin (thinkloop.tools)") for t in found)]
    for f in [*failed, *load_plugin_hooks()[1]]:
        console(stderr=True, soft_wrap=True).print(
            f"[yellow]plugin {f.entry_point} ({f.group}) failed to load and is skipped:[/] "
            f"{f.error}", highlight=False)
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
        table.add_row(t.name, first_sentence(t.description), args, needs or "-")
    console().print(table)


app.command("prompt")(prompt)
app.command("config")(config)
app.add_typer(sessions_app, name="sessions")
app.add_typer(approvals_app, name="approvals")
app.add_typer(runs_app, name="runs")
app.command("trace")(trace)
app.command("serve")(serve)
app.command("worker")(worker)
app.command("host")(host)
app.add_typer(schedules_app, name="schedules")
app.command("channel")(channel)
app.add_typer(keys_app, name="keys")
app.add_typer(guard_app, name="guard")
app.command("ui")(ui)


def main() -> None:
    try:
        app()
    except ThinkloopError as exc:
        fail(str(exc))
        # A broken store is an error (1), not a usage mistake (2).
        sys.exit(1 if isinstance(exc, StoreError) else USAGE_ERROR)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
