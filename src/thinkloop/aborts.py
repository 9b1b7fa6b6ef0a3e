"""Abort requests from other processes (``thinkloop runs abort``, through the store), obeyed
by the runs of this one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from thinkloop.store.base import AbortRequests

log = logging.getLogger("thinkloop.runs")


class AbortWatcher:
    """Polls the store for abort requests on this agent's runs (``thinkloop runs abort``)
    and cancels them; it runs only while the agent has runs in progress."""

    def __init__(self, store: AbortRequests, cancel: Callable[[str], object],
                 interval_s: float = 0.25) -> None:
        self.store = store
        self.cancel = cancel
        self.interval_s = interval_s
        self.runs: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    def watch(self, run_id: str) -> None:
        self.runs.add(run_id)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._poll())

    def forget(self, run_id: str) -> None:
        self.runs.discard(run_id)
        if not self.runs and self._task is not None:
            self._task.cancel()  # nothing left to watch: no task outlives the agent's runs
            self._task = None

    async def _poll(self) -> None:
        while self.runs:
            await asyncio.sleep(self.interval_s)
            try:
                asked = await self.store.abort_requests(sorted(self.runs))
            except Exception:
                log.exception("polling abort requests failed")
                continue
            for run_id in asked:
                self.runs.discard(run_id)
                self.cancel(run_id)
