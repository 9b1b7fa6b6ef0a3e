"""An agent's runs in a store: the recorder each run gets, its events' subscriber, the
hooks that write its steps and checkpoints, and the abort watcher (see :mod:`thinkloop.runlog`
for what a run's record holds)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import cast

from thinkloop.aborts import AbortWatcher
from thinkloop.checkpoints import Checkpointer
from thinkloop.core.events import Event
from thinkloop.hooks import Hook, ReasonContext, RunConfig, RunState, ToolHookContext
from thinkloop.loop.handle import Scope
from thinkloop.runlog import (
    RunRecorder,
    new_record,
    nothing,
    recorded,
    safely,
    takes_rows,
    unwritten,
)
from thinkloop.store.base import (
    AbortRequests,
    AuditLog,
    CheckpointPruning,
    CheckpointStore,
    CountedRows,
    QueuedCheckpoints,
    RunRecord,
    RunRecords,
    StepRecords,
    TraceStore,
    TryLocking,
)
from thinkloop.store.serialize import SpanRow

log = logging.getLogger("thinkloop.runs")


class RunBook:
    """An agent's runs in a store: each run gets a recorder, its events a subscriber, its
    steps hooks that write what the last step logged and (``checkpoints``) its progress, and
    (on stores that take them) an abort watcher."""

    def __init__(self, store: RunRecords, agent: str, cancel: Callable[[str], object],
                 *, checkpoints: bool = True, keep_checkpoints: int = 0) -> None:
        self.store = store
        # Checkpoints of a session's finished runs kept: the latest N (0: all, forever).
        self.keep_checkpoints = keep_checkpoints
        self.agent = agent
        self.checkpoints = checkpoints and isinstance(store, CheckpointStore)
        # What the store keeps, asked once (see RunRecorder), not once or twice a run.
        self._step_records = isinstance(store, StepRecords)
        self._audit = isinstance(store, AuditLog)
        self._traces = isinstance(store, TraceStore)
        self._rows = takes_rows(store)
        self._locking = isinstance(store, TryLocking)
        self._queued = isinstance(store, QueuedCheckpoints)
        self._counted = store if isinstance(store, CountedRows) else None
        self.by_run: dict[str, RunRecorder] = {}
        self._cancel = cancel
        self.aborts = (AbortWatcher(store, self._abort) if isinstance(store, AbortRequests)
                       else None)

    def _abort(self, run_id: str) -> None:
        recorder = self.by_run.get(run_id)
        if recorder is not None:
            recorder.reason = "aborted on request from another process"
        self._cancel(run_id)

    def hooks(self) -> list[Hook]:
        hooks = [Hook("pre_reason", self._step_done, name="runs.record")]
        if self.checkpoints:
            hooks += [Hook("pre_tool", self._calls, name="runs.checkpoint"),
                      Hook("post_tool", self._result, name="runs.checkpoint")]
        return hooks

    def _step_done(self, ctx: ReasonContext) -> Awaitable[None] | None:
        recorder = self.by_run.get(ctx.run_id)
        if recorder is None:
            return None
        if recorder.checkpoints is not None and self._step_records:
            # The recorder's write itself (it logs a failure), no coroutine around it: one
            # object less held by each run waiting for its step's commit (issue 38).
            return recorder.step(ctx.state, cast(StepRecords, self.store))
        if recorder.checkpoints is not None:
            return self._checkpointed(recorder, ctx.state)
        recorder.flush_soon(ctx.state)
        return None

    @staticmethod
    async def _checkpointed(recorder: RunRecorder, state: RunState) -> None:
        """A store without step records: the checkpoint, then the log in the background."""
        assert recorder.checkpoints is not None
        await safely(recorder.checkpoints.step(state), state)
        recorder.flush_soon(state)

    # The tool-call hooks are plain functions: on a store that queues its rows, with no
    # hand-over asked, the row is queued at once and nothing is awaited (two lambdas and five
    # coroutines a call less, issue 38); else they return what the hook runner awaits.
    def _calls(self, ctx: ToolHookContext) -> Awaitable[None] | None:
        recorder = self.by_run.get(ctx.run_id)
        if recorder is None or recorder.checkpoints is None:
            return None
        ckpt, state, handover = recorder.checkpoints, ctx.state, recorder.handed()
        if handover.asked is None and ckpt.queues_now():
            try:
                ckpt.queue_calls(state)
            except Exception:
                unwritten(state)
            handover.calls += 1
            return None
        return handover.call_begins(lambda: safely(ckpt.calls(state), state))

    def _result(self, ctx: ToolHookContext) -> Awaitable[None] | None:
        recorder = self.by_run.get(ctx.run_id)
        if recorder is None or recorder.checkpoints is None:
            return None
        ckpt, state, result, handover = (recorder.checkpoints, ctx.state, ctx.result,
                                          recorder.handed())
        if handover.asked is None and ckpt.queues_now():
            try:
                if result:
                    ckpt.queue_result(result)
            except Exception:
                unwritten(state)
            handover.calls -= 1
            return None
        return handover.call_ends(
            lambda: safely(ckpt.result(result), state) if result else nothing(),
            lambda: safely(ckpt.durable(), state))

    def hand_back(self, run_id: str, on_stop: Callable[[], None] | None = None,
                  ) -> asyncio.Future[bool] | None:
        """Stop ``run_id`` here for another process to resume (``thinkloop.handover``);
        None: it is not running here. See :meth:`thinkloop.Agent.hand_back`."""
        recorder = self.by_run.get(run_id)
        return recorder.handed().ask(on_stop) if recorder is not None else None

    def waiting_for_person(self, run_id: str) -> contextlib.AbstractContextManager[None]:
        recorder = self.by_run.get(run_id)
        return (recorder.handed().waiting_for_person() if recorder is not None
                else contextlib.nullcontext())

    def track(
        self, cfg: RunConfig, state: RunState, scope: Scope, base: RunRecord | None = None,
        spans: Callable[..., list[SpanRow]] | None = None, recovering: bool = False,
    ) -> tuple[Scope, Callable[[Event], None]]:
        """The run's scope wrapped to record it, and the subscriber that logs its events."""
        record = new_record(cfg, state, self.agent)
        if base is not None:  # a run that goes on keeps its start and its parent
            record = replace(record, started_at=base.started_at, parent_id=base.parent_id,
                             task=base.task or record.task)
        checkpoints = None
        if self.checkpoints:  # the store is a CheckpointStore (asked in __init__)
            checkpoints = Checkpointer(cast(CheckpointStore, self.store), state.run_id,
                                       queued=self._queued)
        recorder = RunRecorder(self.store, record, base=base, spans=spans,
                               checkpoints=checkpoints, recovering=recovering,
                               audit=self._audit, traces=self._traces, rows=self._rows)
        recorder.cancel = functools.partial(self._cancel, state.run_id)
        tracked = self._tracked(state.run_id,
                                recorded(scope, recorder, self.store, self._locking), recorder)
        return tracked, recorder.on_event

    def _tracked(self, run_id: str, inner: Scope, recorder: RunRecorder) -> Scope:
        @contextlib.asynccontextmanager
        async def tracked(cfg: RunConfig, state: RunState) -> AsyncIterator[None]:
            self.by_run[run_id] = recorder
            if self._counted is not None:  # live here, held by its lock: numbered here
                self._counted.count_rows(run_id)
            if self.aborts is not None:
                self.aborts.watch(run_id)
            try:
                async with inner(cfg, state):
                    if state.recovered is not None and recorder.checkpoints is not None:
                        recorder.checkpoints.saved(state)
                    yield
                await self._prune(cfg.session_id)
            finally:
                self.by_run.pop(run_id, None)
                if self._counted is not None:
                    self._counted.forget_rows(run_id)
                if recorder.handover is not None:
                    # Dropped once ended: it holds the recorder (its stop), a reference cycle
                    # that kept each run's records alive until a full collection (issue 38).
                    handover, recorder.handover = recorder.handover, None
                    handover.ended()
                if self.aborts is not None:
                    self.aborts.forget(run_id)

        return tracked


    async def _prune(self, session_id: str | None) -> None:
        store, keep = self.store, self.keep_checkpoints
        if not (self.checkpoints and keep > 0 and session_id is not None
                and isinstance(store, CheckpointPruning)):
            return
        try:
            await store.prune_checkpoints(session_id, keep)
        except Exception:  # old checkpoints staying is no reason to fail the run
            log.exception("pruning the checkpoints of session %s failed", session_id)
