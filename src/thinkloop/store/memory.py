"""An in-process store: sessions last as long as the object."""

from __future__ import annotations

from collections.abc import Sequence

from thinkloop.types import Message


class MemoryStore:
    def __init__(self) -> None:
        self.sessions: dict[str, list[Message]] = {}

    async def load(self, session_id: str) -> list[Message]:
        return list(self.sessions.get(session_id, ()))

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        self.sessions.setdefault(session_id, []).extend(messages)
