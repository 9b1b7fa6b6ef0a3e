"""A gateway follows a run it has just queued without reading its row back from Redis (the
stream is all a follower reads); any other look at a run reads it."""

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
