"""A gateway follows a run it has just queued without reading its row back from Redis (the
stream is all a follower reads), nor its stream (the news kept since it was queued); any
other look at a run reads them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.workers.conftest import PG_DSN, REDIS_URL

from thinkloop.api import RunRecord
from thinkloop.core.settings import load_settings
from thinkloop.server.config import GatewayConfig
from thinkloop.workers.connect import redis_pool
from thinkloop.workers.fleet import RedisFleet

pytestmark = pytest.mark.usefixtures("redis_up")


class Records:
    dsn, schema = "", None

    async def save_runs(self, runs: Sequence[RunRecord]) -> None:
        pass


def test_a_run_queued_here_is_followed_without_reading_its_row(tmp_path: Path) -> None:
    prefix = "tlt-" + uuid.uuid4().hex[:12]
    settings = load_settings(env={"THINKLOOP_HOME": str(tmp_path), "THINKLOOP_QUEUE_URL": REDIS_URL,
                                  "THINKLOOP_DATABASE_URL": PG_DSN,
                                  "THINKLOOP_WORKER_PREFIX": prefix})

    async def main() -> list[Any]:
        fleet = RedisFleet(redis_pool(settings), Records(), settings,  # type: ignore[arg-type]
                           GatewayConfig())
        reads: list[str] = []
        counted = fleet.bus.counted

        async def counting(run_id: str) -> Any:
            reads.append(run_id)
            return await counted(run_id)

        fleet.bus.counted = counting  # type: ignore[method-assign]
        try:
            run = await fleet.submit("ann", "a", "task", None, True)
            other = await fleet.get(run.id, "bob", to_follow=True)  # not hers: read, refused
            first = await fleet.get(run.id, "ann", to_follow=True)  # as queued: no read
            again = await fleet.get(run.id, "ann", to_follow=True)  # a reconnect: read
            viewed = await fleet.get(run.id, "ann")
            return [reads == [run.id] * 3, other, first and first.id == run.id,
                    again and again.status, viewed and viewed.status]
        finally:
            keys = [k async for k in fleet.pool.scan_iter(match=f"{prefix}:*")]
            keys += [k async for k in fleet.pool.scan_iter(match=f"arq:*{run.id}")]
            if keys:
                await fleet.pool.delete(*keys)
            await fleet.aclose()
            await fleet.pool.connection_pool.disconnect()

    assert asyncio.run(main()) == [True, None, True, "queued", "queued"]


def _fleet(tmp_path: Path, prefix: str) -> RedisFleet:
    settings = load_settings(env={"THINKLOOP_HOME": str(tmp_path), "THINKLOOP_QUEUE_URL": REDIS_URL,
                                  "THINKLOOP_DATABASE_URL": PG_DSN,
                                  "THINKLOOP_WORKER_PREFIX": prefix})
    return RedisFleet(redis_pool(settings), Records(), settings,  # type: ignore[arg-type]
                      GatewayConfig())


async def _drop(fleet: RedisFleet, prefix: str, run_ids: list[str]) -> None:
    keys = [k async for k in fleet.pool.scan_iter(match=f"{prefix}:*")]
    for run_id in run_ids:
        keys += [k async for k in fleet.pool.scan_iter(match=f"arq:*{run_id}")]
    if keys:
        await fleet.pool.delete(*keys)
    await fleet.aclose()
    await fleet.pool.connection_pool.disconnect()


async def _as_worker(fleet: RedisFleet, run_id: str, n: int) -> None:
    """What a worker writes of a run: ``n`` events, then its end."""
    row = await fleet.bus.get(run_id)
    assert row is not None
    await fleet.bus.append_batches({run_id: (1, [b'{"id":%d}' % i for i in range(1, n + 1)])})
    await fleet.bus.finish(row, "completed", {})


def test_a_run_queued_here_streams_what_came_before_its_client_without_reading_its_stream(
        tmp_path: Path) -> None:
    """The gateway keeps a run's events from before it is queued: its client's stream starts
    from them (no read of the run's stream), and a second follower, or a run whose client
    came too late, reads the stream and gets the same."""
    prefix = "tlt-" + uuid.uuid4().hex[:12]

    async def main() -> list[Any]:
        fleet = _fleet(tmp_path, prefix)
        fleet.tail.expect_s = 0.5
        ranges: list[str] = []
        xrange = fleet.pool.xrange

        async def counting(key: str, **kw: Any) -> Any:
            ranges.append(key)
            return await xrange(key, **kw)

        fleet.pool.xrange = counting  # type: ignore[method-assign]
        ids: list[str] = []
        try:
            run = await fleet.submit("ann", "a", "task", None, True)
            late = await fleet.submit("ann", "a", "task", None, True)
            ids += [run.id, late.id]
            await _as_worker(fleet, run.id, 3)
            await _as_worker(fleet, late.id, 2)
            first = await fleet.get(run.id, "ann", to_follow=True)
            assert first is not None
            got = [b async for b in first.follow_batches()]
            read_first = list(ranges)
            again = await fleet.get(run.id, "ann", to_follow=True)
            assert again is not None
            whole = [b async for b in again.follow_batches()]
            await asyncio.sleep(1.6)  # the late run's kept events are dropped meanwhile
            followed = await fleet.get(late.id, "ann", to_follow=True)
            assert followed is not None
            late_got = [b async for b in followed.follow_batches()]
            return [read_first, got, await first.end_status(), whole, late_got,
                    len(ranges), fleet.tail._expected]
        finally:
            await _drop(fleet, prefix, ids)

    events = [(i, b'{"id":%d}' % i) for i in range(1, 4)]
    assert asyncio.run(main()) == [[], [events], "completed", [events],
                                   [[(1, b'{"id":1}'), (2, b'{"id":2}')]], 2, {}]


def test_the_events_that_come_with_a_runs_end_go_out_with_its_end_frame(tmp_path: Path) -> None:
    """One socket write for a run's last events and its end frame, when they come together."""
    from types import SimpleNamespace

    from thinkloop.server.sse import Last, Streams
    from thinkloop.server.streams import event_stream

    prefix = "tlt-" + uuid.uuid4().hex[:12]

    async def main() -> list[bytes]:
        fleet = _fleet(tmp_path, prefix)
        ids: list[str] = []
        try:
            run = await fleet.submit("ann", "a", "task", None, True)
            ids.append(run.id)
            await _as_worker(fleet, run.id, 2)
            await asyncio.sleep(0.2)  # the gateway has read both (they came together)
            followed = await fleet.get(run.id, "ann", to_follow=True)
            assert followed is not None
            gw = SimpleNamespace(config=SimpleNamespace(no_auth=True), streams=Streams())
            stream = event_stream(gw, followed, 0, None)  # type: ignore[arg-type]
            return [c async for c in stream.chunks]
        finally:
            await _drop(fleet, prefix, ids)

    chunks = asyncio.run(main())
    assert len(chunks) == 1 and isinstance(chunks[0], Last)
    assert chunks[0].count(b"event: event\r\n") == 2 and b"event: end\r\n" in chunks[0]
    assert chunks[0].endswith(b'"status":"completed"}\r\n\r\n')


def test_the_news_reader_keeps_its_connection_between_followers(tmp_path: Path) -> None:
    """The reader stops when nobody follows anything and starts again with the next follower,
    on the connection it had (a connection, and a connect's round trips, per quiet spell was
    one per run at a low rate); after the gateway closes, it is closed."""
    prefix = "tlt-" + uuid.uuid4().hex[:12]

    async def main() -> list[Any]:
        fleet = _fleet(tmp_path, prefix)
        pool = fleet.pool.connection_pool
        made: list[Any] = []
        make = pool.make_connection

        def counting() -> Any:
            made.append(make())
            return made[-1]

        pool.make_connection = counting  # type: ignore[method-assign]
        ids: list[str] = []
        got, made_after, readers = [], [], []
        try:
            for n in (2, 3):  # two runs, one after the other: the reader stops in between
                run = await fleet.submit("ann", "a", "task", None, True)
                ids.append(run.id)
                await _as_worker(fleet, run.id, n)
                followed = await fleet.get(run.id, "ann", to_follow=True)
                assert followed is not None
                got.append([b async for b in followed.follow_batches()])
                readers.append(getattr(fleet.tail, "_conn", None))
                assert fleet.tail._task is not None
                await asyncio.wait_for(fleet.tail._task, 5)  # nobody follows: it stops
                made_after.append(len(made))
        finally:
            await _drop(fleet, prefix, ids)
        return [[len(b) for batches in got for b in batches], made_after[1] - made_after[0],
                readers[0] is readers[1], readers[0] is not None and readers[0].is_connected]

    # The second run made no connection; the reader's one is closed with the gateway.
    assert asyncio.run(main()) == [[2, 3], 0, True, False]
