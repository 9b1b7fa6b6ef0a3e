"""An in-process store: sessions last as long as the object."""

from __future__ import annotations

from collections.abc import Sequence

from thinkloop.types import Message, PendingApproval


class MemoryStore:
    def __init__(self) -> None:
        self.sessions: dict[str, list[Message]] = {}
        self.pending: dict[str, list[PendingApproval]] = {}

    async def load(self, session_id: str) -> list[Message]:
        return list(self.sessions.get(session_id, ()))

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        self.sessions.setdefault(session_id, []).extend(messages)

    async def save_turn(
        self, session_id: str, messages: Sequence[Message], pending: Sequence[PendingApproval]
    ) -> None:
        # No await in between: nothing can observe the messages without the pending calls.
        self.sessions.setdefault(session_id, []).extend(messages)
        if pending:
            self.pending[session_id] = list(pending)
        else:
            self.pending.pop(session_id, None)

    async def pending_approvals(self, session_id: str) -> list[PendingApproval]:
        return list(self.pending.get(session_id, ()))
