"""An in-process store: sessions last as long as the object."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

from thinkloop.store.base import RunRecord, SpanRecord
from thinkloop.types import Event, Message, PendingApproval


class MemoryStore:
    def __init__(self) -> None:
        self.sessions: dict[str, list[Message]] = {}
        self.pending: dict[str, list[PendingApproval]] = {}
        self.runs: dict[str, RunRecord] = {}
        self.events: defaultdict[str, list[Event]] = defaultdict(list)
        self.trace: defaultdict[str, dict[str, SpanRecord]] = defaultdict(dict)
        self.saved: defaultdict[str, list[tuple[str, bytes]]] = defaultdict(list)

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

    async def save_run(self, run: RunRecord) -> None:
        self.runs[run.id] = run

    async def get_run(self, run_id: str) -> RunRecord | None:
        return self.runs.get(run_id)

    async def list_runs(
        self, session: str | None = None, status: str | None = None, limit: int = 100
    ) -> list[RunRecord]:
        runs = [r for r in reversed(self.runs.values())
                if (session is None or r.session_id == session)
                and (status is None or r.status == status)]
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

    async def request_abort(self, run_id: str) -> bool:
        run = self.runs.get(run_id)
        if run is None or run.ended_at is not None:
            return False
        self.runs[run_id] = replace(run, abort_requested=time.time())
        return True

    async def abort_requests(self, run_ids: Sequence[str]) -> list[str]:
        return [i for i in run_ids if (r := self.runs.get(i)) and r.abort_requested is not None]
