"""An in-process store: sessions, memories and profiles last as long as the object.

``Agent(store="memory")`` uses it; it has everything the memory layers need
(``Agent(memory=True)`` works on it), nothing survives the process.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from thinkloop.store.base import MemoryRecord, SessionInfo
from thinkloop.types import Message, PendingApproval


class MemoryStore:
    def __init__(self) -> None:
        self.sessions: dict[str, list[Message]] = {}
        self.pending: dict[str, list[PendingApproval]] = {}
        self.info: dict[str, SessionInfo] = {}
        self.records: list[MemoryRecord] = []
        self.facts: dict[str, dict[str, str]] = {}
        self._next_id = 1

    async def load(self, session_id: str) -> list[Message]:
        return list(self.sessions.get(session_id, ()))

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        self.sessions.setdefault(session_id, []).extend(messages)
        self._touch(session_id)

    async def save_turn(
        self, session_id: str, messages: Sequence[Message], pending: Sequence[PendingApproval]
    ) -> None:
        # No await in between: nothing can observe the messages without the pending calls.
        self.sessions.setdefault(session_id, []).extend(messages)
        self._touch(session_id)
        if pending:
            self.pending[session_id] = list(pending)
        else:
            self.pending.pop(session_id, None)

    async def pending_approvals(self, session_id: str) -> list[PendingApproval]:
        return list(self.pending.get(session_id, ()))

    def _touch(self, session_id: str) -> None:
        now = time.time()
        info = self.info.get(session_id) or SessionInfo(session_id, 0, now, now)
        self.info[session_id] = replace(info, messages=len(self.sessions[session_id]),
                                        updated_at=now)

    # --- session admin and compaction ------------------------------------------------------

    async def list_sessions(self, limit: int = 100) -> list[SessionInfo]:
        newest = sorted(self.info.values(), key=lambda i: i.updated_at, reverse=True)
        return newest[:limit]

    async def session_info(self, session_id: str) -> SessionInfo | None:
        return self.info.get(session_id)

    async def delete_session(self, session_id: str) -> bool:
        self.pending.pop(session_id, None)
        self.sessions.pop(session_id, None)
        return self.info.pop(session_id, None) is not None

    async def compact(self, session_id: str, summary: str, drop_first: int) -> None:
        kept = self.sessions.get(session_id, [])[drop_first:]
        self.sessions[session_id] = kept
        self._touch(session_id)
        info = self.info[session_id]
        self.info[session_id] = replace(info, summary=summary, compactions=info.compactions + 1)

    # --- memories and profiles -------------------------------------------------------------

    async def add_memory(
        self, owner: str, kind: str, key: str, content: str, embedding: bytes | None = None
    ) -> int:
        ident, self._next_id = self._next_id, self._next_id + 1
        self.records.append(MemoryRecord(ident, owner, kind, key, content, time.time(),
                                         embedding))
        return ident

    async def memories(
        self, owner: str, kind: str | None = None, limit: int | None = None, after_id: int = 0
    ) -> list[MemoryRecord]:
        found = [r for r in self.records
                 if r.owner == owner and r.id > after_id and (kind is None or r.kind == kind)]
        return found[-limit:] if limit else found

    async def delete_memory(self, owner: str, key_or_id: str) -> int:
        ident = int(key_or_id) if key_or_id.isdigit() else -1
        gone = [r for r in self.records
                if r.owner == owner and (r.key == key_or_id or r.id == ident)]
        self.records = [r for r in self.records if r not in gone]
        return len(gone)

    async def memory_stamp(self, owner: str) -> tuple[int, int, int]:
        ids = [r.id for r in self.records if r.owner == owner]
        return len(ids), max(ids, default=0), sum(ids)

    async def set_facts(self, owner: str, facts: dict[str, str]) -> None:
        self.facts.setdefault(owner, {}).update(facts)

    async def profile(self, owner: str) -> dict[str, str]:
        return dict(sorted(self.facts.get(owner, {}).items()))
