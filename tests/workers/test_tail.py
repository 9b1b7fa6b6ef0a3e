"""A gateway's reader of the fleet's news when Redis goes away: it reads again, its
followers read their runs' streams from where they are, and only a Redis gone for good
(or never there) reaches them as an error (real Redis on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import socket
import uuid
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from tests.workers.conftest import REDIS_URL

from thinkloop.workers.bus import Bus
from thinkloop.workers.tail import Tail

pytestmark = pytest.mark.usefixtures("redis_up")


def test_a_follower_gets_every_event_once_across_a_cut_of_the_readers_connection() -> None:
    prefix = f"tlt-{uuid.uuid4().hex[:8]}"

    async def main() -> list[int]:
        redis = Redis.from_url(REDIS_URL)
        bus = Bus(redis, prefix)
        tail = Tail(redis, bus.news, bus.key("ev", ""), block_ms=200)
        try:
            await bus.append_batches({"r": (1, [b'{"id":1}', b'{"id":2}'])})
            seen: list[int] = []

            async def follow() -> None:
                async for batch in tail.follow("r", 0):
                    seen.extend(n for n, _ in batch)
                    if seen[-1] >= 6:
                        return

            following = asyncio.create_task(follow())
            await asyncio.sleep(0.1)
            await redis.execute_command("CLIENT KILL TYPE normal")  # the reader's too
            await bus.append_batches({"r": (3, [b'{"id":3}', b'{"id":4}'])})
            await asyncio.sleep(0.3)
            await redis.execute_command("CLIENT KILL TYPE normal")
            await bus.append_batches({"r": (5, [b'{"id":5}', b'{"id":6}'])})
            await asyncio.wait_for(following, 10)
            return seen
        finally:
            await tail.aclose()
            await redis.delete(*[k async for k in redis.scan_iter(f"{prefix}*")])
            await redis.aclose()

    assert asyncio.run(main()) == [1, 2, 3, 4, 5, 6]


def test_with_no_redis_a_follower_gets_the_error_at_once() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there

    async def main() -> Any:
        redis = Redis.from_url(f"redis://127.0.0.1:{port}/0")
        tail = Tail(redis, "news", "ev:")
        try:
            async for _ in tail.follow("r", 0):
                pass
        finally:
            await tail.aclose()
            await redis.aclose()

    with pytest.raises(RedisConnectionError):
        asyncio.run(asyncio.wait_for(main(), 10))
