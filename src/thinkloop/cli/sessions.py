"""``thinkloop sessions list|show|delete``: look after stored conversations.

Mounted by the main app with ``app.add_typer(sessions_app, name="sessions")``. The store is
``--db`` (a path or a ``postgresql://`` URL), else ``THINKLOOP_DATABASE_URL``, else the SQLite
file under ``THINKLOOP_HOME`` (``~/.thinkloop``).
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import orjson
import typer

from thinkloop.cli.render import console, escape, fail
from thinkloop.core.errors import StoreError, ThinkloopError

if TYPE_CHECKING:
    # The store (and asyncio, rich) load when a command runs, not for ``--help``.
    from thinkloop.api import PostgresStore, SessionAdmin, SessionInfo, SQLiteStore
    from thinkloop.core.types import Message

sessions_app = typer.Typer(help="List, show and delete stored sessions.", no_args_is_help=True,
                           rich_markup_mode=None)
T = TypeVar("T")
DbOption = Annotated[
    str | None, typer.Option("--db", help="SQLite path or postgresql:// URL.")
]


def with_store(
    db: str | None, action: Callable[[SQLiteStore | PostgresStore], Awaitable[T]],
    *, error_code: int = 2,
) -> T:
    """Open the durable store, run ``action`` on it, close it; an error is one line on
    stderr and exit code 2, or 1 when the store itself fails (a damaged file, a server down):
    the ``sessions`` and ``runs`` commands. ``error_code`` is the exit for the action's own
    errors (1 where a missing session is what went wrong, as it always was)."""
    import asyncio

    from thinkloop.api import open_store

    async def main(store: SQLiteStore | PostgresStore) -> T:
        try:
            return await action(store)
        finally:
            await store.aclose()

    try:
        store = open_store(db)
    except ThinkloopError as exc:  # a bad URL is a usage mistake (2)
        raise fail(str(exc)) from None
    try:
        return asyncio.run(main(store))
    except StoreError as exc:  # a store that fails (a damaged file, ...) is an error (1)
        raise fail(str(exc), 1) from None
    except ThinkloopError as exc:
        raise fail(str(exc), error_code) from None


def print_rows(
    items: Sequence[T], as_json: bool, to_json: Callable[[T], dict[str, Any]],
    columns: Sequence[str], to_row: Callable[[T], Sequence[str]],
) -> None:
    """``items`` as JSON lines (``--json``), else as a table of ``columns`` (the list commands
    of ``sessions``, ``runs`` and ``approvals``)."""
    if as_json:
        for item in items:
            sys.stdout.write(orjson.dumps(to_json(item)).decode() + "\n")
        return
    from rich.table import Table

    rows = [to_row(item) for item in items]
    out = console()
    shown = fitting_columns(columns, rows, out.width)
    table = Table()
    # The first column is an id to copy: whole at any width. Columns that do not fit beside
    # it whole are left out (named below), not folded to a few letters a line.
    for i in shown:
        table.add_column(columns[i], no_wrap=i == 0, min_width=_width(columns, rows, i)
                         if i == 0 else None, overflow="fold")
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    out.print(table)
    left = [columns[i] for i in range(len(columns)) if i not in shown]
    if left:
        out.print(f"[dim](not shown at {out.width} columns: {', '.join(left)}; a wider "
                  "terminal or --json shows them)[/]", highlight=False)


def _width(columns: Sequence[str], rows: Sequence[Sequence[str]], i: int) -> int:
    from rich.text import Text

    return max([len(columns[i]), *(Text.from_markup(r[i]).cell_len for r in rows)])


def fitting_columns(columns: Sequence[str], rows: Sequence[Sequence[str]],
                    width: int) -> list[int]:
    """The columns a table of ``width`` characters shows whole: the first always, then the
    others in their order while they fit (each takes its widest cell and 3 for the rule)."""
    used = _width(columns, rows, 0) + 4
    shown = [0]
    for i in range(1, len(columns)):
        need = _width(columns, rows, i) + 3
        if used + need <= width:
            shown.append(i)
            used += need
    return shown


# How many recent sessions a session id prefix is looked up among.
SESSION_SCAN = 100_000


async def session_named(store: SessionAdmin, given: str) -> SessionInfo:
    """The session ``given`` names: its whole id, or a prefix no other session shares (as
    run ids take one)."""
    info = await store.session_info(given)
    if info is not None:
        return info
    matches = [i for i in await store.list_sessions(SESSION_SCAN) if i.id.startswith(given)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        ids = ", ".join(repr(i.id) for i in matches[:5])
        raise ThinkloopError(f"{given!r} is the start of {len(matches)} sessions' ids ({ids}"
                             f"{', ...' if len(matches) > 5 else ''}): give more of it")
    raise ThinkloopError(f"no session named {given!r}")


async def session_id_of(store: SessionAdmin, given: str) -> str:
    """``given`` as a session id: a unique prefix of a stored session's id becomes that id;
    an id no stored session starts with stays as it is (the caller says what is missing)."""
    try:
        return (await session_named(store, given)).id
    except ThinkloopError as exc:
        if str(exc).startswith("no session named"):
            return given
        raise


def when(ts: float, *, seconds: bool = False) -> str:
    """A timestamp as local time, to the minute (or the second)."""
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M" + (":%S" if seconds else ""))


@sessions_app.command("list")
def list_sessions(
    db: DbOption = None,
    limit: Annotated[int, typer.Option(help="Show at most this many.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """Sessions, most recently used first, with what their runs used."""
    print_rows(
        with_store(db, lambda s: s.list_sessions(limit)), as_json,
        lambda i: {"id": i.id, "messages": i.messages, "created_at": i.created_at,
                   "updated_at": i.updated_at, "compactions": i.compactions, **totals(i)},
        ("session", "messages", "tokens in/out", "cost", "updated"),
        lambda i: (escape(i.id), str(i.messages), f"{i.input_tokens}/{i.output_tokens}",
                   f"${i.cost_usd:.4f}", when(i.updated_at)))


def totals(info: SessionInfo) -> dict[str, Any]:
    """What a session's runs used: its last model and the token and cost totals."""
    return {"model": info.model, "input_tokens": info.input_tokens,
            "output_tokens": info.output_tokens, "cost_usd": info.cost_usd}


