"""PostgreSQL backend for a fleet: asyncpg pool, advisory locks per session.

``schema`` puts every table in its own PostgreSQL schema (created if missing), which is how
tests and several deployments share one database. Session and run locks are advisory locks,
all held on one connection of the process's own outside the pool (:mod:`.pglocks`), so
waiting runs never starve the pool and a process uses at most ``max_pool`` + 1 connections
however many runs it holds. Connections are named ``thinkloop/SCHEMA/PID``
(``application_name``), so ``pg_stat_activity`` tells whose they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg
from asyncpg import Record
from asyncpg.pool import PoolConnectionProxy

from thinkloop.lifetime import close_at_loop_exit, forget_at_loop_exit
from thinkloop.store.base import StoreError, store_errors
from thinkloop.store.gateway import GatewayTables
from thinkloop.store.locks import session_key
from thinkloop.store.pglocks import AdvisoryLocks
from thinkloop.store.sql import POSTGRES, migrate, render
from thinkloop.store.sqljobs import JobTables
from thinkloop.store.sqlmanaged import ManagedTables
from thinkloop.store.sqlmemory import MemoryTables
from thinkloop.store.sqlruns import RunTables
from thinkloop.store.sqlsessions import SessionTables

log = logging.getLogger("thinkloop.store")
_MIGRATION_LOCK = 0x7468696E6B6C6F6F  # "thinkloo": serialises migrators across processes


class _Tx:
    """Statements on one connection, their placeholders spelled ``$1``."""

    def __init__(self, conn: asyncpg.Connection | PoolConnectionProxy[Record]) -> None:
        self.conn = conn

    async def execute(self, sql: str, *args: Any) -> None:
        await self.conn.execute(render(sql, POSTGRES.mark), *args)

    async def executemany(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        await self.conn.executemany(render(sql, POSTGRES.mark), rows)

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        return list(await self.conn.fetch(render(sql, POSTGRES.mark), *args))


async def _kept(conn: asyncpg.Connection) -> None:
    """A pooled connection's reset: nothing beyond asyncpg's own (it rolls back a
    transaction left open). The pool's connections run only the store's statements, none of
    which leaves session state behind (settings, LISTEN, cursors, session advisory locks:
    those live on the lock line, :mod:`~thinkloop.store.pglocks`), so asyncpg's reset query
    (``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL``) undid nothing, at a
    round trip per release: one in two of a run's store round trips."""


@store_errors((asyncpg.PostgresError, asyncpg.InterfaceError, OSError), "PostgreSQL store")
class PostgresStore(SessionTables, MemoryTables, RunTables, JobTables, GatewayTables,
                   ManagedTables):
    dialect = POSTGRES

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
        self._locks: AdvisoryLocks | None = None

    def _key(self, name: str) -> int:
        # Advisory locks are per database: the schema keeps deployments sharing one apart.
        return session_key(f"{self.schema or 'public'}:{name}")

    def _settings(self) -> dict[str, str]:
        name = f"thinkloop/{self.schema or 'public'}/{os.getpid()}"[:63]
        out = {"application_name": name}
        if self.schema:
            out["search_path"] = self.schema
        return out

    async def _connect_one(self) -> asyncpg.Connection:
        try:
            return await asyncpg.connect(self.dsn, server_settings=self._settings())
        except (OSError, asyncpg.PostgresError) as exc:
            raise StoreError(f"cannot connect to PostgreSQL: {exc}") from exc

    async def _open(self) -> asyncpg.Pool:
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
            self._locks = None
        async with self._open_lock:
            if self._pool is None:
                await self._prepare()
                self._pool = await asyncpg.create_pool(
                    self.dsn, min_size=1, max_size=self._max_pool,
                    server_settings=self._settings(), reset=_kept,
                )
                self._locks = AdvisoryLocks(self._connect_one)
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
                await migrate(_Tx(conn), "postgres", self._migrate_upto)
        finally:
            await conn.close()

    async def connect(self) -> None:
        """Connect (and migrate) now: an unreachable server fails here, before anything runs."""
        await self._open()

    async def aclose(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            forget_at_loop_exit(self)
            if self._locks is not None:
                await self._locks.aclose()
            await pool.close()

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        pool = await self._open()
        return list(await pool.fetch(render(sql, POSTGRES.mark), *args))

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[_Tx]:
        pool = await self._open()
        # Atomic under cancellation (tests/store/test_cancellation.py): asyncpg cancels the
        # statement on the server, the transaction rolls back, and the pool's release (which
        # a cancel cannot interrupt) resets the connection, or drops it when the reset fails.
        async with pool.acquire() as conn, conn.transaction():
            yield _Tx(conn)

    async def _write(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        # asyncpg's executemany is one pipeline and atomic: all the rows or none.
        await (await self._open()).executemany(render(sql, POSTGRES.mark), rows)

    async def _lock_line(self) -> AdvisoryLocks:
        await self._open()
        assert self._locks is not None
        return self._locks

    @contextlib.asynccontextmanager
    async def lock(self, session_id: str) -> AsyncIterator[None]:
        async with (await self._lock_line()).hold(self._key(session_id)):
            yield

    @contextlib.asynccontextmanager
    async def try_lock(self, key: str) -> AsyncIterator[bool]:
        """A lock across processes that is never waited for: yields whether it was taken."""
        async with (await self._lock_line()).attempt(self._key("try:" + key)) as taken:
            yield taken
