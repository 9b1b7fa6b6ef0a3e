"""Store protocols: where sessions, memories and profiles live between runs.

``Store`` is all a run needs (load before, append after). The durable backends also satisfy
the small protocols below; callers check with ``isinstance`` and degrade when one is missing.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from thinkloop.core.errors import StoreError as StoreError  # re-exported: stores raise it
from thinkloop.core.events import Event
from thinkloop.core.types import Message, PendingApproval

if TYPE_CHECKING:
    from thinkloop.store.serialize import LoggedEvents, SpanRow

T = TypeVar("T")


def one_line(exc: BaseException) -> str:
    """``exc`` as one line: its first line, with the exception's type when that says more."""
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def store_errors(
    kinds: tuple[type[BaseException], ...], what: str
) -> Callable[[type[T]], type[T]]:
    """Class decorator: the backend's own errors (``kinds``) leave every public coroutine
    method as :class:`StoreError` with a one-line cause, never as a raw driver error."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(self, *args, **kwargs)
            except kinds as exc:
                raise StoreError(f"{what} failed: {one_line(exc)}") from exc

        return call

    def decorate(cls: type[T]) -> type[T]:
        # Inherited methods too (the shared tables are mixins), wrapped on ``cls`` alone.
        for name in dir(cls):
            fn = inspect.getattr_static(cls, name)
            if not name.startswith("_") and inspect.iscoroutinefunction(fn):
                setattr(cls, name, wrap(fn))
        return cls

    return decorate


@dataclass(frozen=True, slots=True)
class SessionInfo:
    id: str
    messages: int
    created_at: float
    updated_at: float
    summary: str = ""
    compactions: int = 0
    # What the session's runs used (issue 15): the last model and the token totals.
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One remembered text. ``kind`` is manual, episode or summary; ``owner`` a user or session."""

    id: int
    owner: str
    kind: str
    key: str
    content: str
    created_at: float
    embedding: bytes | None = None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run as stored (issue 15). ``status`` is ``running`` until the run ends; a run whose
    process died stays ``running`` with no ``ended_at`` (``thinkloop runs resume`` picks it up).
    """

    id: str
    agent: str
    model: str
    provider: str
    status: str
    started_at: float
    session_id: str | None = None
    user_id: str | None = None
    task: str = ""
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    parent_id: str | None = None
    ended_at: float | None = None
    abort_requested: float | None = None


@dataclass(frozen=True, slots=True)
class OwedJobs:
    """A finished turn whose post-turn jobs have not run yet (``turn``: its JSON)."""

    run_id: str
    session_id: str | None
    user_id: str | None
    turn: str
    created_at: float


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One finished span of a run's trace, as stored (times in seconds since the epoch)."""

    span_id: str
    parent_id: str | None
    trace_id: str
    name: str
    start: float
    end: float
    status: str
    attributes: dict[str, Any]


@runtime_checkable
class Store(Protocol):
    async def load(self, session_id: str) -> list[Message]:
        """The session's messages, oldest first (empty for a new session)."""
        ...

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        """Add one run's messages in one transaction: all of them or none."""
        ...


@runtime_checkable
class ApprovalStore(Protocol):
    """Paused runs (issue 6): a turn that waits on approvals, kept until it is resumed."""

    async def save_turn(
        self, session_id: str, messages: Sequence[Message], pending: Sequence[PendingApproval]
    ) -> None:
        """Append one run's messages and replace the session's pending approvals with
        ``pending`` (empty: the run ended, nothing waits), all in one transaction."""
        ...

    async def pending_approvals(self, session_id: str) -> list[PendingApproval]:
        """The calls the session's paused run waits on, in the order they were made."""
        ...


@runtime_checkable
class SessionAdmin(Protocol):
    async def list_sessions(self, limit: int = 100) -> list[SessionInfo]: ...

    async def session_info(self, session_id: str) -> SessionInfo | None: ...

    async def delete_session(self, session_id: str) -> bool: ...


@runtime_checkable
class SessionLocking(Protocol):
    def lock(self, session_id: str) -> AbstractAsyncContextManager[None]:
        """Hold the session exclusively, across processes, until the block ends."""
        ...


@runtime_checkable
class TryLocking(Protocol):
    def try_lock(self, key: str) -> AbstractAsyncContextManager[bool]:
        """Take a cross-process lock only if it is free; the block learns whether it was."""
        ...


@runtime_checkable
class Compacting(Protocol):
    async def compact(self, session_id: str, summary: str, drop_first: int) -> None:
        """Save ``summary`` as the condensed history and delete the oldest messages.

        Counting from the oldest keeps messages appended since the caller's snapshot.
        """
        ...


@runtime_checkable
class MemoryBackend(Protocol):
    async def add_memory(
        self, owner: str, kind: str, key: str, content: str, embedding: bytes | None = None
    ) -> int: ...

    async def memories(
        self, owner: str, kind: str | None = None, limit: int | None = None, after_id: int = 0
    ) -> list[MemoryRecord]:
        """Oldest first; ``limit`` keeps the newest; ``after_id`` only rows added since."""
        ...

    async def delete_memory(self, owner: str, key_or_id: str) -> int: ...

    async def memory_stamp(self, owner: str) -> tuple[int, int, int]:
        """A value that changes whenever the owner's memories change (for index caches)."""
        ...


