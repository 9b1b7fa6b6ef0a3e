"""The PostgreSQL store's pooled connections go back to the pool without asyncpg's reset
query (a round trip per release that undid nothing: see ``postgres._kept``), and still
come back out of a failed transaction clean."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from tests.store.conftest import PG_DSN, _require_pg, drop_schema, new_schema

from thinkloop.store.postgres import PostgresStore


async def test_a_released_connection_costs_no_reset_query(
        monkeypatch: pytest.MonkeyPatch) -> None:
    await _require_pg()
    resets: list[Any] = []
    real = asyncpg.connection.Connection.reset

    async def counted(self: Any, **kw: Any) -> None:
        resets.append(self)
        await real(self, **kw)

    monkeypatch.setattr(asyncpg.connection.Connection, "reset", counted)
    schema = new_schema()
    store = PostgresStore(PG_DSN, schema=schema)
    try:
        for i in range(3):
            await store.load(f"s{i}")
            assert await store.abort_requests([f"r{i}"]) == []
        with pytest.raises(asyncpg.PostgresError):  # a failed transaction is rolled back
            async with store._tx() as tx:
                await tx.execute("SELECT * FROM no_such_table")
        pool = await store._open()
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT 1") == 1
    finally:
        await store.aclose()
        await drop_schema(schema)
    assert resets == []
