"""The fleet's records of a run, as gateways and workers pass them through Redis
(:mod:`~thinkloop.workers.bus`): its row, what a take found, an end to write."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True)
class RunRow:
    """A run as the fleet knows it (``{p}:run:{id}``)."""

    id: str
    user: str
    agent: str
    session: str | None
    status: str
    created_at: float
    task: str = ""
    stream: bool = True
    worker: str | None = None
    finished_at: float | None = None
    view: Mapping[str, Any] | None = None
    deaths: int = 0
    handbacks: int = 0
    remember: bool = True  # False: the run has no user (no memory read or written)
    priority: int = 0  # higher first among queued runs
    deliver_to: tuple[str, ...] = ()  # a scheduled run's delivery targets (platform:chat)
    # Its sub-agent runs (the worker's ChildRuns view), as the worker last wrote them.
    children: tuple[dict[str, Any], ...] = ()

    @classmethod
    def of(cls, run_id: str, h: Mapping[bytes, bytes]) -> RunRow:
        g = {k.decode(): v.decode() for k, v in h.items()}
        return cls(run_id, g["user"], g["agent"], g.get("session") or None, g["status"],
                   float(g["created_at"]), g.get("task", ""), g.get("stream", "1") == "1",
                   g.get("worker") or None,
                   float(g["finished_at"]) if g.get("finished_at") else None,
                   orjson.loads(g["view"]) if g.get("view") else None,
                   int(g.get("deaths", 0)), int(g.get("handbacks", 0)),
                   g.get("remember", "1") == "1", int(g.get("priority", 0)),
                   tuple(t for t in g.get("deliver_to", "").split("\n") if t),
                   tuple(orjson.loads(g["children"])) if g.get("children") else ())

    def fields(self) -> dict[str, str]:
        """The hash a new run starts with."""
        return {"user": self.user, "agent": self.agent, "session": self.session or "",
                "status": self.status, "created_at": repr(self.created_at), "task": self.task,
                "stream": "1" if self.stream else "0",
                "remember": "1" if self.remember else "0", "priority": str(self.priority),
                "deliver_to": "\n".join(self.deliver_to)}

    @property
    def done(self) -> bool:
        return self.finished_at is not None


@dataclass(frozen=True)
class Taken:
    """What :meth:`Bus.take` found: what it did (``take`` when the run is now running on
    the worker), the run's row as it was before, and for ``take`` whether an abort was asked
    and the run's last event's number."""

    what: str
    row: RunRow | None
    aborted: bool = False
    last: int = 0

    @classmethod
    def of(cls, run_id: str, got: list[Any]) -> Taken:
        """From the take script's reply: what, the row's hash, aborted, last number."""
        h = dict(zip(got[1][::2], got[1][1::2], strict=True))
        return cls(got[0].decode(), RunRow.of(run_id, h) if h else None,
                   bool(got[2]) if len(got) > 2 else False, int(got[3]) if len(got) > 3 else 0)


@dataclass(frozen=True)
class End:
    """A run's end to write (:meth:`Bus.finish`): its status and view; ``ran`` (worker,
    arq job id) when it ended where it ran."""

    row: RunRow
    status: str
    view: Mapping[str, Any]
    ran: tuple[str, str] | None = None
