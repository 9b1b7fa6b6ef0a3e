"""Runs as records: each run's row, its audit log, and the abort requests it obeys.

A :class:`RunRecorder` follows one run. It subscribes to the run's events (buffered in memory,
so the loop never waits on the store for an event), writes the run's row when it starts, the
buffered events after every completed step and at the end, and the final row (status, steps,
tokens, cost, error) once the session has saved its turn. ``chunk`` events (stream deltas)
are left out of the audit log: the ``llm.response`` that follows holds the whole reply.

Nothing here is on the hot path of an agent without a store: the agent records runs only in a
store it was given (``Agent(store=...)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from thinkloop.checkpoints import Checkpointer
from thinkloop.core.errors import RunAccessError
from thinkloop.core.events import Chunk, Event, Handoff
from thinkloop.handover import Handover
from thinkloop.hooks import RunConfig, RunState
from thinkloop.loop.handle import Scope
from thinkloop.store.base import (
    AuditLog,
    MemoryRecord,
    RunRecord,
    RunRecords,
    SpanRecord,
    StepRecords,
    TraceStore,
    TryLocking,
)
from thinkloop.store.serialize import LoggedEvents, SpanRow, span_from_row

log = logging.getLogger("thinkloop.runs")


@dataclass
class RunRecorder:
    """Writes one run's record and audit log to ``store`` (see the module docstring)."""

    store: RunRecords
    record: RunRecord
    buffer: list[Event] = field(default_factory=list)
    # Usage the run's record held before this part of it began (a resumed run goes on).
    base: RunRecord | None = None
    # Why the run was stopped from outside, for the record of a cancelled run.
    reason: str | None = None
    # The run's finished trace spans not yet written, as rows (``close=True`` at the end),
    # if traced.
    spans: Callable[..., list[SpanRow]] | None = None
    checkpoints: Checkpointer | None = None
    # False when this process may not write the run (it turned out to be someone else's).
    owned: bool = True
    # Continuing a run whose process died (from its checkpoints).
    recovering: bool = False
    # Its tool calls in flight and a hand-back waiting for them (``thinkloop.handover``).
    handover: Handover | None = None
    cancel: Callable[[], object] | None = None  # stops the run (its registry's abort)
    _write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _writer: asyncio.Task[None] | None = None
    # Its sub-agents' rows (parent_id: this run), and the task writing them in order.
    children: dict[str, RunRecord] = field(default_factory=dict)
    _child_writes: asyncio.Task[None] | None = None
    # What the store keeps, asked once per store (RunBook): a runtime protocol check costs
    # 20-60 µs, and the step path asked three times a step (issue 38's profile). None: ask.
    audit: bool | None = None
    traces: bool | None = None
    # The store takes events serialised as they arrive and spans as rows (``takes_rows``):
    # the buffer is then ``logged``, bytes the collector never walks (issue 38).
    rows: bool | None = None
    logged: LoggedEvents = field(default_factory=LoggedEvents)
    _audit: bool = field(init=False)
    _traces: bool = field(init=False)
    _rows: bool = field(init=False)

    def __post_init__(self) -> None:
        self._audit = isinstance(self.store, AuditLog) if self.audit is None else self.audit
        self._traces = (isinstance(self.store, TraceStore) if self.traces is None
                        else self.traces)
        self._rows = takes_rows(self.store) if self.rows is None else self.rows

    def handed(self) -> Handover:
        if self.handover is None:
            self.handover = Handover(self._stop_here)
        return self.handover

    def _stop_here(self) -> None:
        self.owned = False  # its end is not recorded: another process goes on with it
        if self.cancel is not None:
            self.cancel()

    def on_event(self, event: Event) -> None:
        if isinstance(event, Handoff):
            self._child(event)
        if isinstance(event, Chunk):  # the llm.response that follows has the whole reply
            return
        if self._rows:
            if self._audit:
                self.logged.add(event)
        else:
            self.buffer.append(event)

    def _events(self) -> Sequence[Event] | LoggedEvents:
        """The events logged since the last write, taken (none if the store keeps none)."""
        if self._rows:
            if not self.logged:
                return ()
            events, self.logged = self.logged, LoggedEvents()
            return events
        if not self._audit or not self.buffer:
            return ()
        buffered, self.buffer = self.buffer, []
        return buffered

    def _spans(self, *, close: bool = False) -> Sequence[SpanRecord | SpanRow]:
        """The finished spans since the last write, taken: rows, or records for a store
        that takes those."""
        rows = self.spans(close=close) if self.spans is not None else []
        if not rows or not self._traces:
            return ()
        return rows if self._rows else [span_from_row(r) for r in rows]

    def _child(self, e: Handoff) -> None:
        """A sub-agent's row, written as it starts (so ``runs show`` lists it while it runs)
        and as it ends. No session: its usage is counted in its parent's already."""
        old = self.children.get(e.child_run_id)
        if e.direction == "to_child":
            rec = RunRecord(e.child_run_id, e.agent, e.model or "", "", "running", time.time(),
                            None, self.record.user_id, e.task or "", parent_id=self.record.id)
        elif old is not None and old.ended_at is None:
            u = e.usage or {}
            rec = replace(old, status=e.status or "failed", ended_at=time.time(),
                          input_tokens=int(u.get("input_tokens", 0)),
                          output_tokens=int(u.get("output_tokens", 0)),
                          cost_usd=float(u.get("cost_usd", 0.0)))
        else:
            return
        self.children[rec.id] = rec
        self._child_writes = asyncio.get_running_loop().create_task(
            self._save_child(self._child_writes, rec))

    async def _save_child(self, before: asyncio.Task[None] | None, rec: RunRecord) -> None:
        if before is not None:  # rows of one child are written in the order they changed
            await asyncio.gather(before, return_exceptions=True)
        try:
            await self.store.save_run(rec)
        except Exception:
            log.exception("run %s: its sub-agent %s's record could not be written",
                          self.record.id, rec.id)

    async def flush(self, *, last: bool = False) -> None:
        """Write the buffered events and finished spans (after each step, and at the end)."""
        async with self._write_lock:
            events = self._events()
            # Serialised events and span rows go only to a store that takes_rows.
            if events:
                await cast(Any, self.store).add_events(self.record.id, events)
            spans = self._spans(close=last)
            if spans:
                await cast(Any, self.store).add_spans(self.record.id, spans)

    async def step(self, state: RunState, store: StepRecords) -> None:
        """Before a model call: the step's checkpoint and the events and spans logged since
        the last one, in one write (the checkpoint is written before the loop goes on, and
        the log rides along instead of taking trips of its own). A failed write is logged."""
        ckpt = self.checkpoints
        assert ckpt is not None
        # The locks taken and released by hand: an ``async with`` keeps its lock's bound
        # ``__aexit__`` while the run waits for the commit, two objects a model call of
        # every run waiting, which the collector counted (issue 38).
        write_lock, lock = self._write_lock, ckpt.lock
        try:
            await write_lock.acquire()
            try:
                await lock.acquire()
                try:
                    blob = ckpt.step_row(state)
                    events = self._events()
                    spans = self._spans()
                    if blob is None and not events and not spans:
                        return
                    await store.add_step_records(
                        self.record.id, ("step", blob) if blob else None, events, spans)
                    if blob is not None:
                        ckpt.saved(state)
                finally:
                    lock.release()
            finally:
                write_lock.release()
        except Exception:  # logged, as safely does: the run goes on (RunBook awaits this)
            unwritten(state)

    def flush_soon(self, state: RunState) -> None:
        """Flush in the background: the loop goes on while the audit log is written."""
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(safely(self.flush(), state))

    async def started(self, task: str) -> None:
        """The first row; ``task`` is the run's as it starts (a long one has its secrets
        hidden by then, after the record was made)."""
        if self.base is None:
            self.record = replace(self.record, task=task)
        await self.store.save_run(self.record)

    async def ended(self, state: RunState, error: BaseException | None = None) -> None:
        """The final row; a run that never got going (its session refused it) is ``failed``."""
        u = state.usage
        base = self.base
        status = state.status or ("cancelled" if isinstance(error, asyncio.CancelledError)
                                  else "failed")
        err = state.error_text
        if err is None and error is not None and not isinstance(error, asyncio.CancelledError):
            err = f"{type(error).__name__}: {error}"
        if err is None and status == "cancelled":
            err = self.reason
        self.record = replace(
            self.record, status=status, steps=len(state.steps) + (base.steps if base else 0),
            input_tokens=u.input_tokens + (base.input_tokens if base else 0),
            output_tokens=u.output_tokens + (base.output_tokens if base else 0),
            cost_usd=u.cost_usd + (base.cost_usd if base else 0.0),
            error=err, ended_at=time.time())
        if self._writer is not None:
            await self._writer
        for child in list(self.children.values()):  # ended with its parent
            if child.ended_at is None:
                self._child(Handoff(self.record.id, 0, "to_parent", child.agent, child.id,
                                    status="cancelled"))
        if self._child_writes is not None:
            await asyncio.gather(self._child_writes, return_exceptions=True)
        await self.flush(last=True)
        await self.store.save_run(self.record)