@runtime_checkable
class ProfileBackend(Protocol):
    async def set_facts(self, owner: str, facts: dict[str, str]) -> None: ...

    async def profile(self, owner: str) -> dict[str, str]: ...


@runtime_checkable
class RunRecords(Protocol):
    """Runs as records: written when a run starts and again when it ends."""

    async def save_run(self, run: RunRecord) -> None:
        """Insert or replace the run's row; its session's model and token totals move by what
        the run used since its row was last saved."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None: ...

    async def list_runs(
        self, session: str | None = None, status: str | None = None, limit: int = 100,
        parent: str | None = None,
    ) -> list[RunRecord]:
        """Newest first; ``parent``: only the sub-agent runs that run started."""
        ...


@runtime_checkable
class JobBacklog(Protocol):
    """Post-turn jobs owed: recorded before a run's answer is out (held by the process that
    runs them), dropped once they ran; jobs a stopped process skipped (it released them, or
    its hold ran out) are taken by the next run against the store."""

    async def owe_jobs(self, owed: OwedJobs, hold_s: float) -> None: ...

    async def take_owed_jobs(self, limit: int, hold_s: float) -> list[OwedJobs]:
        """Hold and return up to ``limit`` owed turns no process holds, oldest first."""
        ...

    async def release_jobs(self, run_id: str) -> None:
        """Leave the turn's jobs for the next run (this process stops before they ran)."""
        ...

    async def drop_jobs(self, run_id: str) -> None: ...


@runtime_checkable
class AuditLog(Protocol):
    """A run's event stream, typed events kept in order."""

    async def add_events(self, run_id: str, events: Sequence[Event]) -> None:
        """Append after the run's stored events."""
        ...

    async def run_events(self, run_id: str) -> list[Event]: ...


@runtime_checkable
class TraceStore(Protocol):
    async def add_spans(self, run_id: str, spans: Sequence[SpanRecord]) -> None: ...

    async def spans(self, run_id: str) -> list[SpanRecord]:
        """The run's spans by start time."""
        ...


@runtime_checkable
class CheckpointStore(Protocol):
    """An append-only log of a run's progress, so a run whose process died can continue."""

    async def add_checkpoint(self, run_id: str, kind: str, data: bytes) -> None: ...

    async def checkpoints(self, run_id: str) -> list[tuple[str, bytes]]:
        """``(kind, data)`` in the order they were added."""
        ...


@runtime_checkable
class QueuedCheckpoints(Protocol):
    """A checkpoint store whose writes are committed in the order they were queued."""

    def queue_checkpoint(self, run_id: str, kind: str, data: bytes) -> Awaitable[None]:
        """Queue a row; it is committed before any write queued after it returns."""
        ...


@runtime_checkable
class StepRecords(Protocol):
    """A step's checkpoint, events and spans written together (one transaction)."""

    async def add_step_records(self, run_id: str, checkpoint: tuple[str, bytes] | None,
                               events: Sequence[Event] | LoggedEvents,
                               spans: Sequence[SpanRecord | SpanRow]) -> None:
        """``events`` as objects or serialised as they came, ``spans`` as records or rows
        (the run book hands over the latter to a store whose ``takes_rows`` is True)."""
        ...


@runtime_checkable
class CheckpointPruning(Protocol):
    async def prune_checkpoints(self, session_id: str, keep: int) -> None:
        """Drop the checkpoints of the session's finished runs but the ``keep`` latest."""
        ...


@runtime_checkable
class AbortRequests(Protocol):
    """How one process asks another to stop a run: a flag on the run's row it polls."""

    async def request_abort(self, run_id: str) -> bool:
        """Flag a run that has not ended; ``False`` if there is no such run in progress."""
        ...

    async def abort_requests(self, run_ids: Sequence[str]) -> list[str]:
        """Which of ``run_ids`` were asked to stop."""
        ...


@runtime_checkable
class GraphBackend(Protocol):
    """The entity graph (judgement/learn.py): nodes with mention counts, weighted edges."""

    async def add_graph(
        self, owner: str, nodes: Sequence[str], edges: Sequence[tuple[str, str, str]]
    ) -> None:
        """Count one more mention of each node and each ``(src, relation, dst)`` edge."""
        ...

    async def graph_nodes(self, owner: str, limit: int = 500) -> list[tuple[str, int]]:
        """``(label, mentions)``, most mentioned first."""
        ...

    async def graph_edges(
        self, owner: str, names: Sequence[str], limit: int = 20
    ) -> list[tuple[str, str, str, int]]:
        """Edges touching any of ``names`` as ``(src, relation, dst, weight)``, heaviest
        first (labels as first seen)."""
        ...


class DurableStore(
    Store, ApprovalStore, SessionAdmin, SessionLocking, TryLocking, Compacting, MemoryBackend,
    ProfileBackend, GraphBackend, RunRecords, JobBacklog, AuditLog, TraceStore,
    CheckpointStore, AbortRequests, Protocol,
):
    """Everything the SQLite and PostgreSQL backends provide."""

    async def aclose(self) -> None: ...


@runtime_checkable
class CountedRows(Protocol):
    """A store that numbers the rows of the runs it is told it writes alone (while they are
    live in this process), instead of reading ``MAX(seq)`` for each row."""

    def count_rows(self, run_id: str) -> None: ...

    def forget_rows(self, run_id: str) -> None: ...
