"""How gateways and workers reach the queue: one Redis client per process, JSON jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol
from urllib.parse import urlsplit

import orjson
from arq.connections import ArqRedis
from redis._parsers import _AsyncHiredisParser
from redis.asyncio import ConnectionPool
from redis.connection import HiredisRespSerializer
from redis.utils import HIREDIS_AVAILABLE

from thinkloop.api import AbortRequests, CheckpointStore, RunRecord, RunRecords
from thinkloop.core.errors import ConfigError
from thinkloop.core.settings import Settings
from thinkloop.server.gateway import Backend

JOB = "thinkloop.run"  # the arq function that executes a queued run


class FleetStore(Backend, RunRecords, CheckpointStore, AbortRequests, Protocol):
    """What the fleet needs of the shared store (the PostgreSQL store has it all)."""

    async def save_runs(self, runs: Sequence[RunRecord]) -> None:
        """Several runs' records at once (a gateway's queued runs)."""
        ...


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


class ReadyPool(ConnectionPool):
    """redis-py's pool, handing out a connection with nothing to read without reading it,
    whose commands hiredis packs.

    redis-py 5 makes sure of that with a read under a zero timeout, a cancelled read per
    command: a worker's busiest Redis cost after the writes. redis 8 looks at the buffers
    instead (redis-py PR #4063); arq pins redis < 6, so this pool does it here. A
    connection with anything buffered, at its end or not hiredis's goes through redis-py's
    own check (which reconnects it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connection_class = _packed_by_hiredis(self.connection_class,
                                                   self.connection_kwargs)

    async def ensure_connection(self, connection: Any) -> None:
        if not _quiet(connection):
            await super().ensure_connection(connection)


def _quiet(connection: Any) -> bool:
    """Connected, and nothing the server sent waits in the stream or the parser."""
    stream, parser = getattr(connection, "_reader", None), getattr(connection, "_parser", None)
    if (stream is None or not isinstance(parser, _AsyncHiredisParser) or parser._reader is None
            or not parser._connected):
        return False
    return not (stream._buffer or stream.at_eof() or stream.exception() is not None
                or parser._reader.has_data())


class _HiredisPacking:
    """redis-py's synchronous connections pack commands with hiredis when it is there
    (``HiredisRespSerializer``); its asyncio ones, in redis 5, in Python, argument by
    argument: 50 us for an outbox write of 20 events, 7 with hiredis (the same bytes)."""

    _packer = HiredisRespSerializer()

    def pack_command(self, *args: Any) -> list[bytes]:
        packed: list[bytes] = self._packer.pack(*args)
        return packed


def _packed_by_hiredis(cls: type[Any], kwargs: dict[str, Any]) -> type[Any]:
    """``cls`` packing with hiredis, where it packs the same bytes: a hiredis that packs is
    installed (2.1 and later) and strings go as strict UTF-8 (what hiredis writes); else
    ``cls`` as it is."""
    if (not HIREDIS_AVAILABLE or kwargs.get("encoding", "utf-8").lower() not in ("utf-8", "utf8")
            or kwargs.get("encoding_errors", "strict") != "strict"):
        return cls
    import hiredis

    if not hasattr(hiredis, "pack_command"):
        return cls
    return type(cls.__name__, (_HiredisPacking, cls), {})


def redis_pool(settings: Settings) -> ArqRedis:
    """A client on the queue (it connects on first use); jobs are JSON, never pickles."""
    pool = ReadyPool.from_url(check_store(settings))
    return ArqRedis(pool, job_serializer=orjson.dumps, job_deserializer=orjson.loads,
                    default_queue_name=f"{settings.worker.prefix}:queue")
