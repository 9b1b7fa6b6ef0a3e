"""The schedules' table on a fresh database, with workers starting together (real
PostgreSQL on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
from tests.workers.conftest import PG_DSN

from thinkloop.workers.schedules import Schedules


def test_workers_starting_together_on_a_fresh_database_each_get_the_schedules_table() -> None:
    # PostgreSQL lets concurrent CREATE TABLE IF NOT EXISTS of one table fail (a unique
    # violation on pg_type): two workers started at once logged that from their heartbeat.
    schema = "sched_" + uuid.uuid4().hex[:8]

    async def main() -> list[object]:
        admin = await asyncpg.connect(PG_DSN)
        await admin.execute(f'CREATE SCHEMA "{schema}"')
        many = [Schedules(PG_DSN, schema) for _ in range(8)]
        try:
            return await asyncio.gather(*(s.list() for s in many), return_exceptions=True)
        finally:
            for s in many:
                await s.aclose()
            await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
            await admin.close()

    for _ in range(3):
        assert asyncio.run(main()) == [[]] * 8
