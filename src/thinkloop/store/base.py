"""The Store protocol: where sessions live between runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from thinkloop.types import Message


class Store(Protocol):
    async def load(self, session_id: str) -> list[Message]:
        """The session's messages, oldest first (empty for a new session)."""
        ...

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        """Add one run's messages in one transaction: all of them or none."""
        ...
