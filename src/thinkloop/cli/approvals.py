"""``thinkloop approvals list|decide``: the tool calls paused runs wait on.

A run pauses when a call needs approval and nobody decides now (``thinkloop run --approve
pause --session S``, or ``ApprovalSettings(on_timeout="pause")`` in the library). ``decide``
approves or denies every call the session's paused run waits on and continues that run with
the same model and tools options as ``thinkloop run``. Mounted by the main app with
``app.add_typer(approvals_app, name="approvals")``; the store is chosen as for ``sessions``.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import TYPE_CHECKING, Annotated

import orjson
import typer

from thinkloop.cli.render import console, escape, fail
from thinkloop.cli.sessions import DbOption, print_rows, session_id_of, when, with_store
from thinkloop.core.errors import ThinkloopError

if TYPE_CHECKING:
    from thinkloop.api import PostgresStore, RunResult, SQLiteStore
    from thinkloop.core.types import PendingApproval

approvals_app = typer.Typer(help="List and decide tool calls that paused runs wait on.",
                            no_args_is_help=True, rich_markup_mode=None)
SessionOption = Annotated[str, typer.Option(
    "--session", help="The paused session (its id or a unique prefix).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@approvals_app.command("list")
def list_pending(session: SessionOption, db: DbOption = None, as_json: JsonOption = False) -> None:
    """The calls the session's paused run waits on."""
    async def waiting(store: SQLiteStore | PostgresStore) -> list[PendingApproval]:
        return await store.pending_approvals(await session_id_of(store, session))

    pending = with_store(db, waiting)
    if not pending and not as_json:
        console().print(f"nothing waits for approval in session {escape(session)}")
        return
    print_rows(
        pending, as_json,
        lambda p: {"run_id": p.run_id, "session": p.session_id, "call_id": p.call_id,
                   "tool": p.tool, "arguments": p.arguments, "reason": p.reason,
                   "requested_at": p.requested_at},
        ("call", "tool", "arguments", "reason", "requested", "run"),
        lambda p: (escape(p.call_id), escape(p.tool), escape(orjson.dumps(p.arguments).decode()),
                   escape(p.reason), when(p.requested_at, seconds=True), escape(p.run_id)))


@approvals_app.command("decide")
def decide(
    session: SessionOption,
    approve: Annotated[bool, typer.Option("--approve", help="Run the pending calls.")] = False,
    deny: Annotated[bool, typer.Option("--deny", help="Refuse the pending calls.")] = False,
    reason: Annotated[str, typer.Option(help="Why; the model sees it on --deny.")] = "",
    db: DbOption = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="provider:name")] = None,
    tools: Annotated[str, typer.Option(help="As for 'thinkloop run'.")] = "default",
    as_json: JsonOption = False,
) -> None:
    """Approve or deny what the paused run waits on, then let it continue."""
    if approve == deny:
        raise fail("give exactly one of --approve or --deny")
    import asyncio

    try:
        result = asyncio.run(_decide(session, approve, reason, db, model, tools, as_json))
    except ThinkloopError as exc:
        raise fail(str(exc)) from None
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False, default=str) + "\n")
    if result.status == "failed":
        raise fail(result.error or "run failed", 1)


async def _decide(
    session: str, approve: bool, reason: str, db: str | None, model: str | None, tools: str,
    quiet: bool,
) -> RunResult:
    from thinkloop.api import Decision, open_store
    from thinkloop.cli.build import AgentOptions, build_agent
    from thinkloop.cli.printers import EventPrinter
    from thinkloop.core.settings import load_settings

    async with contextlib.AsyncExitStack() as stack:
        settings = load_settings()
        store = open_store(db, settings=settings)
        stack.push_async_callback(store.aclose)
        # Calls needing approval later in the continued run pause it again.
        opts = AgentOptions(model=model, tools=tools, approve="pause")
        agent = build_agent(opts, settings, store=store)
        stack.push_async_callback(agent.aclose)
        if not quiet:
            agent.subscribe(EventPrinter(console()))
        session = await session_id_of(store, session)
        handle = await agent.start_resume(session, Decision(approve, reason),
                                          stream_model=not quiet)
        result = await handle.result()
        await handle.wait_background()  # post-turn memory jobs finish before the store closes
        return result
    raise AssertionError("unreachable")  # for type checkers: the with-block always returns
