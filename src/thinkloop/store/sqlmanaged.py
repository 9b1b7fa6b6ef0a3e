"""Managed mode, per user and per agent (migration 9): an open agent's bootstrap files for
each of its users, and the quartermaster's counts of which tool followed which.

Both durable backends mix :class:`ManagedTables` in. A user's files are keyed by agent AND
user: every read names both, so no query can return another user's file.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from thinkloop.store.sql import SQLBase


@runtime_checkable
class UserFiles(Protocol):
    """An open agent's bootstrap files, one set per user (GoClaw's per-user context)."""

    async def seed_user_files(self, agent: str, user_id: str,
                              files: Mapping[str, str]) -> list[str]:
        """Write the files the user does not have yet; the names written (none: all were)."""
        ...

    async def user_files(self, agent: str, user_id: str) -> dict[str, str]: ...

    async def put_user_file(self, agent: str, user_id: str, name: str,
                            content: str) -> None: ...

    async def delete_user_file(self, agent: str, user_id: str, name: str) -> bool: ...


@runtime_checkable
class ToolFollows(Protocol):
    """How often, in an agent's finished runs, one tool was called right after another."""

    async def add_tool_follows(self, agent: str, pairs: Sequence[tuple[str, str]]) -> None:
        """Count one more run for each (previous tool, next tool) pair."""
        ...

    async def tool_follows(self, agent: str, prev: str) -> dict[str, int]:
        """Next tool -> the runs in which it followed ``prev``."""
        ...


class ManagedTables(SQLBase):
    """Mixed into SQLiteStore and PostgresStore."""

    async def seed_user_files(self, agent: str, user_id: str,
                              files: Mapping[str, str]) -> list[str]:
        now = time.time()
        created = []
        async with self._tx() as tx:
            for name, content in files.items():
                rows = await tx.fetch(
                    "INSERT INTO agent_user_files (agent, user_id, name, content, updated_at) "
                    "VALUES ({}, {}, {}, {}, {}) ON CONFLICT (agent, user_id, name) DO NOTHING "
                    "RETURNING name", agent, user_id, name, content, now)
                created += [str(r[0]) for r in rows]
        return created

    async def user_files(self, agent: str, user_id: str) -> dict[str, str]:
        rows = await self._fetch(
            "SELECT name, content FROM agent_user_files WHERE agent = {} AND user_id = {} "
            "ORDER BY name", agent, user_id)
        return {str(r[0]): str(r[1]) for r in rows}

    async def put_user_file(self, agent: str, user_id: str, name: str, content: str) -> None:
        await self._fetch(
            "INSERT INTO agent_user_files (agent, user_id, name, content, updated_at) "
            "VALUES ({}, {}, {}, {}, {}) ON CONFLICT (agent, user_id, name) DO UPDATE SET "
            "content = excluded.content, updated_at = excluded.updated_at",
            agent, user_id, name, content, time.time())

    async def delete_user_file(self, agent: str, user_id: str, name: str) -> bool:
        rows = await self._fetch(
            "DELETE FROM agent_user_files WHERE agent = {} AND user_id = {} AND name = {} "
            "RETURNING name", agent, user_id, name)
        return bool(rows)

    async def add_tool_follows(self, agent: str, pairs: Sequence[tuple[str, str]]) -> None:
        if not pairs:
            return
        await self._write_all(
            "INSERT INTO tool_follows (agent, prev, next, runs) VALUES ({}, {}, {}, 1) "
            "ON CONFLICT (agent, prev, next) DO UPDATE SET runs = tool_follows.runs + 1",
            [(agent, prev, nxt) for prev, nxt in pairs])

    async def tool_follows(self, agent: str, prev: str) -> dict[str, int]:
        rows = await self._fetch(
            "SELECT next, runs FROM tool_follows WHERE agent = {} AND prev = {} "
            "ORDER BY runs DESC, next", agent, prev)
        return {str(r[0]): int(r[1]) for r in rows}
