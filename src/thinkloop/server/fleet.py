"""What a gateway needs of runs it does not execute itself: a run it can follow, and a fleet
of workers to hand runs to (``thinkloop.workers.fleet`` is one, on arq and Redis).

A gateway without a fleet runs everything in its own process, as it always has.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol

from thinkloop.server.inputs import Answer


class Followed(Protocol):
    """A run as the API shows and streams it, here or on a worker."""

    @property
    def id(self) -> str: ...

    @property
    def user(self) -> str: ...

    @property
    def agent(self) -> str: ...

    @property
    def session(self) -> str | None: ...

    @property
    def created_at(self) -> float: ...

    @property
    def done(self) -> bool: ...

    @property
    def status(self) -> str: ...

    def follow(self, after: int = 0) -> AsyncIterator[tuple[int, bytes]]:
        """Events numbered above ``after`` as they come (JSON bytes), until the run ends."""
        ...

    def follow_batches(self, after: int = 0) -> AsyncIterator[list[tuple[int, bytes]]]:
        """:meth:`follow`'s events in lists of those ready together (a stream writes each
        list in one send)."""
        ...

    async def end_status(self) -> str:
        """How the run ended (read after ``follow`` is exhausted)."""
        ...

    def view(self) -> dict[str, Any]: ...


class Fleet(Protocol):
    """Workers that execute a gateway's runs, and the state they share with every gateway."""

    async def submit(self, user: str, agent: str, task: str, session: str | None,
                     stream: bool, remember: bool = True, priority: int = 0) -> Followed:
        """Queue a run; among queued runs a higher ``priority`` starts first."""
        ...

    async def get(self, run_id: str, user: str, to_follow: bool = False) -> Followed | None:
        """``user``'s run; ``to_follow``: for its events only (its status and counts may be
        as they were when this gateway queued it)."""
        ...

    async def abort(self, run_id: str) -> bool:
        """Stop the run wherever it executes; False if it has ended."""
        ...

    async def abort_session(self, user: str, session: str) -> list[str]: ...

    async def active_runs(self, user: str) -> list[Followed]:
        """``user``'s runs in progress (queued included), wherever they execute."""
        ...

    async def session_runs(self, user: str, session: str) -> list[Followed]:
        """``user``'s runs in progress (queued included) on ``session``."""
        ...

    async def pending(self, run_id: str) -> list[tuple[str, str]]:
        """(input id, kind) of what the run waits on."""
        ...

    async def answer(self, run_id: str, input_id: str, answer: Answer) -> bool:
        """Deliver ``answer`` once: False if another answer took the input first."""
        ...

    async def schedules(self, user: str) -> list[dict[str, Any]]:
        """``user``'s schedules."""
        ...

    async def add_schedule(self, user: str, cron: str, agent: str, task: str,
                           session: str | None, priority: int = 0,
                           deliver_to: tuple[str, ...] = ()) -> dict[str, Any]: ...

    async def remove_schedule(self, user: str, schedule_id: str) -> bool: ...

    async def deliveries(self, platforms: Sequence[str],
                         send: Callable[[str, str], Awaitable[None]]) -> None:
        """Send what scheduled runs on workers deliver to people on ``platforms`` (the chat
        channels this gateway serves): ``await send(target, text)`` for each message, each
        by one gateway; runs until cancelled."""
        ...

    async def health(self) -> dict[str, Any]: ...

    async def metrics(self) -> dict[str, float]:
        """Fleet-wide figures for ``/metrics`` (name -> value; ``name{label="x"}`` allowed)."""
        ...

    async def aclose(self) -> None: ...
