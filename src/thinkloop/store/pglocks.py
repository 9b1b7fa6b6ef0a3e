"""Many PostgreSQL advisory locks held on one connection per process.

A session-level advisory lock belongs to the connection that took it, and one connection can
hold any number of them. So a process keeps a single "lock line" connection and takes every
run lock and session lock on it, instead of a connection per lock: 200 runs in progress cost
one connection, not 200 to 400 (PostgreSQL's default ``max_connections`` is 100).

A waiter never holds a connection: it tries ``pg_try_advisory_lock`` and sleeps between
tries (inside a process waiters still queue in order on :class:`LocalLocks`). Statements on
the line are short and one at a time. Advisory locks are re-entrant on their connection, so
keys held in this process are tracked here and refused to a second taker. If the line dies,
so do its locks (as before, a process that dies frees its locks); the next use opens a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg

from thinkloop.store.locks import LocalLocks

log = logging.getLogger("thinkloop.store")


class AdvisoryLocks:
    """Advisory locks by 64-bit key, multiplexed on one connection opened by ``connect``."""

    def __init__(self, connect: Callable[[], Awaitable[asyncpg.Connection]],
                 poll_s: float = 0.005, max_poll_s: float = 0.1) -> None:
        self._connect = connect
        self._poll_s, self._max_poll_s = poll_s, max_poll_s
        self._conn: asyncpg.Connection | None = None
        self._io = asyncio.Lock()  # one statement at a time on the line
        self._held: dict[int, asyncpg.Connection | None] = {}  # key -> line it is held on
        self._local = LocalLocks()

    async def _line(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            lost = [k for k, c in self._held.items() if c is not None and c is self._conn]
            if lost:
                log.warning("the advisory lock connection closed: %d locks lost", len(lost))
            self._conn = await self._connect()
        return self._conn

    async def _try(self, key: int) -> bool:
        async with self._io:
            conn = await self._line()
            taken = bool(await conn.fetchval("SELECT pg_try_advisory_lock($1)", key))
            if taken:
                self._held[key] = conn
            return taken

    async def _take(self, key: int) -> bool:
        """One try, whole or not at all: a cancelled try that took the lock gives it back."""
        self._held[key] = None  # reserved: nobody else in this process tries it meanwhile
        attempt = asyncio.ensure_future(self._try(key))
        try:
            taken = await asyncio.shield(attempt)
        except asyncio.CancelledError:
            await asyncio.shield(self._undo(attempt, key))
            raise
        except BaseException:
            self._held.pop(key, None)
            raise
        if not taken:
            self._held.pop(key, None)
        return taken

    async def _undo(self, attempt: asyncio.Future[bool], key: int) -> None:
        with contextlib.suppress(Exception):
            if await attempt:
                await self._release(key)
        self._held.pop(key, None)

    async def _release(self, key: int) -> None:
        conn = self._held.pop(key, None)
        if conn is None or conn.is_closed():
            return  # its line died, and the lock with it
        async with self._io:
            await conn.execute("SELECT pg_advisory_unlock($1)", key)

    @contextlib.asynccontextmanager
    async def hold(self, key: int) -> AsyncIterator[None]:
        """Wait for ``key`` (in order of arrival inside the process) and hold it."""
        async with self._local.hold(str(key)):
            delay = self._poll_s
            while key in self._held or not await self._take(key):
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_poll_s)
            try:
                yield
            finally:
                await asyncio.shield(self._release(key))

    @contextlib.asynccontextmanager
    async def attempt(self, key: int) -> AsyncIterator[bool]:
        """Take ``key`` only if it is free anywhere; yields whether it was taken."""
        if key in self._held:
            yield False
            return
        taken = await self._take(key)
        try:
            yield taken
        finally:
            if taken:
                await asyncio.shield(self._release(key))

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        self._held.clear()
        if conn is not None and not conn.is_closed():
            await conn.close()
