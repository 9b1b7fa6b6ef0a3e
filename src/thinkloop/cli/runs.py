"""``thinkloop runs`` and ``thinkloop trace``: see and steer recorded runs.

``thinkloop runs [--session S] [--status S]`` lists runs, ``runs show`` prints one run's steps,
``runs abort`` asks the process that owns a run to stop it (through the store: the owner polls
for abort requests), ``runs resume`` continues a run whose process died from its last
checkpoint, ``runs replay`` re-shows a finished run step by step from its audit log without
calling any model, and ``thinkloop trace`` prints a run's span tree with timings, tokens and
cost. The store is ``--db``, else ``THINKLOOP_DATABASE_URL``, else the SQLite file under
``THINKLOOP_HOME``.
"""

from __future__ import annotations

import sys
import time
from dataclasses import fields
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from thinkloop.cli.render import EXIT_CODES, console, escape, fail
from thinkloop.cli.sessions import DbOption, print_rows, session_id_of, when, with_store
from thinkloop.core.errors import StoreError, ThinkloopError

if TYPE_CHECKING:
    # The store, the events and rich load when a command runs, not for ``--help``.
    from rich.tree import Tree

    from thinkloop.api import DurableStore, RunRecord, RunResult, SpanRecord
    from thinkloop.core.events import Event

runs_app = typer.Typer(help="List, show, abort, resume and replay recorded runs.",
                       invoke_without_command=True, rich_markup_mode=None)


# How many recent runs a run id prefix is looked up among.
PREFIX_SCAN = 100_000


