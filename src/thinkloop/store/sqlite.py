"""SQLite backend (the default): one file, WAL mode, aiosqlite.

One connection per store object; an asyncio lock serialises its transactions (aiosqlite would
otherwise interleave two coroutines' statements inside one transaction). Writers in other
processes are serialised by SQLite itself (``BEGIN IMMEDIATE`` with a busy timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from thinkloop.events import Event
from thinkloop.lifetime import close_at_loop_exit, forget_at_loop_exit
from thinkloop.store import schema
from thinkloop.store.base import (
    MemoryRecord,
    RunRecord,
    SessionInfo,
    SpanRecord,
    StoreError,
    one_line,
    store_errors,
)
from thinkloop.store.gateway import GatewayTables
from thinkloop.store.locks import LocalLocks, file_lock, lock_path, try_file_lock
from thinkloop.store.serialize import (
    PENDING_COLS,
    RUN_COLS,
    SPAN_COLS,
    dumps,
    event_from_row,
    event_row,
    loads,
    pending_from_row,
    pending_row,
    run_from_row,
    run_row,
    span_from_row,
    span_row,
)
from thinkloop.types import Message, PendingApproval

_SESSION_COLS = (
    "SELECT s.id, (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id), "
    "s.created_at, s.updated_at, s.summary, s.compactions, s.model, s.input_tokens, "
    "s.output_tokens, s.cost_usd FROM sessions s"
)


@store_errors((sqlite3.Error, OSError), "SQLite store")
class SQLiteStore(GatewayTables):
    """Sessions, memories and profiles in one SQLite file (``":memory:"`` for a scratch one)."""

    def __init__(self, path: str | Path, *, migrate_upto: int | None = None) -> None:
        self.path = str(path)
        self._migrate_upto = migrate_upto
        self._db: aiosqlite.Connection | None = None
        self._tx_lock = asyncio.Lock()
        self._open_lock = asyncio.Lock()
        self._local = LocalLocks()
        self.lock_dir = None if self.path == ":memory:" else Path(self.path + ".locks")

    async def _conn(self) -> aiosqlite.Connection:
        if self._db is not None:
            return self._db
        async with self._open_lock:
            if self._db is None:
                if self.path != ":memory:":
                    Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                try:
                    db = await aiosqlite.connect(self.path, isolation_level=None, timeout=30)
                except Exception as exc:
                    raise StoreError(
                        f"cannot open SQLite database {self.path}: {one_line(exc)}") from exc
                try:
                    await db.execute("PRAGMA journal_mode=WAL")
                    await db.execute("PRAGMA synchronous=NORMAL")
                    await db.execute("PRAGMA busy_timeout=30000")
                    await _migrate(db, self._migrate_upto)
                except BaseException as exc:
                    # Close it, or its worker thread keeps the process from ever exiting.
                    await db.close()
                    if isinstance(exc, sqlite3.Error):
                        raise StoreError(f"cannot use SQLite database {self.path}: "
                                         f"{one_line(exc)} (is it a damaged or foreign "
                                         "file?)") from exc
                    raise
                self._db = db
                # Unclosed, its thread would keep the process alive after asyncio.run.
                close_at_loop_exit(self, self.aclose)
        return self._db

    @contextlib.asynccontextmanager
    async def _tx(self, immediate: bool = True) -> AsyncIterator[aiosqlite.Connection]:
        db = await self._conn()
        async with self._tx_lock:
            await db.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
            try:
                yield db
            except BaseException:
                await db.execute("ROLLBACK")
                raise
            await db.execute("COMMIT")

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        db = await self._conn()
        async with self._tx_lock, db.execute(sql, args) as cur:
            return list(await cur.fetchall())

    async def aclose(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            forget_at_loop_exit(self)
            await db.close()

    async def __aenter__(self) -> SQLiteStore:
        await self._conn()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def schema_versions(self) -> list[int]:
        rows = await self._fetch("SELECT version FROM schema_migrations ORDER BY version")
        return [int(r[0]) for r in rows]

    # --- sessions -------------------------------------------------------------------------

    async def load(self, session_id: str) -> list[Message]:
        rows = await self._fetch(
            "SELECT data FROM messages WHERE session_id = ? ORDER BY seq", session_id
        )
        return [loads(r[0]) for r in rows]

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        if not messages:
            return
        async with self._tx() as db:
            await _append(db, session_id, messages)

    async def save_turn(
        self, session_id: str, messages: Sequence[Message], pending: Sequence[PendingApproval]
    ) -> None:
        rows = [(session_id, i, *pending_row(p)) for i, p in enumerate(pending)]
        async with self._tx() as db:
            await _append(db, session_id, messages)
            await db.execute("DELETE FROM pending_approvals WHERE session_id = ?", (session_id,))
            await db.executemany(
                f"INSERT INTO pending_approvals (session_id, seq, {PENDING_COLS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    async def pending_approvals(self, session_id: str) -> list[PendingApproval]:
        rows = await self._fetch(
            f"SELECT {PENDING_COLS} FROM pending_approvals WHERE session_id = ? ORDER BY seq",
            session_id)
        return [pending_from_row(session_id, r) for r in rows]

    @contextlib.asynccontextmanager
    async def lock(self, session_id: str) -> AsyncIterator[None]:
        async with self._local.hold(session_id):
            if self.lock_dir is None:
                yield
                return
            async with file_lock(lock_path(self.lock_dir, session_id)):
                yield

    @contextlib.asynccontextmanager
    async def try_lock(self, key: str) -> AsyncIterator[bool]:
        """A lock across processes that is never waited for: yields whether it was taken."""
        if self.lock_dir is None:
            yield True
            return
        with try_file_lock(lock_path(self.lock_dir, "try:" + key)) as taken:
            yield taken

    async def list_sessions(self, limit: int = 100) -> list[SessionInfo]:
        rows = await self._fetch(_SESSION_COLS + " ORDER BY s.updated_at DESC LIMIT ?", limit)
        return [SessionInfo(*r) for r in rows]

    async def session_info(self, session_id: str) -> SessionInfo | None:
        rows = await self._fetch(_SESSION_COLS + " WHERE s.id = ?", session_id)
        return SessionInfo(*rows[0]) if rows else None

    async def delete_session(self, session_id: str) -> bool:
        async with self._tx() as db:
            await db.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            await db.execute("DELETE FROM pending_approvals WHERE session_id = ?", (session_id,))
            cur = await db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            return cur.rowcount > 0

    async def compact(self, session_id: str, summary: str, drop_first: int) -> None:
        async with self._tx() as db:
            await db.execute(
                "UPDATE sessions SET summary = ?, compactions = compactions + 1, "
                "updated_at = ? WHERE id = ?",
                (summary, time.time(), session_id),
            )
            await db.execute(
                "DELETE FROM messages WHERE session_id = ? AND seq IN (SELECT seq FROM messages "
                "WHERE session_id = ? ORDER BY seq LIMIT ?)",
                (session_id, session_id, drop_first),
            )

    # --- memories and profile -------------------------------------------------------------

    async def add_memory(
        self, owner: str, kind: str, key: str, content: str, embedding: bytes | None = None
    ) -> int:
        async with self._tx() as db:
            cur = await db.execute(
                "INSERT INTO memories (owner, kind, key, content, created_at, embedding) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (owner, kind, key, content, time.time(), embedding),
            )
            assert cur.lastrowid is not None
            return cur.lastrowid

    # --- entity graph (migration 5) ----------------------------------------------------------

    async def add_graph(
        self, owner: str, nodes: Sequence[str], edges: Sequence[tuple[str, str, str]]
    ) -> None:
        now = time.time()
        async with self._tx() as db:
            await db.executemany(
                "INSERT INTO graph_nodes (owner, name, label, mentions, updated_at) "
                "VALUES (?, ?, ?, 1, ?) ON CONFLICT (owner, name) DO UPDATE SET "
                "mentions = graph_nodes.mentions + 1, updated_at = excluded.updated_at",
                [(owner, n.lower(), n, now) for n in dict.fromkeys(nodes)])
            await db.executemany(
                "INSERT INTO graph_edges (owner, src, dst, relation, weight) "
                "VALUES (?, ?, ?, ?, 1) ON CONFLICT (owner, src, dst, relation) DO UPDATE "
                "SET weight = graph_edges.weight + 1",
                [(owner, s.lower(), d.lower(), r) for s, r, d in dict.fromkeys(edges)])

    async def graph_nodes(self, owner: str, limit: int = 500) -> list[tuple[str, int]]:
        rows = await self._fetch(
            "SELECT label, mentions FROM graph_nodes WHERE owner = ? "
            "ORDER BY mentions DESC, name LIMIT ?", owner, limit)
        return [(str(r[0]), int(r[1])) for r in rows]

    async def graph_edges(
        self, owner: str, names: Sequence[str], limit: int = 20
    ) -> list[tuple[str, str, str, int]]:
        keys = [n.lower() for n in names]
        if not keys:
            return []
        marks = ", ".join("?" * len(keys))
        rows = await self._fetch(
            "SELECT s.label, e.relation, d.label, e.weight FROM graph_edges e "
            "JOIN graph_nodes s ON s.owner = e.owner AND s.name = e.src "
            "JOIN graph_nodes d ON d.owner = e.owner AND d.name = e.dst "
            f"WHERE e.owner = ? AND (e.src IN ({marks}) OR e.dst IN ({marks})) "
            "ORDER BY e.weight DESC, e.src, e.dst LIMIT ?", owner, *keys, *keys, limit)
        return [(str(a), str(b), str(c), int(w)) for a, b, c, w in rows]

    async def add_memories(
        self, owner: str, rows: Sequence[tuple[str, str, str, bytes | None]]
    ) -> None:
        """Bulk insert of ``(kind, key, content, embedding)`` rows in one transaction."""
        now = time.time()
        async with self._tx() as db:
            await db.executemany(
                "INSERT INTO memories (owner, kind, key, content, created_at, embedding) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(owner, k, key, c, now, e) for k, key, c, e in rows],
            )

    async def memories(
        self, owner: str, kind: str | None = None, limit: int | None = None, after_id: int = 0
    ) -> list[MemoryRecord]:
        sql = "SELECT id, owner, kind, key, content, created_at, embedding FROM memories"
        sql += " WHERE owner = ? AND id > ?" + (" AND kind = ?" if kind else "")
        args: list[Any] = [owner, after_id] + ([kind] if kind else [])
        rows = await self._fetch(sql + " ORDER BY id DESC LIMIT ?", *args, limit or -1)
        return [MemoryRecord(*r) for r in reversed(rows)]

    async def memory_stamp(self, owner: str) -> tuple[int, int, int]:
        """Changes whenever the owner's memories do: (count, max id, sum of ids)."""
        rows = await self._fetch(
            "SELECT COUNT(*), COALESCE(MAX(id), 0), COALESCE(SUM(id), 0) FROM memories "
            "WHERE owner = ?", owner,
        )
        return int(rows[0][0]), int(rows[0][1]), int(rows[0][2])

    async def delete_memory(self, owner: str, key_or_id: str) -> int:
        ident = int(key_or_id) if key_or_id.isdigit() else -1
        async with self._tx() as db:
            cur = await db.execute(
                "DELETE FROM memories WHERE owner = ? AND (key = ? OR id = ?)",
                (owner, key_or_id, ident),
            )
            return cur.rowcount

    async def set_facts(self, owner: str, facts: dict[str, str]) -> None:
        if not facts:
            return
        now = time.time()
        async with self._tx() as db:
            await db.executemany(
                "INSERT INTO profile (owner, key, value, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (owner, key) DO UPDATE SET value = excluded.value, "
                "updated_at = excluded.updated_at",
                [(owner, k, v, now) for k, v in facts.items()],
            )

    async def profile(self, owner: str) -> dict[str, str]:
        rows = await self._fetch(
            "SELECT key, value FROM profile WHERE owner = ? ORDER BY key", owner
        )
        return {k: v for k, v in rows}

    # --- runs, audit log, trace, checkpoints (issue 15) ------------------------------------

    async def save_run(self, run: RunRecord) -> None:
        async with self._tx() as db:
            async with db.execute(
                "SELECT input_tokens, output_tokens, cost_usd FROM runs WHERE id = ?", (run.id,)
            ) as cur:
                old = await cur.fetchone()
            await db.execute(
                f"INSERT OR REPLACE INTO runs ({RUN_COLS}) VALUES ({', '.join('?' * 17)})",
                run_row(run))
            if run.session_id is not None:
                before = tuple(old) if old else (0, 0, 0.0)
                await db.execute(
                    "UPDATE sessions SET model = ?, input_tokens = input_tokens + ?, "
                    "output_tokens = output_tokens + ?, cost_usd = cost_usd + ? WHERE id = ?",
                    (run.model, run.input_tokens - before[0], run.output_tokens - before[1],
                     run.cost_usd - before[2], run.session_id))

    async def get_run(self, run_id: str) -> RunRecord | None:
        rows = await self._fetch(f"SELECT {RUN_COLS} FROM runs WHERE id = ?", run_id)
        return run_from_row(rows[0]) if rows else None

    async def list_runs(
        self, session: str | None = None, status: str | None = None, limit: int = 100
    ) -> list[RunRecord]:
        rows = await self._fetch(
            f"SELECT {RUN_COLS} FROM runs WHERE (? IS NULL OR session_id = ?) AND "
            "(? IS NULL OR status = ?) ORDER BY started_at DESC, rowid DESC LIMIT ?",
            session, session, status, status, limit)
        return [run_from_row(r) for r in rows]

    async def add_events(self, run_id: str, events: Sequence[Event]) -> None:
        if events:
            await self._write(
                "INSERT INTO run_events (run_id, seq, type, step, ts, payload) SELECT ?, "
                "COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM run_events WHERE run_id = ?",
                [(run_id, *event_row(e), run_id) for e in events])

    async def run_events(self, run_id: str) -> list[Event]:
        rows = await self._fetch(
            "SELECT type, step, ts, payload FROM run_events WHERE run_id = ? ORDER BY seq",
            run_id)
        return [event_from_row(run_id, r) for r in rows]

    async def add_spans(self, run_id: str, spans: Sequence[SpanRecord]) -> None:
        if not spans:
            return
        async with self._tx() as db:
            await db.executemany(
                f"INSERT OR REPLACE INTO spans (run_id, {SPAN_COLS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(run_id, *span_row(s)) for s in spans])

    async def spans(self, run_id: str) -> list[SpanRecord]:
        rows = await self._fetch(
            f"SELECT {SPAN_COLS} FROM spans WHERE run_id = ? ORDER BY start_ts, span_id", run_id)
        return [span_from_row(r) for r in rows]

    async def add_checkpoint(self, run_id: str, kind: str, data: bytes) -> None:
        # One statement, so one trip to the database thread: this is on the run's path.
        await self._write(
            "INSERT INTO checkpoints (run_id, seq, kind, data, created_at) SELECT ?, "
            "COALESCE(MAX(seq), 0) + 1, ?, ?, ? FROM checkpoints WHERE run_id = ?",
            [(run_id, kind, data, time.time(), run_id)])

    async def _write(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """Rows appended one statement each, in autocommit (each row is whole on its own)."""
        db = await self._conn()
        async with self._tx_lock:  # never inside another coroutine's open transaction
            await db.executemany(sql, rows)

    async def checkpoints(self, run_id: str) -> list[tuple[str, bytes]]:
        rows = await self._fetch(
            "SELECT kind, data FROM checkpoints WHERE run_id = ? ORDER BY seq", run_id)
        return [(str(k), bytes(d)) for k, d in rows]

    async def request_abort(self, run_id: str) -> bool:
        async with self._tx() as db:
            cur = await db.execute(
                "UPDATE runs SET abort_requested = ? WHERE id = ? AND ended_at IS NULL",
                (time.time(), run_id))
            return cur.rowcount > 0

    async def abort_requests(self, run_ids: Sequence[str]) -> list[str]:
        if not run_ids:
            return []
        marks = ", ".join("?" * len(run_ids))
        rows = await self._fetch(
            f"SELECT id FROM runs WHERE abort_requested IS NOT NULL AND id IN ({marks})",
            *run_ids)
        return [str(r[0]) for r in rows]


async def _append(db: aiosqlite.Connection, session_id: str, messages: Sequence[Message]) -> None:
    now = time.time()
    await db.execute(
        "INSERT INTO sessions (id, created_at, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at",
        (session_id, now, now),
    )
    async with db.execute(
        "SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?", (session_id,)
    ) as cur:
        row = await cur.fetchone()
    start = int(row[0]) + 1 if row else 1
    await db.executemany(
        "INSERT INTO messages (session_id, seq, data, created_at) VALUES (?, ?, ?, ?)",
        [(session_id, start + i, dumps(m), now) for i, m in enumerate(messages)],
    )


async def _migrate(db: aiosqlite.Connection, upto: int | None) -> None:
    await db.execute("BEGIN IMMEDIATE")  # one migrator at a time across processes
    try:
        await db.execute(schema.statements("sqlite", schema.CREATE_VERSIONS))
        async with db.execute("SELECT version FROM schema_migrations") as cur:
            applied = {int(r[0]) for r in await cur.fetchall()}
        for version, stmts in schema.pending(applied, upto):
            for sql in stmts:
                await db.execute(schema.statements("sqlite", sql))
            await db.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                (version, time.time()),
            )
    except BaseException:
        await db.execute("ROLLBACK")
        raise
    await db.execute("COMMIT")
