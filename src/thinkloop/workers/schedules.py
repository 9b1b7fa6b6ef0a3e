"""Scheduled runs (OrcBot's heartbeat): cron schedules in PostgreSQL, fired by the workers.

A schedule is a row (``thinkloop_schedules``, in the store's schema): a cron expression
(``croniter``; a sixth field is seconds), the agent, the task, whose run it is, and when it is
next due. Every worker looks for due rows each second; a row is taken with ``FOR UPDATE SKIP
LOCKED`` and moved to its next due time in the same transaction as the run is queued, so a
due time fires once however many workers look (the run's id is derived from the due time,
and arq queues one job per id, should two ever try).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
from croniter import CroniterBadCronError, croniter

from thinkloop.core.errors import ConfigError

log = logging.getLogger("thinkloop.workers")
TABLE = """CREATE TABLE IF NOT EXISTS thinkloop_schedules (
    id TEXT PRIMARY KEY, cron TEXT NOT NULL, agent TEXT NOT NULL, task TEXT NOT NULL,
    user_id TEXT NOT NULL, session TEXT, next_at DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL, fired INTEGER NOT NULL DEFAULT 0);
ALTER TABLE thinkloop_schedules ADD COLUMN IF NOT EXISTS priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE thinkloop_schedules ADD COLUMN IF NOT EXISTS deliver_to TEXT NOT NULL DEFAULT ''"""
# Concurrent CREATE TABLE IF NOT EXISTS of one table can fail in PostgreSQL (a unique
# violation on pg_type): workers starting together on a fresh database create it in turn.
TABLE_LOCK = 0x746C5F7363686564  # "tl_sched"
TARGET = re.compile(r"[a-z][a-z0-9_-]{0,31}:[^\s:][^\s]{0,199}")


@dataclass(frozen=True)
class Schedule:
    id: str
    cron: str
    agent: str
    task: str
    user: str
    session: str | None
    next_at: float
    fired: int = 0
    priority: int = 0
    # Where its runs deliver their answer, and the only places they may message
    # (``platform:chat``, served by the workers' channels); empty: nowhere.
    deliver_to: tuple[str, ...] = ()

    @classmethod
    def of(cls, r: Any) -> Schedule:
        return cls(r["id"], r["cron"], r["agent"], r["task"], r["user_id"], r["session"],
                   float(r["next_at"]), int(r["fired"]), int(r["priority"]),
                   tuple(t for t in r["deliver_to"].split("\n") if t))

    def run_id(self) -> str:
        """The id of the run due at ``next_at``: the same for whoever fires it."""
        return hashlib.sha256(f"{self.id}@{self.next_at!r}".encode()).hexdigest()[:32]


def next_due(cron: str, after: float) -> float:
    try:
        return float(croniter(cron, after).get_next(float))
    except (CroniterBadCronError, ValueError, KeyError) as exc:
        raise ConfigError(f"bad cron expression {cron!r}: {exc}") from None


class Schedules:
    """The schedules of one PostgreSQL store (``PostgresStore.dsn`` and ``schema``)."""

    def __init__(self, dsn: str, schema: str | None = None) -> None:
        self.dsn, self.schema = dsn, schema
        self._ready = False
        # One connection, kept: a worker looks every second, and a new connection each time
        # (its TLS attempt included) cost more than the look.
        self._held: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[asyncpg.Connection]:
        async with self._lock:
            if self._held is None or self._held.is_closed():
                self._held = await asyncpg.connect(self.dsn, server_settings=(
                    {"search_path": self.schema} if self.schema else {}))
            conn = self._held
            try:
                if not self._ready:
                    async with conn.transaction():
                        await conn.execute("SELECT pg_advisory_xact_lock($1)", TABLE_LOCK)
                        await conn.execute(TABLE)
                    self._ready = True
                yield conn
            except BaseException:
                # Broken, or left inside a transaction: the next use connects again.
                self._held = None
                conn.terminate()
                raise

    async def aclose(self) -> None:
        async with self._lock:
            if self._held is not None:
                await self._held.close(timeout=5)
                self._held = None

    async def add(self, cron: str, agent: str, task: str, user: str,
                  session: str | None = None, priority: int = 0,
                  deliver_to: tuple[str, ...] = ()) -> Schedule:
        now = time.time()
        for t in deliver_to:
            if not TARGET.fullmatch(t):
                raise ConfigError(f"bad delivery target {t!r}: platform:chat, e.g. "
                                  "telegram:12345")
        s = Schedule(uuid.uuid4().hex[:12], cron, agent, task, user, session,
                     next_due(cron, now), 0, priority, tuple(deliver_to))
        async with self._conn() as c:
            await c.execute(
                "INSERT INTO thinkloop_schedules (id, cron, agent, task, user_id, session, "
                "next_at, created_at, fired, priority, deliver_to) "
                "VALUES ($1,$2,$3,$4,$5,$6,$7,$8,0,$9,$10)", s.id, cron, agent, task, user,
                session, s.next_at, now, priority, "\n".join(deliver_to))
        return s

    async def list(self) -> list[Schedule]:
        async with self._conn() as c:
            rows = await c.fetch("SELECT * FROM thinkloop_schedules ORDER BY created_at")
        return [Schedule.of(r) for r in rows]

    async def remove(self, schedule_id: str) -> bool:
        async with self._conn() as c:
            done = await c.execute("DELETE FROM thinkloop_schedules WHERE id = $1", schedule_id)
        return bool(done.endswith(" 1"))

    async def fire_due(self, queue: Any) -> int:
        """Queue a run for every due schedule (``await queue(schedule)``); how many."""
        now = time.time()
        async with self._conn() as c, c.transaction():
            rows = await c.fetch("SELECT * FROM thinkloop_schedules WHERE next_at <= $1 "
                                 "ORDER BY next_at LIMIT 50 FOR UPDATE SKIP LOCKED", now)
            for r in rows:
                s = Schedule.of(r)
                await queue(s)
                # Missed due times (no worker was up) fire once, not once each.
                await c.execute("UPDATE thinkloop_schedules SET next_at = $2, "
                                "fired = fired + 1 WHERE id = $1", s.id, next_due(s.cron, now))
        return len(rows)


async def heartbeat(schedules: Schedules, queue: Any, every_s: float = 1.0) -> None:
    """A worker's scheduler: fire what is due, every ``every_s``, until cancelled."""
    while True:
        try:
            await schedules.fire_due(queue)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("firing schedules failed")
        await asyncio.sleep(every_s)