async def _record(store: DurableStore, run_id: str) -> RunRecord:
    """The run ``run_id`` names: its whole id, or a prefix no other run shares."""
    rec = await store.get_run(run_id)
    if rec is not None:
        return rec
    matches = [r for r in await store.list_runs(limit=PREFIX_SCAN) if r.id.startswith(run_id)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        ids = ", ".join(r.id for r in matches[:5])
        raise ThinkloopError(f"{run_id!r} is the start of {len(matches)} runs' ids ({ids}"
                             f"{', ...' if len(matches) > 5 else ''}): give more of it")
    raise ThinkloopError(f"no run {run_id!r} in this store")


async def _session_runs(
    store: DurableStore, session: str | None, status: str | None, limit: int,
) -> list[RunRecord]:
    """The runs of ``session`` (a whole id or a unique prefix of a stored session's id; the
    whole id of a deleted session still lists its runs)."""
    if session is not None and await store.session_info(session) is None:
        session = await session_id_of(store, session)
    return await store.list_runs(session, status, limit)


def _took(rec: RunRecord) -> str:
    end = rec.ended_at if rec.ended_at is not None else time.time()
    return f"{end - rec.started_at:.1f}s" + ("" if rec.ended_at is not None else "+")


def _json(rec: RunRecord) -> dict[str, Any]:
    return {f.name: getattr(rec, f.name) for f in fields(rec)}


async def _listed(store: Any, session: str | None, status: str | None,
                  limit: int) -> tuple[list[tuple[RunRecord, dict[str, Any]]], bool]:
    """The recorded runs and, with a queue configured, what the fleet has of those still in
    progress now (status queued/running/waiting, priority, worker)."""
    recs = await _session_runs(store, session, status, limit)
    from thinkloop.core.settings import load_settings

    settings = load_settings()
    if not settings.queue_url:
        return [(r, {}) for r in recs], False
    from redis.asyncio import Redis

    from thinkloop.workers.bus import Bus

    redis = Redis.from_url(settings.queue_url)
    try:
        now = await Bus(redis, settings.worker.prefix).now(
            [r.id for r in recs if r.ended_at is None])
    finally:
        await redis.aclose()
    return [(r, now.get(r.id, {})) for r in recs], True


@runs_app.callback()
def list_runs(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Option(
        help="Only this session's runs (its id or a unique prefix).")] = None,
    status: Annotated[str | None, typer.Option(
        help="Only runs with this status (running, completed, failed, cancelled, ...).")] = None,
    limit: Annotated[int, typer.Option(help="Show at most this many.")] = 50,
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """Recorded runs, newest first (with workers: queued, running or waiting on them now,
    their priority and worker)."""
    if ctx.invoked_subcommand is not None:
        return
    listed, fleet = with_store(db, lambda s: _listed(s, session, status, limit))
    # In the order they are kept when the terminal is narrow (print_rows leaves out the rest).
    columns = ("run", "status", "started", "took", "session", "model", "agent", "steps",
               "tokens in/out", "cost $")
    print_rows(
        listed, as_json, lambda x: {**_json(x[0]), **x[1]},
        columns + (("priority", "worker") if fleet else ()),
        lambda x: (x[0].id, x[1].get("status", x[0].status),
                   when(x[0].started_at, seconds=True), _took(x[0]),
                   escape(x[0].session_id or "-"), escape(x[0].model), escape(x[0].agent),
                   str(x[0].steps), f"{x[0].input_tokens}/{x[0].output_tokens}",
                   f"{x[0].cost_usd:.4f}")
        + ((str(x[1].get("priority", "-")), escape(x[1].get("worker") or "-"))
           if fleet else ()))


@runs_app.command("show")
def show_run(
    run_id: Annotated[str, typer.Argument(help="The run to show (its id or a unique prefix).")],
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="The record and its events.")] = False,
) -> None:
    """A run's record and its steps, from its audit log."""
    from thinkloop.api import event_to_dict
    from thinkloop.core.events import LlmResponse, ToolCalled, ToolReturned

    async def read(store: DurableStore) -> tuple[RunRecord, list[RunRecord], list[Event]]:
        rec = await _record(store, run_id)
        kids = await store.list_runs(parent=rec.id, limit=PREFIX_SCAN)
        return rec, kids[::-1], await store.run_events(rec.id)

    rec, children, events = with_store(db, read)
    if as_json:
        doc = {"run": _json(rec), "children": [_json(c) for c in children],
               "events": [event_to_dict(e) for e in events]}
        sys.stdout.write(orjson.dumps(doc).decode() + "\n")
        return
    out = console(soft_wrap=True, highlight=False)
    out.print(f"[bold]run {rec.id}[/]  {rec.status}  agent {escape(rec.agent)}  "
                  f"model {escape(rec.model)}")
    out.print(f"session {escape(rec.session_id or '-')}  user {escape(rec.user_id or '-')}"
                  f"  started {when(rec.started_at, seconds=True)}  took {_took(rec)}")
    out.print(f"{rec.steps} steps, {rec.input_tokens} in / {rec.output_tokens} out tokens, "
                  f"${rec.cost_usd:.4f}")
    out.print(f"task: {escape(rec.task)}")
    if rec.error:
        out.print(f"[yellow]error:[/] {escape(rec.error)}")
    if rec.parent_id:
        out.print(f"sub-agent of run {rec.parent_id}")
    for c in children:  # its sub-agents, in the order they started
        out.print(f"  [bold]sub-agent[/] {c.id}  {c.status}  {escape(c.agent)}  took "
                  f"{_took(c)}: {escape(c.task)}")
    for e in events:
        match e:
            case LlmResponse(text=text, thought=thought):
                out.print(f"[cyan]step {e.step + 1}[/]")
                if thought:
                    out.print(f"  [magenta]thought[/] {escape(thought)}")
                if text:
                    out.print(f"  [bold]says[/] {escape(text)}")
            case ToolCalled(name=name, arguments=arguments):
                args = orjson.dumps(arguments).decode()
                out.print(f"  [bold]{escape(name)}[/]({escape(args)})")
            case ToolReturned(is_error=is_error, content=content):
                style = "red" if is_error else "green"
                out.print(f"    [{style}]->[/] {escape(content)}")


@runs_app.command("abort")
def abort_run(
    run_id: Annotated[str, typer.Argument(help="The run to stop.")],
    db: DbOption = None,
) -> None:
    """Ask the process running RUN_ID to stop it: it ends cancelled, its session intact."""
    async def abort(store: DurableStore) -> tuple[str, bool]:
        rec = await _record(store, run_id)
        return rec.id, await store.request_abort(rec.id)

    whole, asked = with_store(db, abort)
    if not asked:
        raise fail(f"no run {whole!r} in progress in this store", 1)
    console().print(f"abort requested for run {whole}; its process stops it within a second")


@runs_app.command("resume")
def resume_run(
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help="provider:name (default: the run's own model)")] = None,
    tools: Annotated[str, typer.Option(
        help="'default', 'none', or tool names separated by commas.")] = "default",
    approve: Annotated[str, typer.Option(help="Tools that need approval: ask|auto|deny.")] = "ask",
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the RunResult as JSON.")] = False,
) -> None:
    """Continue a run whose process died, from its last completed step; a tool call that
    already has a result is not run again."""
    import asyncio

    try:
        result = asyncio.run(_resume(run_id, model, tools, approve, db, quiet=as_json))
    except (StoreError, ThinkloopError) as exc:
        raise fail(str(exc), 2) from None
    if as_json:
        sys.stdout.write(orjson.dumps(result.to_dict(), default=str).decode() + "\n")
    if result.status == "failed":
        console(stderr=True).print(f"[red]error:[/] {escape(result.error or 'run failed')}")
    raise typer.Exit(EXIT_CODES.get(result.status, 1))


