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


def test_commands_through_the_pool_are_packed_by_hiredis_and_reach_redis_intact(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import hiredis

    packed: list[tuple[Any, ...]] = []
    real = hiredis.pack_command

    def counted(args: tuple[Any, ...]) -> bytes:
        packed.append(args)
        return real(args)

    monkeypatch.setattr(hiredis, "pack_command", counted)
    key = "thinkloop-test:pools:packing"
    values = ["é 漢字 \u0000 end", b"\xff\xfe not UTF-8", 12345678901234567890, 0.1 + 0.2]

    async def main() -> list[Any]:
        redis = _pool()
        try:
            async with redis.pipeline(transaction=True) as pipe:
                pipe.delete(key)
                pipe.rpush(key, *values)
                pipe.expire(key, 10)
                await pipe.execute()
            echoed = await redis.eval("return ARGV", 0, *values, "x" * 70_000)
            return [await redis.lrange(key, 0, -1), echoed]
        finally:
            await redis.aclose()
            await redis.connection_pool.disconnect()

    stored, echoed = asyncio.run(main())
    encoded = ["é 漢字 \u0000 end".encode(), b"\xff\xfe not UTF-8", b"12345678901234567890",
               repr(0.1 + 0.2).encode()]
    assert stored == encoded
    assert echoed == [*encoded, b"x" * 70_000]
    assert any(args[0] == b"EVAL" for args in packed)


@pytest.mark.parametrize("args", [
    ("SET", "k", "é\U0001f600", "EX", 10),
    ("CONFIG GET", "maxmemory"),
    (b"CLIENT SETNAME", b"n"),
    ("EVALSHA", "a" * 40, 2, "k1", "k2", 1.5, -7, 1e20, memoryview(b"view"), b"x" * 9000),
])
def test_hiredis_packs_the_bytes_redis_py_packs(args: tuple[Any, ...]) -> None:
    from redis.asyncio.connection import Connection

    ours = _pool().connection_pool.make_connection()
    assert b"".join(ours.pack_command(*args)) == b"".join(Connection().pack_command(*args))


@pytest.mark.parametrize("bad", [True, None, bytearray(b"b"), object()])
def test_an_argument_redis_py_refuses_is_refused_as_it_refuses_it(bad: object) -> None:
    from redis.exceptions import DataError

    ours = _pool().connection_pool.make_connection()
    with pytest.raises(DataError):
        ours.pack_command("SET", "k", bad)


def test_a_pool_with_another_encoding_keeps_redis_py_packing() -> None:
    from thinkloop.workers.connect import ReadyPool

    latin = ReadyPool.from_url("redis://127.0.0.1:6379/0", encoding="latin-1")
    assert b"".join(latin.make_connection().pack_command("SET", "k", "é")).endswith(
        b"$1\r\n\xe9\r\n")


def test_a_hiredis_that_cannot_pack_leaves_redis_py_packing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import hiredis
    from redis.asyncio.connection import Connection

    monkeypatch.delattr(hiredis, "pack_command")
    assert _pool().connection_pool.connection_class is Connection
