"""``thinkloop schedules``: cron schedules whose runs the workers queue (PostgreSQL)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from thinkloop.core.errors import ConfigError

if TYPE_CHECKING:
    from thinkloop.workers.schedules import Schedules

T = TypeVar("T")
schedules_app = typer.Typer(help="Cron schedules of runs, fired once per due time by the "
                            "workers (needs PostgreSQL).", no_args_is_help=True,
                            rich_markup_mode=None)


def _with(call: Callable[[Schedules], Coroutine[Any, Any, T]]) -> T:
    from thinkloop.api import open_store
    from thinkloop.core.settings import load_settings

    try:
        from thinkloop.workers.schedules import Schedules
    except ImportError:
        raise ConfigError("schedules need the workers' extra: pip install 'thinkloop[worker]'") \
            from None
    store: Any = open_store(load_settings().store_location)
    if not hasattr(store, "dsn"):
        raise ConfigError("schedules live in PostgreSQL: set THINKLOOP_DATABASE_URL="
                          "postgresql://...")
    import asyncio  # here, not at import: `thinkloop --help` loads no engine

    async def once() -> T:
        plans = Schedules(store.dsn, store.schema)
        try:
            return await call(plans)
        finally:
            await plans.aclose()

    return asyncio.run(once())


@schedules_app.command("add")
def add(
    cron: Annotated[str, typer.Option(help="When: a cron expression ('0 9 * * 1-5'; a sixth "
                                           "field is seconds).")],
    task: Annotated[str, typer.Option(help="What the run is asked.")],
    agent: Annotated[str, typer.Option(help="The agent that runs it.")] = "default",
    user: Annotated[str, typer.Option(help="Whose run it is.")] = "local",
    session: Annotated[str | None, typer.Option(help="The user's session it runs on.")] = None,
    priority: Annotated[int, typer.Option(
        min=-100, max=100, help="Queued runs of a higher priority start first.")] = 0,
    deliver_to: Annotated[list[str] | None, typer.Option(
        "--deliver-to", help="platform:chat its answer goes to, the only place it may "
                             "message (repeatable; the workers serve the channel).")] = None,
) -> None:
    """Add a schedule; prints its id and when it is next due."""
    s = _with(lambda db: db.add(cron, agent, task, user, session, priority,
                                tuple(deliver_to or ())))
    sys.stdout.write(f"{s.id} next due {s.next_at:.0f}\n")


@schedules_app.command("list")
def list_schedules(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The schedules: id, cron, agent, next due time, how often fired, task."""
    for s in _with(lambda db: db.list()):
        if as_json:
            sys.stdout.write(json.dumps({"id": s.id, "cron": s.cron, "agent": s.agent,
                                         "task": s.task, "user": s.user, "session": s.session,
                                         "next_at": s.next_at, "fired": s.fired,
                                         "priority": s.priority,
                                         "deliver_to": list(s.deliver_to)}) + "\n")
        else:
            to = f"  to {','.join(s.deliver_to)}" if s.deliver_to else ""
            sys.stdout.write(f"{s.id}  {s.cron}  {s.agent}  next {s.next_at:.0f}  "
                             f"fired {s.fired}  priority {s.priority}{to}  {s.task}\n")


@schedules_app.command("remove")
def remove(schedule_id: Annotated[str, typer.Argument(help="The schedule's id.")]) -> None:
    """Remove a schedule (runs it queued already go on)."""
    if not _with(lambda db: db.remove(schedule_id)):
        raise ConfigError(f"no schedule {schedule_id!r}")
    sys.stdout.write(f"removed {schedule_id}\n")
