"""Store protocols: where sessions, memories and profiles live between runs.

``Store`` is all a run needs (load before, append after). The durable backends also satisfy
the small protocols below; callers check with ``isinstance`` and degrade when one is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from thinkloop.errors import ThinkloopError
from thinkloop.types import Message, PendingApproval


class StoreError(ThinkloopError):
    """A store could not be opened, migrated or read."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    id: str
    messages: int
    created_at: float
    updated_at: float
    summary: str = ""
    compactions: int = 0


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
    ProfileBackend, GraphBackend, Protocol,
):
    """Everything the SQLite and PostgreSQL backends provide."""

    async def aclose(self) -> None: ...