async def _resume(run_id: str, model: str | None, tools: str, approve: str, db: str | None,
                  *, quiet: bool) -> RunResult:
    from thinkloop.api import open_store
    from thinkloop.cli.build import AgentOptions, build_agent
    from thinkloop.cli.printers import EventPrinter
    from thinkloop.core.settings import load_settings

    settings = load_settings()
    store = open_store(db, settings=settings)
    try:
        rec = await _record(store, run_id)
        opts = AgentOptions(model=model or rec.model, tools=tools, approve=approve,
                            name=rec.agent)
        agent = build_agent(opts, settings, store=store,
                            memory=rec.session_id is not None or rec.user_id is not None)
        if not quiet:
            agent.subscribe(EventPrinter(console()))
        handle = await agent.start_resume_run(rec.id, stream_model=not quiet)
        try:
            result = await handle.result()
            await handle.wait_background()
        finally:
            await agent.aclose()
        return result
    finally:
        await store.aclose()


@runs_app.command("replay")
def replay_run(
    run_id: Annotated[str, typer.Argument(help="The run to re-show.")],
    db: DbOption = None,
    delay: Annotated[float, typer.Option(help="Seconds to pause between steps.")] = 0.0,
) -> None:
    """Re-show a run step by step from its audit log; no model is called."""
    from thinkloop.cli.printers import ReplayPrinter
    from thinkloop.core.events import StepCompleted

    async def read(store: DurableStore) -> list[Event]:
        return await store.run_events((await _record(store, run_id)).id)

    events = with_store(db, read)
    printer = ReplayPrinter(console())
    for e in events:
        printer(e)
        if delay and isinstance(e, StepCompleted):
            time.sleep(delay)


def trace(
    run_id: Annotated[str, typer.Argument(help="The run whose trace to print.")],
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the spans as JSON lines.")] = False,
) -> None:
    """Print a run's span tree with timings, tokens and cost."""
    async def read(store: DurableStore) -> list[SpanRecord]:
        return await store.spans((await _record(store, run_id)).id)

    spans = with_store(db, read)
    if as_json:
        for s in spans:
            row = {f.name: getattr(s, f.name) for f in fields(s)}
            sys.stdout.write(orjson.dumps(row).decode() + "\n")
        return
    if not spans:
        raise fail(f"run {run_id} has no stored trace", 1)
    console(highlight=False).print(span_tree(spans))


def span_tree(spans: list[SpanRecord]) -> Tree:
    from rich.tree import Tree

    ids = {s.span_id for s in spans}
    children: dict[str | None, list[SpanRecord]] = {}
    for s in spans:
        children.setdefault(s.parent_id if s.parent_id in ids else None, []).append(s)
    t0 = min(s.start for s in spans)
    roots = children.get(None, [])
    tree = Tree(f"[bold]trace {roots[0].trace_id if roots else ''}[/]")

    def add(node: Tree, span: SpanRecord) -> None:
        child = node.add(_label(span, t0))
        for c in sorted(children.get(span.span_id, []), key=lambda x: x.start):
            add(child, c)

    for r in sorted(roots, key=lambda x: x.start):
        add(tree, r)
    return tree


def _label(s: SpanRecord, t0: float) -> str:
    a = s.attributes
    parts = [f"[bold]{escape(s.name)}[/]", f"{(s.end - s.start) * 1000:.1f} ms",
             f"[dim]@+{(s.start - t0) * 1000:.1f} ms[/]"]
    if "gen_ai.usage.input_tokens" in a:
        parts.append(f"{a['gen_ai.usage.input_tokens']} in / "
                     f"{a.get('gen_ai.usage.output_tokens', 0)} out tokens")
    if a.get("thinkloop.cost") == "unknown":
        parts.append("unknown cost")
    elif a.get("thinkloop.cost_usd"):
        parts.append(f"${float(a['thinkloop.cost_usd']):.4f}")
    if "thinkloop.step" in a:
        parts.append(f"step {a['thinkloop.step']}")
    if a.get("thinkloop.side_call"):
        parts.append("side call")
    if "thinkloop.run.status" in a:
        parts.append(str(a["thinkloop.run.status"]))
    if s.status == "ERROR":
        parts.append("[red]error[/]")
    return "  ".join(parts)
