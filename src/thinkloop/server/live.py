"""Runs the gateway started: who owns each, its numbered events, and the run limits.

Every event of a run gets a number (1, 2, ...) and is kept until the run is forgotten, so a
client that reconnects with ``Last-Event-ID: N`` (SSE) or ``after: N`` (WebSocket) gets
exactly the events after N. Finished runs stay readable for a while (``keep_finished_s``, at
most ``keep_runs`` of them).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from thinkloop.api import RunHandle, RunResult, Wakeups, wire_json
from thinkloop.core.errors import RunLimitError
from thinkloop.core.events import Event

SWEEP_S = 1.0  # how often a start looks for finished runs past keep_finished_s


@dataclass(eq=False)
class LiveRun(Wakeups):
    id: str
    user: str
    agent: str
    session: str | None  # the user's name for it (the store key is namespaced per user)
    handle: RunHandle
    # Started by a chat channel, not through the API: admins see and abort it (the person in
    # the chat has no API key).
    channel: bool = False
    created_at: float = field(default_factory=time.time)
    events: list[bytes] = field(default_factory=list)  # the JSON of event N at index N-1
    result: RunResult | None = None
    error: str | None = None
    ended: str | None = None  # the status of a run that ended without a result
    finished_at: float | None = None
    # Who waits for the next event (a subscriber each): woken and dropped at every publish.
    # Futures, not an asyncio.Event made anew per event (one with its 600-byte deque each).
    _waiters: list[asyncio.Future[None]] | None = None

    @property
    def done(self) -> bool:
        return self.finished_at is not None

    @property
    def status(self) -> str:
        if self.result is not None:
            return self.result.status
        return self.ended or "running"

    def publish(self, event: Event) -> int:
        seq = len(self.events) + 1
        self.events.append(wire_json(seq, event))
        self._wake()
        return seq

    def finish(self, result: RunResult | None, error: str | None = None,
               ended: str = "failed") -> None:
        self.result, self.error, self.finished_at = result, error, time.time()
        self.ended = None if result is not None else ended
        self._wake()

    def view(self) -> dict[str, Any]:
        return run_view(self)

    async def end_status(self) -> str:
        return self.status

    async def follow(self, after: int = 0) -> AsyncIterator[tuple[int, bytes]]:
        """Events numbered above ``after``, as they come, until the run has finished."""
        async for batch in self.follow_batches(after):
            for item in batch:
                yield item

    async def follow_batches(self, after: int = 0
                             ) -> AsyncIterator[list[tuple[int, bytes]]]:
        """Like :meth:`follow`, but every event already published at once, in one list
        (a subscriber writes them in one send per loop turn)."""
        seq = max(0, after)
        while True:
            if seq < len(self.events):
                batch = list(enumerate(self.events[seq:], seq + 1))
                seq += len(batch)
                yield batch
                continue  # more may have come while it was written: look again first
            if self.done:
                return
            await self._woken()  # nothing awaits between the look and this: none is lost


def _sees(run: LiveRun, user: str, admin: bool) -> bool:
    return run.user == user or (admin and run.channel)


class LiveRuns:
    """The gateway's runs by id, with per-user and global limits on the active ones."""

    def __init__(self, per_user: int, total: int, keep_finished_s: float = 3600.0,
                 keep_runs: int = 2000) -> None:
        self.per_user = per_user
        self.total = total
        self.keep_finished_s = keep_finished_s
        self.keep_runs = keep_runs
        self._runs: OrderedDict[str, LiveRun] = OrderedDict()
        self._active: dict[str, int] = {}  # user -> active runs
        self._swept = 0.0  # when finished runs were last looked at for their age

    @property
    def active_count(self) -> int:
        return sum(self._active.values())

    def reserve(self, user: str) -> None:
        """Take one run slot for ``user`` or raise :class:`RunLimitError`."""
        if self._active.get(user, 0) >= self.per_user:
            raise RunLimitError(f"you already have {self.per_user} runs in progress")
        if self.active_count >= self.total:
            raise RunLimitError(f"the gateway is running {self.total} runs, its limit")
        self._active[user] = self._active.get(user, 0) + 1

    def release(self, user: str) -> None:
        left = self._active.get(user, 0) - 1
        if left > 0:
            self._active[user] = left
        else:
            self._active.pop(user, None)

    def add(self, run: LiveRun) -> None:
        self._runs[run.id] = run
        self._evict()

    def get(self, run_id: str, user: str, admin: bool = False) -> LiveRun | None:
        """The run if ``user`` owns it (or it is a chat channel's and ``admin``); another
        user's run is as good as absent."""
        run = self._runs.get(run_id)
        return run if run is not None and _sees(run, user, admin) else None

    def of_session(self, user: str, session: str) -> list[LiveRun]:
        return [r for r in self._runs.values() if r.user == user and r.session == session]

    def of_user(self, user: str, admin: bool = False) -> list[LiveRun]:
        """``user``'s runs the gateway still holds, running or finished (and the chat
        channels' runs for an ``admin``)."""
        return [r for r in self._runs.values() if _sees(r, user, admin)]

    def active(self) -> list[LiveRun]:
        return [r for r in self._runs.values() if not r.done]

    def _evict(self) -> None:
        """Forget the oldest finished runs over ``keep_runs``, and (once per ``SWEEP_S``:
        every run was looked at on every start, a cost growing with the runs kept) those
        finished over ``keep_finished_s`` ago."""
        now = time.time()
        excess = len(self._runs) - self.keep_runs
        sweep = now >= self._swept + SWEEP_S
        if excess <= 0 and not sweep:
            return
        if sweep:
            self._swept = now
        cutoff = now - self.keep_finished_s
        gone = []
        for r in self._runs.values():  # oldest first
            if excess <= 0 and not sweep:
                break
            if r.done and (excess > 0 or (r.finished_at or 0) < cutoff):
                gone.append(r.id)
                excess -= 1
        for run_id in gone:
            del self._runs[run_id]


def run_view(run: LiveRun) -> dict[str, Any]:
    """A run as the API shows it (never the namespaced store session id)."""
    view: dict[str, Any] = {"id": run.id, "agent": run.agent, "session": run.session,
                            "status": run.status, "created_at": run.created_at,
                            "finished_at": run.finished_at, "events": len(run.events)}
    # Its sub-agent runs: those in progress, and how the others ended.
    children = run.handle.state.children
    view["children"] = children.view() if children is not None else []
    if run.result is not None:
        data = run.result.to_dict()
        data["session_id"] = run.session
        view.update({k: data[k] for k in ("output", "text", "error", "usage", "steps",
                                           "pending", "silent")})
    elif run.error is not None:
        view["error"] = run.error
    return view
