"""An in-process store: sessions, memories and profiles last as long as the object.

``Agent(store="memory")`` uses it; it has everything the memory layers need
(``Agent(memory=True)`` works on it), nothing survives the process.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

from thinkloop.core.events import Event
from thinkloop.core.types import Message, PendingApproval
from thinkloop.store.base import MemoryRecord, RunRecord, SessionInfo, SpanRecord


class MemoryStore:
    def __init__(self) -> None:
        self.sessions: dict[str, list[Message]] = {}
        self.pending: dict[str, list[PendingApproval]] = {}
        self.runs: dict[str, RunRecord] = {}
        self.events: defaultdict[str, list[Event]] = defaultdict(list)
        self.trace: defaultdict[str, dict[str, SpanRecord]] = defaultdict(dict)
        self.saved: defaultdict[str, list[tuple[str, bytes]]] = defaultdict(list)
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

    async def save_run(self, run: RunRecord) -> None:
        self.runs[run.id] = run

    async def get_run(self, run_id: str) -> RunRecord | None:
        return self.runs.get(run_id)

    async def list_runs(
        self, session: str | None = None, status: str | None = None, limit: int = 100,
        parent: str | None = None,
    ) -> list[RunRecord]:
        runs = [r for r in reversed(self.runs.values())
                if (session is None or r.session_id == session)
                and (status is None or r.status == status)
                and (parent is None or r.parent_id == parent)]
        return sorted(runs, key=lambda r: -r.started_at)[:limit]

    async def add_events(self, run_id: str, events: Sequence[Event]) -> None:
        self.events[run_id].extend(events)

    async def run_events(self, run_id: str) -> list[Event]:
        return list(self.events.get(run_id, ()))

    async def add_spans(self, run_id: str, spans: Sequence[SpanRecord]) -> None:
        self.trace[run_id].update((s.span_id, s) for s in spans)

    async def spans(self, run_id: str) -> list[SpanRecord]:
        return sorted(self.trace.get(run_id, {}).values(), key=lambda s: (s.start, s.span_id))

    async def add_checkpoint(self, run_id: str, kind: str, data: bytes) -> None:
        self.saved[run_id].append((kind, data))

    async def checkpoints(self, run_id: str) -> list[tuple[str, bytes]]:
        return list(self.saved.get(run_id, ()))

    async def prune_checkpoints(self, session_id: str, keep: int) -> None:
        runs = sorted((r for r in self.runs.values() if r.session_id == session_id),
                      key=lambda r: r.started_at, reverse=True)
        for r in runs[keep:]:
            if r.ended_at is not None:
                self.saved.pop(r.id, None)

    async def request_abort(self, run_id: str) -> bool:
        run = self.runs.get(run_id)
        if run is None or run.ended_at is not None:
            return False
        self.runs[run_id] = replace(run, abort_requested=time.time())
        return True

    async def abort_requests(self, run_ids: Sequence[str]) -> list[str]:
        return [i for i in run_ids if (r := self.runs.get(i)) and r.abort_requested is not None]

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
