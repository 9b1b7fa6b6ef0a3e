"""Paused runs in the session store: save them, refuse to talk past them, resume them.

A run pauses when the approval gate defers a call (``ApprovalSettings(on_timeout="pause")``
or an approver returning ``Decision.defer()``). Its turn so far and the pending calls are
saved in one transaction (:class:`~thinkloop.store.base.ApprovalStore`). Until it is resumed,
a new run on that session is refused with :class:`PendingApprovalError`: answering a new
task while a tool call has no result would leave the history inconsistent, and silently
denying would throw away a decision a human may still make.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from thinkloop.errors import ConfigError
from thinkloop.loop.resume import Resumption, rebuild_steps
from thinkloop.loop.state import RunConfig, RunState
from thinkloop.store.base import ApprovalStore, Store, StoreError
from thinkloop.store.locks import session_lock
from thinkloop.types import Message, PendingApproval

# Runs that end in these states leave the session (and its pending calls) as they were.
UNSAVED = frozenset({"failed", "cancelled", "timeout"})


class PendingApprovalError(ConfigError):
    """The session has a paused run waiting for approval, or none when one was expected."""


def describe(pending: list[PendingApproval]) -> str:
    return ", ".join(f"{p.tool} (call {p.call_id}, run {p.run_id})" for p in pending)


async def pending_approvals(store: Store, session: str) -> list[PendingApproval]:
    if not isinstance(store, ApprovalStore):
        return []
    return await store.pending_approvals(session)


async def refuse_if_pending(store: Store, session: str) -> None:
    """A new run on a paused session is refused (see the module docstring)."""
    pending = await pending_approvals(store, session)
    if pending:
        raise PendingApprovalError(
            f"session {session!r} has a paused run waiting for approval of "
            f"{describe(pending)}; resume it first with agent.resume() or "
            f"'thinkloop approvals decide --session {session}'")


async def save_turn(store: Store, session: str, state: RunState) -> None:
    """Persist the run's turn; a paused one with its pending calls, in one transaction."""
    pending: list[PendingApproval] = []
    if state.status == "paused":
        before = state.resume.turn_messages if state.resume is not None else 0
        turn = before + len(state.new_messages)
        pending = [_with_turn(p, turn) for p in state.pending]
    if not pending and state.resume is None:
        await store.append(session, state.new_messages)
        return
    if not isinstance(store, ApprovalStore):
        raise StoreError(f"{type(store).__name__} cannot keep paused runs (no save_turn)")
    await store.save_turn(session, state.new_messages, pending)


def _with_turn(p: PendingApproval, turn: int) -> PendingApproval:
    return PendingApproval(p.run_id, p.session_id, p.call_id, p.tool, p.arguments, p.reason,
                           p.requested_at, p.task, p.max_steps, turn)


async def expect_pending(store: Store, session: str) -> list[PendingApproval]:
    pending = await pending_approvals(store, session)
    if not pending:
        raise PendingApprovalError(
            f"session {session!r} has no paused run waiting for approval "
            "(nothing to resume, or it was resumed already)")
    return pending


@asynccontextmanager
async def resume_scope(
    store: Store, local_lock: asyncio.Lock, resume: Resumption, cfg: RunConfig,
    state: RunState,
) -> AsyncIterator[None]:
    """Restore the paused run from the store under the session lock; save the rest after.

    The pending calls are read again under the lock: a second resume that raced this one
    finds nothing and fails instead of running the tool twice.
    """
    session = cfg.session_id
    assert session is not None
    async with local_lock, session_lock(store, session):
        pending = await expect_pending(store, session)
        if [p.call_id for p in pending] != [p.call_id for p in resume.pending]:
            raise PendingApprovalError(
                f"session {session!r}: the paused run changed while resuming; list it again")
        history = await store.load(session)
        turn = history[len(history) - resume.turn_messages:]
        state.messages = [Message.system(cfg.system_prompt), *history]
        state.new_from = len(state.messages)
        state.steps = rebuild_steps(turn)
        state.max_steps = resume.pending[0].max_steps or None
        state.resume = resume
        yield
        if state.status not in UNSAVED:
            await save_turn(store, session, state)
