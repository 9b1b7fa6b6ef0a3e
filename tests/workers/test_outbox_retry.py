"""A worker's outbox write that Redis does not take (a connection cut, Redis restarting) is
tried again: its runs' streams get every event once, in order, and each end once, whether
the failed write reached Redis or not (real Redis on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from tests.workers.conftest import runs_in_redis

from thinkloop.workers.bus import Bus
from thinkloop.workers.execute import Outbox

pytestmark = pytest.mark.usefixtures("redis_up")


def _failing(bus: Bus, times: int, reached: bool) -> list[str]:
    """Make the bus's writes fail ``times`` times: after Redis ran them (``reached``: the
    reply was lost) or before."""
    failed: list[str] = []
    for name in ("write", "append_batches"):
        real = getattr(bus, name)

        async def flaky(*args: Any, _real: Any = real, _name: str = name) -> Any:
            if len(failed) < times:
                failed.append(_name)
                if reached:
                    await _real(*args)
                raise RedisConnectionError("Connection reset by peer")
            return await _real(*args)

        setattr(bus, name, flaky)
    return failed


@pytest.mark.parametrize("reached", [False, True], ids=["refused", "reply-lost"])
def test_a_failed_write_is_tried_again_and_nothing_is_lost_or_doubled(reached: bool) -> None:
    async def main() -> dict[str, Any]:
        async with runs_in_redis("a") as held:
            redis, bus, (row,), job = held.redis, held.bus, held.rows, held.job
            failed = _failing(bus, 2, reached)
            outbox = Outbox(bus, gap_s=0.001)
            for n in (1, 2, 3):
                outbox.add("a", n, b'{"id":%d}' % n)
            await asyncio.sleep(0.05)  # the first write has failed: two more come meanwhile
            for n in (4, 5):
                outbox.add("a", n, b'{"id":%d}' % n)
            await asyncio.wait_for(outbox.end(row, "completed", {"text": "A"}, ("w1", job)), 10)
            await outbox.aclose()
            stream = [(e.decode(), f) for e, f in await redis.xrange(bus.key("ev", "a"))]
            news = [k for _, f in await redis.xrange(bus.news) for k in f]
            got = await bus.get("a")
            return {"failed": failed, "stream": stream, "news": news,
                    "status": got.status if got else None, "running": await bus.running(),
                    "count": await redis.hget(bus.key("running"), "w1")}

    got = asyncio.run(main())
    assert len(got["failed"]) == 2
    assert got["stream"] == [(f"0-{n}", {b"e": b'{"id":%d}' % n}) for n in range(1, 6)] + [
        ("0-6", {b"end": b"completed"})]
    assert sorted(got["news"]) == sorted([b"a %d" % n for n in range(1, 6)] + [b"a 6"])
    assert got["status"] == "completed"
    assert got["running"] == {} and got["count"] == b"0"  # counted off once


def test_a_write_that_keeps_failing_gives_up_and_its_end_says_why() -> None:
    async def main() -> tuple[BaseException | None, float, list[str]]:
        async with runs_in_redis("b", job_held=False) as held:
            bus, (row,) = held.bus, held.rows
            failed = _failing(bus, 1000, False)
            outbox = Outbox(bus, gap_s=0.001, give_up_s=0.5)
            outbox.add("b", 1, b'{"id":1}')
            t0 = time.monotonic()
            try:
                await asyncio.wait_for(outbox.end(row, "completed", {}), 10)
                error: BaseException | None = None
            except RedisConnectionError as exc:
                error = exc
            took = time.monotonic() - t0
            await asyncio.wait_for(outbox.aclose(), 10)
            return error, took, failed

    error, took, failed = asyncio.run(main())
    assert isinstance(error, RedisConnectionError)
    assert 3 <= len(failed) <= 6  # 0.1, 0.2, 0.4 s apart, then past give_up_s
    assert took < 5