def takes_rows(store: object) -> bool:
    """Whether ``store`` takes a run's events serialised as they arrive
    (:class:`~thinkloop.store.serialize.LoggedEvents`) and its spans as rows (the SQL stores
    say so with ``takes_rows = True``)."""
    return getattr(store, "takes_rows", False) is True


def new_record(
    cfg: RunConfig, state: RunState, agent: str, parent_id: str | None = None
) -> RunRecord:
    parent_id = parent_id or cfg.parent_run_id
    name = cfg.model.name
    provider = name.partition(":")[0] if ":" in name else ""
    return RunRecord(state.run_id, agent, name, provider, "running", time.time(),
                     cfg.session_id, cfg.user_id, state.task, parent_id=parent_id)


def recorded(scope: Scope, recorder: RunRecorder, store: RunRecords,
             locking: bool | None = None) -> Scope:
    """``scope`` with the run's row written before it and its end recorded after it.

    A checkpointed run holds a lock named after it while it runs, so that a resume from
    another process can tell a live run from a dead one; a new run takes it once its session
    is held (waiting runs keep their order of arrival), a resume before (so it fails fast).
    A resume that finds the run alive, or ended meanwhile, is refused and writes nothing.
    """

    @contextlib.asynccontextmanager
    async def wrapped(cfg: RunConfig, state: RunState) -> AsyncIterator[None]:
        error: BaseException | None = None
        can_lock = isinstance(store, TryLocking) if locking is None else locking
        alive = (cast(TryLocking, store).try_lock("run:" + state.run_id)
                 if recorder.checkpoints is not None and can_lock
                 else contextlib.nullcontext(True))
        try:
            async with contextlib.AsyncExitStack() as stack:
                if recorder.recovering:  # a dead run's resume fails fast if it is alive
                    _claim(recorder, await stack.enter_async_context(alive))
                    await stack.enter_async_context(scope(cfg, state))
                    await _not_ended(recorder, store)
                else:
                    await stack.enter_async_context(scope(cfg, state))
                    _claim(recorder, await stack.enter_async_context(alive))
                await safely(recorder.started(state.task), state)
                yield
        except BaseException as exc:
            error = exc
            raise
        finally:
            # Shielded: a cancelled run is recorded as cancelled, not left "running".
            if recorder.owned:
                await asyncio.shield(safely(recorder.ended(state, error), state))

    return wrapped


