"""Sessions, their messages and the approvals a paused run waits on (migrations 1 to 4)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from thinkloop.core.types import Message, PendingApproval
from thinkloop.store.base import SessionInfo
from thinkloop.store.serialize import PENDING_COLS, dumps, loads, pending_from_row, pending_row
from thinkloop.store.sql import SQLBase, Tx

_SESSIONS = (
    "SELECT s.id, (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id), "
    "s.created_at, s.updated_at, s.summary, s.compactions, s.model, s.input_tokens, "
    "s.output_tokens, s.cost_usd FROM sessions s"
)
_PENDING_MARKS = ", ".join(f"{{{i}}}" for i in range(2 + len(PENDING_COLS.split(", "))))


class SessionTables(SQLBase):
    async def load(self, session_id: str) -> list[Message]:
        rows = await self._fetch(
            "SELECT data FROM messages WHERE session_id = {0} ORDER BY seq", session_id)
        return [loads(r[0]) for r in rows]

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        if not messages:
            return
        async with self._tx() as tx:
            await _append(tx, session_id, messages)

    async def save_turn(
        self, session_id: str, messages: Sequence[Message], pending: Sequence[PendingApproval]
    ) -> None:
        rows = [(session_id, i, *pending_row(p)) for i, p in enumerate(pending)]
        async with self._tx() as tx:
            await _append(tx, session_id, messages)
            await tx.execute("DELETE FROM pending_approvals WHERE session_id = {0}", session_id)
            await tx.executemany(
                f"INSERT INTO pending_approvals (session_id, seq, {PENDING_COLS}) "
                f"VALUES ({_PENDING_MARKS})", rows)

    async def pending_approvals(self, session_id: str) -> list[PendingApproval]:
        rows = await self._fetch(
            f"SELECT {PENDING_COLS} FROM pending_approvals WHERE session_id = {{0}} ORDER BY seq",
            session_id)
        return [pending_from_row(session_id, tuple(r)) for r in rows]

    async def list_sessions(self, limit: int = 100) -> list[SessionInfo]:
        rows = await self._fetch(_SESSIONS + " ORDER BY s.updated_at DESC LIMIT {0}", limit)
        return [SessionInfo(*r) for r in rows]

    async def session_info(self, session_id: str) -> SessionInfo | None:
        rows = await self._fetch(_SESSIONS + " WHERE s.id = {0}", session_id)
        return SessionInfo(*rows[0]) if rows else None

    async def delete_session(self, session_id: str) -> bool:
        async with self._tx() as tx:
            await tx.execute("DELETE FROM messages WHERE session_id = {0}", session_id)
            await tx.execute("DELETE FROM pending_approvals WHERE session_id = {0}", session_id)
            gone = await tx.fetch("DELETE FROM sessions WHERE id = {0} RETURNING id", session_id)
            return bool(gone)

    async def compact(self, session_id: str, summary: str, drop_first: int) -> None:
        async with self._tx() as tx:
            await tx.execute(
                "UPDATE sessions SET summary = {0}, compactions = compactions + 1, "
                "updated_at = {1} WHERE id = {2}", summary, time.time(), session_id)
            await tx.execute(
                "DELETE FROM messages WHERE session_id = {0} AND seq IN (SELECT seq FROM "
                "messages WHERE session_id = {0} ORDER BY seq LIMIT {1})", session_id, drop_first)


async def _append(tx: Tx, session_id: str, messages: Sequence[Message]) -> None:
    now = time.time()
    # The upsert row-locks the session on PostgreSQL (SQLite's transaction holds the file), so
    # concurrent appends take turns on seq.
    await tx.execute(
        "INSERT INTO sessions (id, created_at, updated_at) VALUES ({0}, {1}, {1}) "
        "ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at", session_id, now)
    rows = await tx.fetch(
        "SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = {0}", session_id)
    start = int(rows[0][0])
    await tx.executemany(
        "INSERT INTO messages (session_id, seq, data, created_at) VALUES ({0}, {1}, {2}, {3})",
        [(session_id, start + i, dumps(m), now) for i, m in enumerate(messages)])
