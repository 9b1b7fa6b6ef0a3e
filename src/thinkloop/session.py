"""One owner of a run's lifetime on a session (see design.md).

Before the run: take the session's lock (FIFO in this process, advisory across processes),
load its history, refuse it while a paused run waits for approval. After the run: save the
whole turn atomically (a paused run with the calls it waits on; a failed, cancelled or timed
out run saves nothing), release the lock. After the answer is out: the post-turn jobs
(``post_output`` hooks: profile, summaries, episodes, compaction), tracked here so that
``Agent.aclose()`` (and ``run_sync``) await them before the store closes.

A paused run (the approval gate deferred a call) is kept in the store until it is resumed:
answering a new task while a tool call has no result would leave the history inconsistent,
and silently denying would throw away a decision a human may still make.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from thinkloop.checkpoints import Recovery
from thinkloop.context.inputs import RunContext, user_message
from thinkloop.core.errors import PendingApprovalError
from thinkloop.core.types import UNSAVED, Message, PendingApproval
from thinkloop.hooks import OutputContext, Resumption, RunConfig, RunState
from thinkloop.loop.handle import RunHandle, Scope, Subscriber
from thinkloop.loop.resume import rebuild_steps
from thinkloop.runlog import RunBook
from thinkloop.runs import RunRegistry
from thinkloop.store.base import ApprovalStore, RunRecord, Store, StoreError
from thinkloop.store.locks import LocalLocks, session_lock
from thinkloop.tracing import Tracing

log = logging.getLogger("thinkloop")

class Sessions:
    """The sessions of one agent's store, and the runs and post-turn jobs in flight on it.

    :meth:`launch` owns a run's whole lifetime: its scope (load, lock, save), its record and
    checkpoints (``runbook``), its trace (``tracing``), its registry entry and its
    post-turn jobs."""

    def __init__(self, store: Store, *, agent: str = "thinkloop",
                 registry: RunRegistry | None = None, runbook: RunBook | None = None,
                 tracing: Tracing | None = None) -> None:
        self.store = store
        self.agent = agent
        self.registry = registry if registry is not None else RunRegistry()
        self.runbook = runbook
        self.tracing = tracing
        self._locks = LocalLocks()
        self._runs: set[asyncio.Task[None]] = set()
        self._forget = self._runs.discard  # one bound method, not one per run

    def launch(self, cfg: RunConfig, state: RunState, scope: Scope,
               subscribers: Sequence[Subscriber], *, events: bool = True,
               base: RunRecord | None = None, recovering: bool = False) -> RunHandle:
        """Start the run's task inside ``scope``: traced, recorded when the store keeps runs
        (with checkpoints), registered, and tracked until its post-turn jobs are done."""
        listeners = list(subscribers)
        spans = None
        if self.tracing is not None:
            traced = self.tracing.follow(cfg, state, self.agent, self.runbook is not None)
            listeners, spans = [*listeners, traced.on_event], traced.take_spans
        if self.runbook is not None:
            scope, log_event = self.runbook.track(cfg, state, scope, base, spans, recovering)
            listeners = [*listeners, log_event]
        handle = RunHandle(cfg, state, listeners, scope, buffer_events=events, after=post_turn)
        self.registry.add(handle)
        return self.track(handle)

    @asynccontextmanager
    async def turn(
        self, cfg: RunConfig, state: RunState, context: RunContext | None = None
    ) -> AsyncIterator[None]:
        """A new run: load the session before it, save its whole turn after it, or nothing."""
        system = Message.system(cfg.system_prompt)
        # Reading files and PDFs blocks, so it happens off the event loop.
        first = (await asyncio.to_thread(user_message, state.task, context, cfg.model)
                 if context is not None else Message.user(state.task))
        session = cfg.session_id
        if session is None:
            state.messages, state.new_from = [system, first], 1
            yield
            return
        async with self._held(session, state) as history:
            await self.refuse_if_pending(session)
            state.messages = [system, *history, first]
            state.new_from = len(history) + 1
            yield

    @asynccontextmanager
    async def resumed(
        self, resume: Resumption, cfg: RunConfig, state: RunState
    ) -> AsyncIterator[None]:
        """Restore a paused run under the session lock; save the rest of its turn after.

        The pending calls are read again under the lock: a second resume that raced this one
        finds nothing and fails instead of running the tool twice.
        """
        session = cfg.session_id
        assert session is not None
        async with self._locks.hold(session), session_lock(self.store, session):
            pending = await self.expect_pending(session)
            if [p.call_id for p in pending] != [p.call_id for p in resume.pending]:
                raise PendingApprovalError(
                    f"session {session!r}: the paused run changed while resuming; list it again")
            history = await self.store.load(session)
            turn = history[len(history) - resume.turn_messages:]
            state.messages = [Message.system(cfg.system_prompt), *history]
            state.new_from = len(state.messages)
            state.steps = rebuild_steps(turn)
            state.max_steps = resume.pending[0].max_steps or None
            state.resume = resume
            yield
            if state.status not in UNSAVED:
                await self.save_turn(session, state)

    @asynccontextmanager
    async def recovered(
        self, recovery: Recovery, cfg: RunConfig, state: RunState
    ) -> AsyncIterator[None]:
        """A run whose process died, restored from its checkpoints under the session lock;
        its whole turn is saved after, as any run's."""
        session = cfg.session_id
        if session is None:
            recovery.apply(state, [], cfg.system_prompt)
            yield
            return
        async with self._held(session, state) as history:
            recovery.apply(state, history, cfg.system_prompt)
            yield

    @asynccontextmanager
    async def _held(self, session: str, state: RunState) -> AsyncIterator[list[Message]]:
        """The session locked (in this process and across processes) with its history;
        the run's whole turn saved when it ends, unless it failed, was cancelled or timed out."""
        async with self._locks.hold(session), session_lock(self.store, session):
            yield await self.store.load(session)
            if state.status not in UNSAVED:
                await self.save_turn(session, state)

    # --- paused runs ----------------------------------------------------------------------

    async def pending(self, session: str) -> list[PendingApproval]:
        """The calls the session's paused run waits on (empty: nothing is paused)."""
        if not isinstance(self.store, ApprovalStore):
            return []
        return await self.store.pending_approvals(session)

    async def refuse_if_pending(self, session: str) -> None:
        pending = await self.pending(session)
        if pending:
            raise PendingApprovalError(
                f"session {session!r} has a paused run waiting for approval of "
                f"{describe(pending)}; resume it first with agent.resume() or "
                f"'thinkloop approvals decide --session {session}'")

    async def expect_pending(self, session: str) -> list[PendingApproval]:
        pending = await self.pending(session)
        if not pending:
            raise PendingApprovalError(
                f"session {session!r} has no paused run waiting for approval "
                "(nothing to resume, or it was resumed already)")
        return pending

    async def save_turn(self, session: str, state: RunState) -> None:
        """Persist the run's turn; a paused one with its pending calls, in one transaction."""
        pending: list[PendingApproval] = []
        if state.status == "paused":
            before = state.resume.turn_messages if state.resume is not None else 0
            turn = before + len(state.new_messages)
            pending = [_with_turn(p, turn) for p in state.pending]
        if not pending and state.resume is None:
            await self.store.append(session, state.new_messages)
            return
        if not isinstance(self.store, ApprovalStore):
            raise StoreError(f"{type(self.store).__name__} cannot keep paused runs (no save_turn)")
        await self.store.save_turn(session, state.new_messages, pending)

    # --- runs in flight and their post-turn jobs ------------------------------------------

    def track(self, handle: RunHandle) -> RunHandle:
        task = handle.background
        self._runs.add(task)
        task.add_done_callback(self._forget)
        return handle

    @property
    def in_flight(self) -> int:
        return len(self._runs)

    async def drain(self) -> None:
        """Wait for every run in flight and its post-turn jobs."""
        while self._runs:
            await asyncio.gather(*(asyncio.shield(t) for t in list(self._runs)),
                                 return_exceptions=True)


async def post_turn(cfg: RunConfig, state: RunState) -> None:
    """The ``post_output`` hooks, after the answer is out (they never delay the result).

    Cancelled once (an event loop shutting down cancels every task still running, the
    post-turn jobs of the run that just answered among them), they run again so nothing is
    lost; the jobs are written to be repeatable (upserts, rewritten summaries).
    """
    if "post_output" not in cfg.hooks:
        return
    ctx = OutputContext("post_output", cfg, state, text=state.text, output=state.output,
                        silent=state.silent, status=state.status)
    for attempt in range(2):
        try:
            await cfg.hooks.run(ctx)
            return
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if attempt or task is None:
                raise
            task.uncancel()
        except Exception:
            log.exception("post_output hook failed for run %s", state.run_id)
            return


def describe(pending: list[PendingApproval]) -> str:
    return ", ".join(f"{p.tool} (call {p.call_id}, run {p.run_id})" for p in pending)


def _with_turn(p: PendingApproval, turn: int) -> PendingApproval:
    return PendingApproval(p.run_id, p.session_id, p.call_id, p.tool, p.arguments, p.reason,
                           p.requested_at, p.task, p.max_steps, turn)
