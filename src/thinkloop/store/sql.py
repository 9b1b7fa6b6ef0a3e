"""What the SQLite and PostgreSQL backends share: their statements, written once.

Every statement is written with ``{0}``-style placeholders (``{}`` where each is used once);
:func:`render` spells them the backend's way, numbered (``?1`` for SQLite, ``$1`` for
PostgreSQL), so one parameter can stand in a statement twice on both. The table mixins
(:mod:`~thinkloop.store.sqlsessions`, :mod:`~thinkloop.store.sqlmemory`,
:mod:`~thinkloop.store.sqlruns`, :mod:`~thinkloop.store.gateway`) run their statements
through the three primitives of :class:`SQLBase` that each backend implements; what the two
dialects spell differently is data, in :class:`SQLDialect`.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self

from thinkloop.store import schema


@functools.lru_cache(maxsize=1024)
def render(sql: str, mark: str) -> str:
    """``sql`` with its n-th placeholder spelled ``mark`` + n (``?1``, ``$1``); remembered,
    as the statements are a fixed few rendered at every write (issue 38's profile)."""
    count = sql.count("{")
    return sql.format(*(f"{mark}{i}" for i in range(1, count + 1))) if count else sql


def _json_list(values: Sequence[str]) -> str:
    return json.dumps(list(values))


@dataclass(frozen=True, slots=True)
class SQLDialect:
    """How one database spells what the other spells differently."""

    name: schema.Dialect  # the column types of the migrations
    mark: str  # a numbered parameter's prefix
    # After a read in a transaction that writes what it read: row locks on PostgreSQL; SQLite
    # needs none (BEGIN IMMEDIATE already holds the database's one write lock).
    for_update: str
    # "column <in_texts>" tests membership of a list of texts passed as one parameter
    # (``{}``), the value ``texts`` makes of the list: an array, or JSON for SQLite.
    in_texts: str
    texts: Callable[[Sequence[str]], Any]
    # Runs started at the same instant, newest first where the database knows which that is.
    run_order: str


SQLITE = SQLDialect(
    name="sqlite", mark="?", for_update="", in_texts="IN (SELECT value FROM json_each({}))",
    texts=_json_list, run_order="started_at DESC, rowid DESC",
)
POSTGRES = SQLDialect(
    name="postgres", mark="$", for_update=" FOR UPDATE", in_texts="= ANY({}::text[])",
    texts=list, run_order="started_at DESC, id",
)


def upsert(table: str, cols: str, keys: str) -> str:
    """Insert a row of ``cols`` (one parameter each), or replace the rest of the row that has
    the same ``keys``."""
    names = cols.split(", ")
    marks = ", ".join(f"{{{i}}}" for i in range(len(names)))
    rest = ", ".join(f"{c} = excluded.{c}" for c in names if c not in keys.split(", "))
    return (f"INSERT INTO {table} ({cols}) VALUES ({marks}) "
            f"ON CONFLICT ({keys}) DO UPDATE SET {rest}")


class Tx(Protocol):
    """One open transaction; statements as :func:`render` takes them."""

    async def execute(self, sql: str, *args: Any) -> None: ...

    async def executemany(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None: ...

    async def fetch(self, sql: str, *args: Any) -> list[Any]: ...


class SQLBase:
    """The primitives a backend provides; the table mixins build on them."""

    dialect: ClassVar[SQLDialect]

    async def _open(self) -> object:
        """Connect and migrate, once (the store does it on first use otherwise)."""
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        """One statement on its own (autocommitted); its rows."""
        raise NotImplementedError

    def _tx(self) -> AbstractAsyncContextManager[Tx]:
        """A transaction that takes the database's (SQLite) or the rows' locks for writing."""
        raise NotImplementedError

    async def _write(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """``sql`` once per row, with as few round trips as the backend allows: for rows on a
        run's path that are whole on their own."""
        raise NotImplementedError

    async def _write_all(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """``sql`` once per row, all the rows in one transaction."""
        async with self._tx() as tx:
            await tx.executemany(sql, rows)

    async def _write_many(self, stmts: Sequence[tuple[str, Sequence[tuple[Any, ...]]]]
                          ) -> None:
        """Several statements, each once per row, all in one transaction."""
        async with self._tx() as tx:
            for sql, rows in stmts:
                if rows:
                    await tx.executemany(sql, rows)

    async def schema_versions(self) -> list[int]:
        rows = await self._fetch("SELECT version FROM schema_migrations ORDER BY version")
        return [int(r[0]) for r in rows]


async def migrate(tx: Tx, dialect: schema.Dialect, upto: int | None) -> None:
    """Apply the migrations not yet applied, inside the caller's (locked) transaction."""
    await tx.execute(schema.statements(dialect, schema.CREATE_VERSIONS))
    applied = {int(r[0]) for r in await tx.fetch("SELECT version FROM schema_migrations")}
    for version, stmts in schema.pending(applied, upto):
        for sql in stmts:
            await tx.execute(schema.statements(dialect, sql))
        await tx.execute("INSERT INTO schema_migrations (version, applied_at) VALUES ({}, {})",
                         version, time.time())
