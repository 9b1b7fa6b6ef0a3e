"""How gateways and workers reach the queue: one Redis client per process, JSON jobs."""

from __future__ import annotations

from typing import Protocol
from urllib.parse import urlsplit

import orjson
from arq.connections import ArqRedis
from redis.asyncio import ConnectionPool

from thinkloop.api import AbortRequests, CheckpointStore, RunRecords
from thinkloop.core.errors import ConfigError
from thinkloop.core.settings import Settings
from thinkloop.server.gateway import Backend

JOB = "thinkloop.run"  # the arq function that executes a queued run


class FleetStore(Backend, RunRecords, CheckpointStore, AbortRequests, Protocol):
    """What the fleet needs of the shared store (the PostgreSQL store has it all)."""


def check_store(settings: Settings) -> str:
    """The queue's URL; a queue without PostgreSQL is one clear error (workers on other
    machines cannot share a SQLite file)."""
    if not settings.queue_url:
        raise ConfigError("no queue: set THINKLOOP_QUEUE_URL=redis://HOST:6379/0 or --queue")
    if urlsplit(settings.queue_url).scheme not in ("redis", "rediss", "unix"):
        raise ConfigError(f"the queue is a redis:// URL, not {settings.queue_url!r}")
    if urlsplit(settings.store_location).scheme not in ("postgresql", "postgres"):
        raise ConfigError("a queue needs the PostgreSQL store (workers on other machines share "
                          "it): set THINKLOOP_DATABASE_URL=postgresql://...")
    return settings.queue_url


def redis_pool(settings: Settings) -> ArqRedis:
    """A client on the queue (it connects on first use); jobs are JSON, never pickles."""
    pool = ConnectionPool.from_url(check_store(settings))
    return ArqRedis(pool, job_serializer=orjson.dumps, job_deserializer=orjson.loads,
                    default_queue_name=f"{settings.worker.prefix}:queue")