@sessions_app.command("show")
def show_session(
    session_id: Annotated[str, typer.Argument(
        help="The session to show (its id or a unique prefix).")],
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print messages as JSON lines.")] = False,
) -> None:
    """A session's condensed history and messages."""
    from thinkloop.api import message_to_dict

    async def read(
        store: SQLiteStore | PostgresStore,
    ) -> tuple[SessionInfo, list[Message]]:
        info = await session_named(store, session_id)
        return info, await store.load(info.id)

    info, messages = with_store(db, read, error_code=1)
    if as_json:
        for m in messages:
            sys.stdout.write(orjson.dumps(message_to_dict(m)).decode() + "\n")
        return
    out = console(soft_wrap=True)
    out.print(f"[bold]session {escape(info.id)}[/]  model {escape(info.model or '-')}  "
              f"{info.input_tokens} in / {info.output_tokens} out tokens, "
              f"${info.cost_usd:.4f}\n", highlight=False)
    if info.summary:
        out.print(f"[bold]condensed history[/]\n{escape(info.summary)}\n")
    for m in messages:
        d = message_to_dict(m)
        line = f"[bold]{d['role']}[/]: {escape(d.get('content', ''))}"
        for c in d.get("tool_calls", ()):
            line += f"\n  -> {escape(c['name'])}({escape(orjson.dumps(c['arguments']).decode())})"
        out.print(line, highlight=False)


@sessions_app.command("delete")
def delete_session(
    session_id: Annotated[str, typer.Argument(
        help="The session to delete (its id or a unique prefix).")],
    db: DbOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Delete a session and all its messages."""
    # Ask only about a session that exists: a typo gets the error, not a question.
    session_id = with_store(db, lambda s: session_named(s, session_id), error_code=1).id
    if not yes and not typer.confirm(f"Delete session {session_id!r}?"):
        raise typer.Exit(1)
    if not with_store(db, lambda s: s.delete_session(session_id)):
        console(stderr=True).print(f"[red]error:[/] no session named {escape(session_id)!r}")
        raise typer.Exit(1)
    console().print(f"deleted {escape(session_id)}")