def _claim(recorder: RunRecorder, free: bool) -> None:
    if not free:
        recorder.owned = False
        raise RunAccessError(f"run {recorder.record.id} is still running in another process")


async def _not_ended(recorder: RunRecorder, store: RunRecords) -> None:
    """A resume: did another resume finish the run while this one waited for its session?"""
    now = await store.get_run(recorder.record.id)
    # A paused run has ended its part and goes on when its approvals are decided.
    if now is not None and now.ended_at is not None and now.status != "paused":
        recorder.owned = False
        raise RunAccessError(f"run {now.id} ended ({now.status}) while resuming")


async def nothing() -> None:
    pass


async def safely(write: Any, state: RunState) -> None:
    # Observability never fails the run it observes; a store that cannot take the record
    # is logged (the run's own session save reports a store that is really down).
    try:
        await write
    except Exception:
        unwritten(state)


def unwritten(state: RunState) -> None:
    log.exception("run %s: the run record could not be written", state.run_id)


def run_memories(records: Sequence[MemoryRecord], run: RunRecord, later: Sequence[RunRecord] = (),
                 grace_s: float = 120.0) -> list[MemoryRecord]:
    """What ``run`` wrote to memory (an operator's "memory filtered by run"): rows keyed by
    its id (plans, observations), and rows written while it ran or by its post-turn jobs soon
    after (episodes, summaries, notes), until another of ``later`` (runs of the same owner)
    began; memory rows carry no run id of their own."""
    end = (run.ended_at if run.ended_at is not None else time.time()) + grace_s
    end = min([end, *(r.started_at for r in later if r.started_at > run.started_at)])
    return [r for r in records
            if run.id in r.key or run.started_at <= r.created_at <= end]
