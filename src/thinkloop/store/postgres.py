"""PostgreSQL backend for a fleet: asyncpg pool, advisory locks per session.

``schema`` puts every table in its own PostgreSQL schema (created if missing), which is how
tests and several deployments share one database. The advisory lock is held on a connection
of its own, outside the pool, so runs waiting for different sessions can never starve the pool
the lock holders need for their own reads and writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg
from asyncpg import Record
from asyncpg.pool import PoolConnectionProxy

from thinkloop.events import Event
from thinkloop.lifetime import close_at_loop_exit, forget_at_loop_exit
from thinkloop.store import schema
from thinkloop.store.base import (
    MemoryRecord,
    RunRecord,
    SessionInfo,
    SpanRecord,
    StoreError,
    store_errors,
)
from thinkloop.store.gateway import GatewayTables
from thinkloop.store.locks import LocalLocks, session_key
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
    "SELECT s.id, (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)::int, "
    "s.created_at, s.updated_at, s.summary, s.compactions, s.model, s.input_tokens, "
    "s.output_tokens, s.cost_usd FROM sessions s"
)
log = logging.getLogger("thinkloop.store")
_MIGRATION_LOCK = 0x7468696E6B6C6F6F  # "thinkloo": serialises migrators across processes


@store_errors((asyncpg.PostgresError, asyncpg.InterfaceError, OSError), "PostgreSQL store")
class PostgresStore(GatewayTables):
    placeholder = "$"

    def __init__(
        self, dsn: str, *, schema: str | None = None, migrate_upto: int | None = None,
        max_pool: int = 10,
    ) -> None:
        if schema is not None and not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
            raise StoreError(f"bad PostgreSQL schema name {schema!r}")
        self.dsn = dsn
        self.schema = schema
        self._migrate_upto = migrate_upto
        self._max_pool = max_pool
        self._pool: asyncpg.Pool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._open_lock: asyncio.Lock | None = None
        self._local = LocalLocks()

    def _key(self, name: str) -> int:
        # Advisory locks are per database: the schema keeps deployments sharing one apart.
        return session_key(f"{self.schema or 'public'}:{name}")

    def _settings(self) -> dict[str, str]:
        return {"search_path": self.schema} if self.schema else {}

    async def _connect_one(self) -> asyncpg.Connection:
        try:
            return await asyncpg.connect(self.dsn, server_settings=self._settings())
        except (OSError, asyncpg.PostgresError) as exc:
            raise StoreError(f"cannot connect to PostgreSQL: {exc}") from exc

    async def _get_pool(self) -> asyncpg.Pool:
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._loop is loop:
            return self._pool
        if self._open_lock is None or self._loop is not loop:
            # A pool belongs to one event loop; run_sync() starts a new loop per call.
            if self._pool is not None and self._loop is not None:
                if self._loop.is_closed():
                    # Its sockets died with their loop; nothing can close them from here.
                    log.warning("PostgresStore reused from a new event loop: old pool dropped")
                else:
                    self._loop.call_soon_threadsafe(self._pool.terminate)
            self._pool, self._loop, self._open_lock = None, loop, asyncio.Lock()
        async with self._open_lock:
            if self._pool is None:
                await self._prepare()
                self._pool = await asyncpg.create_pool(
                    self.dsn, min_size=1, max_size=self._max_pool,
                    server_settings=self._settings(),
                )
                close_at_loop_exit(self, self.aclose)
        assert self._pool is not None
        return self._pool

    async def _prepare(self) -> None:
        conn = await self._connect_one()
        try:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
                if self.schema:
                    await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                await conn.execute(schema.statements("postgres", schema.CREATE_VERSIONS))
                applied = {r[0] for r in await conn.fetch("SELECT version FROM schema_migrations")}
                for version, stmts in schema.pending(applied, self._migrate_upto):
                    for sql in stmts:
                        await conn.execute(schema.statements("postgres", sql))
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)",
                        version, time.time(),
                    )
        finally:
            await conn.close()

    async def aclose(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            forget_at_loop_exit(self)
            await pool.close()

    async def __aenter__(self) -> PostgresStore:
        await self._get_pool()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        pool = await self._get_pool()
        return list(await pool.fetch(sql, *args))

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[PoolConnectionProxy[Record]]:
        pool = await self._get_pool()
        async with pool.acquire() as conn, conn.transaction():
            yield conn

    async def schema_versions(self) -> list[int]:
        rows = await self._fetch("SELECT version FROM schema_migrations ORDER BY version")
        return [int(r[0]) for r in rows]

    # --- sessions -------------------------------------------------------------------------

    async def load(self, session_id: str) -> list[Message]:
        rows = await self._fetch(
            "SELECT data FROM messages WHERE session_id = $1 ORDER BY seq", session_id
        )
        return [loads(r[0]) for r in rows]

    async def append(self, session_id: str, messages: Sequence[Message]) -> None:
        if not messages:
            return
        async with self._tx() as conn:
            await _append(conn, session_id, messages)

    async def save_turn(
        self, session_id: str, messages: Sequence[Message], pending: Sequence[PendingApproval]
    ) -> None:
        rows = [(session_id, i, *pending_row(p)) for i, p in enumerate(pending)]
        async with self._tx() as conn:
            await _append(conn, session_id, messages)
            await conn.execute("DELETE FROM pending_approvals WHERE session_id = $1", session_id)
            await conn.executemany(
                f"INSERT INTO pending_approvals (session_id, seq, {PENDING_COLS}) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)", rows)

    async def pending_approvals(self, session_id: str) -> list[PendingApproval]:
        rows = await self._fetch(
            f"SELECT {PENDING_COLS} FROM pending_approvals WHERE session_id = $1 ORDER BY seq",
            session_id)
        return [pending_from_row(session_id, tuple(r)) for r in rows]

    @contextlib.asynccontextmanager
    async def lock(self, session_id: str) -> AsyncIterator[None]:
        async with self._local.hold(session_id):
            conn = await self._connect_one()
            try:
                await conn.execute("SELECT pg_advisory_lock($1)", self._key(session_id))
                yield
            finally:
                # Closing the connection also ends the advisory lock, even mid-cancel.
                await asyncio.shield(conn.close())

    @contextlib.asynccontextmanager
    async def try_lock(self, key: str) -> AsyncIterator[bool]:
        """A lock across processes that is never waited for: yields whether it was taken."""
        conn = await self._connect_one()
        try:
            yield bool(await conn.fetchval(
                "SELECT pg_try_advisory_lock($1)", self._key("try:" + key)))
        finally:
            await asyncio.shield(conn.close())

    async def list_sessions(self, limit: int = 100) -> list[SessionInfo]:
        rows = await self._fetch(_SESSION_COLS + " ORDER BY s.updated_at DESC LIMIT $1", limit)
        return [SessionInfo(*r) for r in rows]

    async def session_info(self, session_id: str) -> SessionInfo | None:
        rows = await self._fetch(_SESSION_COLS + " WHERE s.id = $1", session_id)
        return SessionInfo(*rows[0]) if rows else None

    async def delete_session(self, session_id: str) -> bool:
        async with self._tx() as conn:
            await conn.execute("DELETE FROM messages WHERE session_id = $1", session_id)
            await conn.execute("DELETE FROM pending_approvals WHERE session_id = $1", session_id)
            status = await conn.execute("DELETE FROM sessions WHERE id = $1", session_id)
            return bool(status != "DELETE 0")

    async def compact(self, session_id: str, summary: str, drop_first: int) -> None:
        async with self._tx() as conn:
            await conn.execute(
                "UPDATE sessions SET summary = $1, compactions = compactions + 1, "
                "updated_at = $2 WHERE id = $3",
                summary, time.time(), session_id,
            )
            await conn.execute(
                "DELETE FROM messages WHERE session_id = $1 AND seq IN (SELECT seq FROM "
                "messages WHERE session_id = $1 ORDER BY seq LIMIT $2)",
                session_id, drop_first,
            )

    # --- memories and profile -------------------------------------------------------------

    async def add_memory(
        self, owner: str, kind: str, key: str, content: str, embedding: bytes | None = None
    ) -> int:
        async with self._tx() as conn:
            ident = await conn.fetchval(
                "INSERT INTO memories (owner, kind, key, content, created_at, embedding) "
                "VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                owner, kind, key, content, time.time(), embedding,
            )
            return int(ident)

    # --- entity graph (migration 5) ----------------------------------------------------------

    async def add_graph(
        self, owner: str, nodes: Sequence[str], edges: Sequence[tuple[str, str, str]]
    ) -> None:
        now = time.time()
        async with self._tx() as conn:
            await conn.executemany(
                "INSERT INTO graph_nodes (owner, name, label, mentions, updated_at) "
                "VALUES ($1, $2, $3, 1, $4) ON CONFLICT (owner, name) DO UPDATE SET "
                "mentions = graph_nodes.mentions + 1, updated_at = excluded.updated_at",
                [(owner, n.lower(), n, now) for n in dict.fromkeys(nodes)])
            await conn.executemany(
                "INSERT INTO graph_edges (owner, src, dst, relation, weight) "
                "VALUES ($1, $2, $3, $4, 1) ON CONFLICT (owner, src, dst, relation) DO UPDATE "
                "SET weight = graph_edges.weight + 1",
                [(owner, s.lower(), d.lower(), r) for s, r, d in dict.fromkeys(edges)])

    async def graph_nodes(self, owner: str, limit: int = 500) -> list[tuple[str, int]]:
        rows = await self._fetch(
            "SELECT label, mentions FROM graph_nodes WHERE owner = $1 "
            "ORDER BY mentions DESC, name LIMIT $2", owner, limit)
        return [(str(r[0]), int(r[1])) for r in rows]

    async def graph_edges(
        self, owner: str, names: Sequence[str], limit: int = 20
    ) -> list[tuple[str, str, str, int]]:
        keys = [n.lower() for n in names]
        if not keys:
            return []
        rows = await self._fetch(
            "SELECT s.label, e.relation, d.label, e.weight FROM graph_edges e "
            "JOIN graph_nodes s ON s.owner = e.owner AND s.name = e.src "
            "JOIN graph_nodes d ON d.owner = e.owner AND d.name = e.dst "
            "WHERE e.owner = $1 AND (e.src = ANY($2::text[]) OR e.dst = ANY($2::text[])) "
            "ORDER BY e.weight DESC, e.src, e.dst LIMIT $3", owner, keys, limit)
        return [(str(a), str(b), str(c), int(w)) for a, b, c, w in rows]

    async def add_memories(
        self, owner: str, rows: Sequence[tuple[str, str, str, bytes | None]]
    ) -> None:
        """Bulk insert of ``(kind, key, content, embedding)`` rows in one transaction."""
        now = time.time()
        async with self._tx() as conn:
            await conn.executemany(
                "INSERT INTO memories (owner, kind, key, content, created_at, embedding) "
                "VALUES ($1, $2, $3, $4, $5, $6)",
                [(owner, k, key, c, now, e) for k, key, c, e in rows],
            )

    async def memories(
        self, owner: str, kind: str | None = None, limit: int | None = None, after_id: int = 0
    ) -> list[MemoryRecord]:
        rows = await self._fetch(
            "SELECT id, owner, kind, key, content, created_at, embedding FROM memories "
            "WHERE owner = $1 AND id > $4 AND ($2::text IS NULL OR kind = $2) "
            "ORDER BY id DESC LIMIT $3",
            owner, kind, limit, after_id,
        )
        return [MemoryRecord(*r) for r in reversed(rows)]

    async def memory_stamp(self, owner: str) -> tuple[int, int, int]:
        """Changes whenever the owner's memories do: (count, max id, sum of ids)."""
        rows = await self._fetch(
            "SELECT COUNT(*), COALESCE(MAX(id), 0), COALESCE(SUM(id), 0) FROM memories "
            "WHERE owner = $1", owner,
        )
        return int(rows[0][0]), int(rows[0][1]), int(rows[0][2])

    async def delete_memory(self, owner: str, key_or_id: str) -> int:
        ident = int(key_or_id) if key_or_id.isdigit() else -1
        async with self._tx() as conn:
            status = await conn.execute(
                "DELETE FROM memories WHERE owner = $1 AND (key = $2 OR id = $3)",
                owner, key_or_id, ident,
            )
            return int(status.split()[-1])

    async def set_facts(self, owner: str, facts: dict[str, str]) -> None:
        if not facts:
            return
        now = time.time()
        async with self._tx() as conn:
            await conn.executemany(
                "INSERT INTO profile (owner, key, value, updated_at) VALUES ($1, $2, $3, $4) "
                "ON CONFLICT (owner, key) DO UPDATE SET value = excluded.value, "
                "updated_at = excluded.updated_at",
                [(owner, k, v, now) for k, v in facts.items()],
            )

    async def profile(self, owner: str) -> dict[str, str]:
        rows = await self._fetch(
            "SELECT key, value FROM profile WHERE owner = $1 ORDER BY key", owner
        )
        return {r[0]: r[1] for r in rows}

    # --- runs, audit log, trace, checkpoints (issue 15) ------------------------------------

    async def save_run(self, run: RunRecord) -> None:
        cols = RUN_COLS.split(", ")
        updates = ", ".join(f"{c} = excluded.{c}" for c in cols[1:])
        async with self._tx() as conn:
            old = await conn.fetchrow(
                "SELECT input_tokens, output_tokens, cost_usd FROM runs WHERE id = $1 "
                "FOR UPDATE", run.id)
            await conn.execute(
                f"INSERT INTO runs ({RUN_COLS}) VALUES "
                f"({', '.join(f'${i}' for i in range(1, len(cols) + 1))}) "
                f"ON CONFLICT (id) DO UPDATE SET {updates}", *run_row(run))
            if run.session_id is not None:
                before = tuple(old) if old else (0, 0, 0.0)
                await conn.execute(
                    "UPDATE sessions SET model = $1, input_tokens = input_tokens + $2, "
                    "output_tokens = output_tokens + $3, cost_usd = cost_usd + $4 "
                    "WHERE id = $5",
                    run.model, run.input_tokens - before[0], run.output_tokens - before[1],
                    run.cost_usd - before[2], run.session_id)

    async def get_run(self, run_id: str) -> RunRecord | None:
        rows = await self._fetch(f"SELECT {RUN_COLS} FROM runs WHERE id = $1", run_id)
        return run_from_row(tuple(rows[0])) if rows else None

    async def list_runs(
        self, session: str | None = None, status: str | None = None, limit: int = 100
    ) -> list[RunRecord]:
        rows = await self._fetch(
            f"SELECT {RUN_COLS} FROM runs WHERE ($1::text IS NULL OR session_id = $1) AND "
            "($2::text IS NULL OR status = $2) ORDER BY started_at DESC, id LIMIT $3",
            session, status, limit)
        return [run_from_row(tuple(r)) for r in rows]

    async def add_events(self, run_id: str, events: Sequence[Event]) -> None:
        if not events:
            return
        async with self._tx() as conn:
            await conn.executemany(
                "INSERT INTO run_events (run_id, seq, type, step, ts, payload) SELECT $1, "
                "COALESCE(MAX(seq), 0) + 1, $2, $3, $4, $5 FROM run_events WHERE run_id = $1",
                [(run_id, *event_row(e)) for e in events])

    async def run_events(self, run_id: str) -> list[Event]:
        rows = await self._fetch(
            "SELECT type, step, ts, payload FROM run_events WHERE run_id = $1 ORDER BY seq",
            run_id)
        return [event_from_row(run_id, tuple(r)) for r in rows]

    async def add_spans(self, run_id: str, spans: Sequence[SpanRecord]) -> None:
        if not spans:
            return
        async with self._tx() as conn:
            await conn.executemany(
                f"INSERT INTO spans (run_id, {SPAN_COLS}) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
                [(run_id, *span_row(s)) for s in spans])

    async def spans(self, run_id: str) -> list[SpanRecord]:
        rows = await self._fetch(
            f"SELECT {SPAN_COLS} FROM spans WHERE run_id = $1 ORDER BY start_ts, span_id",
            run_id)
        return [span_from_row(tuple(r)) for r in rows]

    async def add_checkpoint(self, run_id: str, kind: str, data: bytes) -> None:
        # One statement, one round trip: this is on the run's path. A run has one writer.
        await (await self._get_pool()).execute(
            "INSERT INTO checkpoints (run_id, seq, kind, data, created_at) SELECT $1, "
            "COALESCE(MAX(seq), 0) + 1, $2, $3, $4 FROM checkpoints WHERE run_id = $1",
            run_id, kind, data, time.time())

    async def checkpoints(self, run_id: str) -> list[tuple[str, bytes]]:
        rows = await self._fetch(
            "SELECT kind, data FROM checkpoints WHERE run_id = $1 ORDER BY seq", run_id)
        return [(str(r[0]), bytes(r[1])) for r in rows]

    async def request_abort(self, run_id: str) -> bool:
        status = await (await self._get_pool()).execute(
            "UPDATE runs SET abort_requested = $1 WHERE id = $2 AND ended_at IS NULL",
            time.time(), run_id)
        return bool(status != "UPDATE 0")

    async def abort_requests(self, run_ids: Sequence[str]) -> list[str]:
        if not run_ids:
            return []
        rows = await self._fetch(
            "SELECT id FROM runs WHERE abort_requested IS NOT NULL AND id = ANY($1::text[])",
            list(run_ids))
        return [str(r[0]) for r in rows]


async def _append(
    conn: PoolConnectionProxy[Record], session_id: str, messages: Sequence[Message]
) -> None:
    if not messages:
        return
    now = time.time()
    # The upsert row-locks the session, so concurrent appends take turns on seq.
    await conn.execute(
        "INSERT INTO sessions (id, created_at, updated_at) VALUES ($1, $2, $2) "
        "ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at",
        session_id, now,
    )
    start = await conn.fetchval(
        "SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = $1", session_id
    )
    await conn.executemany(
        "INSERT INTO messages (session_id, seq, data, created_at) VALUES ($1, $2, $3, $4)",
        [(session_id, start + i, dumps(m), now) for i, m in enumerate(messages)],
    )
