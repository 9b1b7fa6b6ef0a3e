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
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import orjson

from thinkloop.checkpoints import Recovery
from thinkloop.context.inputs import RunContext, user_message
from thinkloop.core.errors import PendingApprovalError
from thinkloop.core.types import ENDED_SAVED, UNSAVED, Message, PendingApproval
from thinkloop.hooks import OutputContext, Resumption, RunConfig, RunState
from thinkloop.loop.handle import RunHandle, Scope, Subscriber
from thinkloop.loop.resume import rebuild_steps
from thinkloop.runbook import RunBook
from thinkloop.runs import RunRegistry
from thinkloop.store.base import (
    ApprovalStore,
    JobBacklog,
    OwedJobs,
    RunRecord,
    Store,
    StoreError,
)
from thinkloop.store.locks import LocalLocks, session_lock
from thinkloop.store.serialize import message_from_dict, message_to_dict, to_json
from thinkloop.tracing import Tracing

log = logging.getLogger("thinkloop")

# How long the process that owes a turn's post-turn jobs holds them before another process
# may take them (it died without releasing them): well over what the jobs take.
JOBS_HOLD_S = 600.0

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
        # Asked once: a runtime protocol check costs 20-40 µs, and every run asked twice.
        self._backlog = store if isinstance(store, JobBacklog) else None

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
        handle = RunHandle(cfg, state, listeners, self._owing(scope), buffer_events=events,
                           after=self._post_turn)
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

    # --- post-turn jobs owed ----------------------------------------------------------------

    def _owing(self, scope: Scope) -> Scope:
        """``scope``, then (the turn saved, the answer not out yet) its post-turn jobs
        recorded as owed, so that a process stopped before they ran leaves them to the next."""
        backlog = self._backlog
        if backlog is None:
            return scope

        @asynccontextmanager
        async def owing(cfg: RunConfig, state: RunState) -> AsyncIterator[None]:
            async with scope(cfg, state):
                yield
            if _owes(cfg, state):
                await backlog.owe_jobs(OwedJobs(state.run_id, cfg.session_id, cfg.user_id,
                                                _turn_json(state), time.time()), JOBS_HOLD_S)

        return owing

    async def _post_turn(self, cfg: RunConfig, state: RunState) -> None:
        await post_turn(cfg, state)  # a Ctrl-C (cancelled) leaves them owed
        if self._backlog is not None and _owes(cfg, state):
            try:
                await self._backlog.drop_jobs(state.run_id)
            except StoreError as exc:
                # The store went away first (a script exiting without aclose): the jobs
                # stay owed and, being repeatable, run again on the next start.
                log.debug("owed jobs of run %s not dropped: %s", state.run_id, exc)

    async def release_jobs(self, run_id: str) -> None:
        """Leave a run's owed post-turn jobs to the next run (this process stops now)."""
        if isinstance(self.store, JobBacklog):
            await self.store.release_jobs(run_id)

    async def finish_owed(self, config: Callable[[str | None, str | None], RunConfig],
                          limit: int = 20) -> int:
        """Run the post-turn jobs that stopped processes left owed (up to ``limit`` turns,
        oldest first); ``config(session, user)`` is the run configuration they run under.
        How many turns' jobs ran."""
        if not isinstance(self.store, JobBacklog):
            return 0
        done = 0
        for owed in await self.store.take_owed_jobs(limit, JOBS_HOLD_S):
            cfg = config(owed.session_id, owed.user_id)
            try:
                state = _state_of(owed)
            except (ValueError, KeyError, TypeError):
                log.warning("owed post-turn jobs of run %s are unreadable: dropped", owed.run_id)
                await self.store.drop_jobs(owed.run_id)
                continue
            try:
                await self._post_turn(cfg, state)
            except asyncio.CancelledError:  # stopped again: still owed, to the next run
                await asyncio.shield(self.store.release_jobs(owed.run_id))
                raise
            done += 1
        return done

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


def _owes(cfg: RunConfig, state: RunState) -> bool:
    """Does the turn have post-turn jobs that keep anything (an owner, a saved turn)?"""
    return ("post_output" in cfg.hooks and state.status in ENDED_SAVED
            and (cfg.session_id is not None or cfg.user_id is not None))


def _turn_json(state: RunState) -> str:
    return to_json({
        "task": state.task, "text": state.text, "status": state.status, "silent": state.silent,
        "messages": [message_to_dict(m) for m in state.new_messages],
    })


def _state_of(owed: OwedJobs) -> RunState:
    """The finished run as its post-turn jobs see it, from its owed record."""
    data = orjson.loads(owed.turn)
    messages = [message_from_dict(m) for m in data["messages"]]
    state = RunState(owed.run_id, str(data["task"]), messages, None,
                     status=data["status"], text=str(data["text"]), output=data["text"],
                     silent=bool(data["silent"]))
    state.steps = rebuild_steps(messages)
    return state


def describe(pending: list[PendingApproval]) -> str:
    return ", ".join(f"{p.tool} (call {p.call_id}, run {p.run_id})" for p in pending)


def _with_turn(p: PendingApproval, turn: int) -> PendingApproval:
    return PendingApproval(p.run_id, p.session_id, p.call_id, p.tool, p.arguments, p.reason,
                           p.requested_at, p.task, p.max_steps, turn)
