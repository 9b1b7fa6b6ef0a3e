"""The fleet's clients of Redis and PostgreSQL spend no round trip or read on a connection
that is known to be ready (real Redis and PostgreSQL on 127.0.0.1)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.workers.conftest import REDIS_URL

from thinkloop.core.settings import load_settings
from thinkloop.workers.connect import redis_pool


def _pool() -> Any:
    return redis_pool(load_settings(env={
        "THINKLOOP_QUEUE_URL": REDIS_URL,
        "THINKLOOP_DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/test"}))


def _count_checks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every read-to-check that redis-py does on a connection it hands out."""
    from redis._parsers import _AsyncHiredisParser

    checks: list[object] = []
    real = _AsyncHiredisParser.can_read_destructive

    async def counted(self: Any) -> bool:
        checks.append(self)
        return bool(await real(self))

    monkeypatch.setattr(_AsyncHiredisParser, "can_read_destructive", counted)
    return checks


def test_a_ready_redis_connection_is_handed_out_without_a_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    checks = _count_checks(monkeypatch)

    async def main() -> None:
        redis = _pool()
        try:
            assert await redis.ping()  # a new connection: redis-py's own check
            checks.clear()
            for _ in range(5):
                assert await redis.ping()
        finally:
            await redis.aclose()
            await redis.connection_pool.disconnect()

    asyncio.run(main())
    assert checks == []


def test_a_redis_connection_with_bytes_left_unread_is_checked_and_replaced(
        monkeypatch: pytest.MonkeyPatch) -> None:
    checks = _count_checks(monkeypatch)

    async def main() -> None:
        redis = _pool()
        try:
            assert await redis.ping()
            conn = redis.connection_pool._available_connections[-1]
            conn._reader.feed_data(b"+STALE\r\n")  # a reply nobody read
            checks.clear()
            assert await redis.set("thinkloop-test:pools", b"1", ex=10)
            assert await redis.get("thinkloop-test:pools") == b"1"
        finally:
            await redis.aclose()
            await redis.connection_pool.disconnect()

    asyncio.run(main())
    assert len(checks) >= 1
