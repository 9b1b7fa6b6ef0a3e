"""What the screens need of a place where runs happen: the one small :class:`Backend`.

Two implementations give the same answers: :mod:`thinkloop.tui.local` (the library in this
process, on the store ``thinkloop run`` uses) and :mod:`thinkloop.tui.remote` (a ``thinkloop
serve`` gateway over REST and SSE). Events travel as :class:`~thinkloop.events.Event` objects
either way (the gateway's JSON is turned back with ``events.from_dict``), so a screen never
knows which one it talks to.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from thinkloop.events import Event

ENDED = frozenset({"completed", "failed", "cancelled", "max_steps", "loop_detected",
                   "budget_exceeded", "blocked", "paused", "timeout", "no_answer"})


def verdict(approved: bool | None) -> str:
    """The reason an answer gives the run (the model may read it)."""
    if approved is None:
        return "answered by the person in thinkloop ui"
    return f"{'approved' if approved else 'denied'} by the person in thinkloop ui"


@dataclass(frozen=True)
class RunRow:
    """One run as the operator screen lists it (live or recorded)."""

    id: str
    agent: str
    status: str
    session: str | None
    user: str | None
    task: str
    steps: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    started_at: float
    ended_at: float | None = None
    waiting: int = 0  # approvals and questions the run waits on

    @property
    def elapsed_s(self) -> float:
        return (self.ended_at or time.time()) - self.started_at

    @property
    def running(self) -> bool:
        return self.status not in ENDED


@dataclass(frozen=True)
class SessionRow:
    id: str
    messages: int
    updated_at: float


@dataclass(frozen=True)
class MessageRow:
    role: str
    content: str
    tool_calls: tuple[str, ...] = ()  # "name(arguments)" of each call the message made


@dataclass(frozen=True)
class MemoryRow:
    id: int
    owner: str
    kind: str  # the layer: manual, episode, summary, observation, plan, ...
    key: str
    content: str
    created_at: float


@dataclass(frozen=True)
class SpanRow:
    span_id: str
    parent_id: str | None
    name: str
    start: float
    end: float
    status: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class AgentInfo:
    name: str
    model: str
    tools: tuple[str, ...]


class Backend(Protocol):
    """Runs, sessions, memory and traces, wherever they live."""

    @property
    def label(self) -> str:
        """Where this is (``local store ...`` or the gateway's URL), for the status line."""
        ...

    @property
    def online(self) -> bool:
        """False while the place is unreachable (a gateway that went away)."""
        ...

    async def check(self) -> bool:
        """Reach the place once; the new value of :attr:`online`."""
        ...

    async def agents(self) -> list[str]: ...

    async def agent(self, name: str, model: str | None = None) -> AgentInfo:
        """The agent's model and tools (``model`` overrides the model, where allowed)."""
        ...

    async def start(self, agent: str, task: str, session: str | None,
                    model: str | None = None) -> str:
        """Start ``task``; the run's id (the run goes on)."""
        ...

    def follow(self, run_id: str, after: int = 0) -> AsyncIterator[tuple[int, Event]]:
        """The run's numbered events after ``after``, as they come, until it ends."""
        ...

    async def answer(self, run_id: str, input_id: str, *, approved: bool | None = None,
                     text: str | None = None) -> None:
        """Answer an approval (``approved``) or an ``ask_human`` question (``text``)."""
        ...

    async def abort(self, run_id: str) -> None: ...

    async def runs(self) -> list[RunRow]:
        """Runs in progress and recent ones, newest first."""
        ...

    async def sessions(self) -> list[SessionRow]: ...

    async def messages(self, session: str) -> list[MessageRow]: ...

    async def memory(self, run_id: str | None = None, only_run: bool = False
                     ) -> list[MemoryRow]:
        """The memory layers of the run's user (only what that run wrote, ``only_run``);
        without a run, the memories of the current user."""
        ...

    async def trace(self, run_id: str) -> list[SpanRow]: ...

    async def aclose(self) -> None: ...
