"""Both durable backends behind one fixture: every contract test runs on SQLite and PostgreSQL.

PostgreSQL tests get a schema of their own (unique per test, dropped afterwards) in the
``test`` database on 127.0.0.1:5432; set THINKLOOP_TEST_PG to use another server.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from thinkloop.store import MemoryStore, PostgresStore, SQLiteStore, open_store

PG_DSN = os.environ.get("THINKLOOP_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


async def _pg_available() -> bool:
    import asyncpg

    try:
        conn = await asyncpg.connect(PG_DSN, timeout=3)
    except (OSError, asyncpg.PostgresError):
        return False
    await conn.close()
    return True


async def drop_schema(schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_DSN)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def new_schema() -> str:
    return f"tl_test_{os.getpid()}_{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def _require_pg() -> None:
    if not await _pg_available():
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is not reachable at {PG_DSN}")
        pytest.skip(f"PostgreSQL is not reachable at {PG_DSN}")


@contextlib.asynccontextmanager
async def fresh_store_url(backend: str, sqlite_file: Path) -> AsyncIterator[str]:
    """A URL for ``open_store``: ``sqlite_file``, or a fresh PostgreSQL schema, dropped after."""
    if backend == "sqlite":
        yield str(sqlite_file)
        return
    await _require_pg()
    schema = new_schema()
    try:
        yield f"{PG_DSN}?schema={schema}"
    finally:
        await drop_schema(schema)


@pytest_asyncio.fixture(loop_scope="function")
async def store_url(backend: str, tmp_path: Path) -> AsyncIterator[str]:
    """A URL for ``open_store``: a fresh SQLite file, or a fresh PostgreSQL schema."""
    async with fresh_store_url(backend, tmp_path / "thinkloop.db") as url:
        yield url


@pytest_asyncio.fixture(loop_scope="function")
async def store(store_url: str) -> AsyncIterator[SQLiteStore | PostgresStore]:
    s = open_store(store_url)
    yield s
    await s.aclose()


@pytest_asyncio.fixture(loop_scope="function")
async def sqlite(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    """A connected SQLite store of its own (tests of what only SQLite does)."""
    s = SQLiteStore(tmp_path / "runs.db")
    await s.connect()
    yield s
    await s.aclose()


@pytest_asyncio.fixture(loop_scope="function", params=["memory", "sqlite", "postgres"])
async def run_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[MemoryStore | SQLiteStore | PostgresStore]:
    """Every store that keeps run records: the in-process one as well as the durable two."""
    if request.param == "memory":
        yield MemoryStore()
        return
    if request.param == "sqlite":
        s = open_store(tmp_path / "runs.db")
    else:
        await _require_pg()
        schema = new_schema()
        s = open_store(f"{PG_DSN}?schema={schema}")
    try:
        yield s
    finally:
        await s.aclose()
        if request.param == "postgres":
            await drop_schema(schema)
