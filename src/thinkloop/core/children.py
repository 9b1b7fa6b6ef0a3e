"""A run's sub-agent runs (:class:`ChildRuns`): the tracker ``spawn_agent`` keeps on its
parent's run, listing the children in progress and how the others ended, and stopping the
ones still going when their parent ends (GoClaw's sub-agent manager)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol


class Stoppable(Protocol):
    """A child run in progress (a ``RunHandle``)."""

    def cancel(self) -> None: ...


@dataclass(slots=True)
class ChildRun:
    run_id: str
    agent: str
    task: str
    status: str = "running"
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    handle: Stoppable | None = field(default=None, repr=False)

    def view(self) -> dict[str, Any]:
        """As the run record, ``runs show`` and the gateway list it."""
        return {"id": self.run_id, "agent": self.agent, "task": self.task,
                "status": self.status, "started_at": self.started_at,
                "ended_at": self.ended_at}


class ChildRuns:
    """One parent run's children, in the order they started."""

    __slots__ = ("runs",)

    def __init__(self) -> None:
        self.runs: dict[str, ChildRun] = {}

    def started(self, run_id: str, agent: str, task: str, handle: Stoppable | None) -> None:
        self.runs[run_id] = ChildRun(run_id, agent, task, handle=handle)

    def ended(self, run_id: str, status: str) -> None:
        child = self.runs.get(run_id)
        if child is not None and child.ended_at is None:
            child.status, child.ended_at, child.handle = status, time.time(), None

    def active(self) -> list[ChildRun]:
        return [c for c in self.runs.values() if c.ended_at is None]

    def cancel(self) -> int:
        """Stop every child still running (its parent ended); how many were."""
        active = self.active()
        for child in active:
            if child.handle is not None:
                child.handle.cancel()
            self.ended(child.run_id, "cancelled")
        return len(active)

    def view(self) -> list[dict[str, Any]]:
        return [c.view() for c in self.runs.values()]
