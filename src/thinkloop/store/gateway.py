"""The gateway's tables (migration 6): API keys and agent definitions.

Both durable backends mix :class:`GatewayTables` in; every method is one statement through the
backend's own ``_fetch`` (autocommitted), written once as :mod:`thinkloop.store.sql` says.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from thinkloop.store.sql import SQLBase


@dataclass(frozen=True, slots=True)
class ApiKeyRecord:
    """A key as stored: never the key itself, only its hash."""

    id: str
    user_id: str
    roles: tuple[str, ...]
    created_at: float
    revoked_at: float | None = None


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    name: str
    definition: str  # JSON text of the agent's settings
    updated_at: float


@dataclass(frozen=True, slots=True)
class SessionHandoff:
    """The agent that answers a session's next turns, and which agent handed it over."""

    session_id: str
    agent: str
    from_agent: str
    reason: str
    updated_at: float


@runtime_checkable
class GatewayStore(Protocol):
    async def add_api_key(self, key_id: str, key_hash: str, user_id: str,
                          roles: Sequence[str]) -> None: ...

    async def api_key(self, key_hash: str) -> ApiKeyRecord | None:
        """The live (not revoked) key with this hash."""
        ...

    async def list_api_keys(self) -> list[ApiKeyRecord]: ...

    async def revoke_api_key(self, key_id: str) -> bool: ...

    async def put_agent(self, name: str, definition: str) -> None: ...

    async def agent_definition(self, name: str) -> AgentDefinition | None: ...

    async def agent_definitions(self) -> list[AgentDefinition]: ...

    async def delete_agent(self, name: str) -> bool: ...

    async def put_agent_file(self, agent: str, name: str, content: str) -> None: ...

    async def agent_files(self, agent: str) -> dict[str, str]: ...

    async def delete_agent_file(self, agent: str, name: str) -> bool: ...

    async def set_handoff(self, session_id: str, agent: str, from_agent: str,
                          reason: str) -> None: ...

    async def handoff(self, session_id: str) -> SessionHandoff | None: ...


_KEY_COLS = "id, user_id, roles, created_at, revoked_at"


def _key(row: Any) -> ApiKeyRecord:
    roles = tuple(r for r in str(row[2]).split(",") if r)
    return ApiKeyRecord(str(row[0]), str(row[1]), roles, float(row[3]),
                        None if row[4] is None else float(row[4]))


def _agent(row: Any) -> AgentDefinition:
    return AgentDefinition(str(row[0]), str(row[1]), float(row[2]))


class GatewayTables(SQLBase):
    """Mixed into SQLiteStore and PostgresStore."""

    async def add_api_key(self, key_id: str, key_hash: str, user_id: str,
                          roles: Sequence[str]) -> None:
        await self._fetch(
            "INSERT INTO api_keys (id, key_hash, user_id, roles, created_at) "
            "VALUES ({}, {}, {}, {}, {})", key_id, key_hash, user_id, ",".join(roles), time.time())

    async def api_key(self, key_hash: str) -> ApiKeyRecord | None:
        rows = await self._fetch(
            f"SELECT {_KEY_COLS} FROM api_keys WHERE key_hash = {{}} AND revoked_at IS NULL",
            key_hash)
        return _key(rows[0]) if rows else None

    async def list_api_keys(self) -> list[ApiKeyRecord]:
        rows = await self._fetch(f"SELECT {_KEY_COLS} FROM api_keys ORDER BY created_at")
        return [_key(r) for r in rows]

    async def revoke_api_key(self, key_id: str) -> bool:
        rows = await self._fetch(
            "UPDATE api_keys SET revoked_at = {} WHERE id = {} AND revoked_at IS NULL "
            "RETURNING id", time.time(), key_id)
        return bool(rows)

    async def put_agent(self, name: str, definition: str) -> None:
        await self._fetch(
            "INSERT INTO agent_definitions (name, definition, updated_at) VALUES ({}, {}, {}) "
            "ON CONFLICT (name) DO UPDATE SET definition = excluded.definition, "
            "updated_at = excluded.updated_at", name, definition, time.time())

    async def agent_definition(self, name: str) -> AgentDefinition | None:
        rows = await self._fetch(
            "SELECT name, definition, updated_at FROM agent_definitions WHERE name = {}", name)
        return _agent(rows[0]) if rows else None

    async def agent_definitions(self) -> list[AgentDefinition]:
        rows = await self._fetch(
            "SELECT name, definition, updated_at FROM agent_definitions ORDER BY name")
        return [_agent(r) for r in rows]

    async def delete_agent(self, name: str) -> bool:
        rows = await self._fetch(
            "DELETE FROM agent_definitions WHERE name = {} RETURNING name", name)
        return bool(rows)

    # --- managed mode: bootstrap files and session handoffs ---------------------------------

    async def put_agent_file(self, agent: str, name: str, content: str) -> None:
        await self._fetch(
            "INSERT INTO agent_files (agent, name, content, updated_at) VALUES ({}, {}, {}, {}) "
            "ON CONFLICT (agent, name) DO UPDATE SET content = excluded.content, "
            "updated_at = excluded.updated_at", agent, name, content, time.time())

    async def agent_files(self, agent: str) -> dict[str, str]:
        rows = await self._fetch(
            "SELECT name, content FROM agent_files WHERE agent = {} ORDER BY name", agent)
        return {str(r[0]): str(r[1]) for r in rows}

    async def delete_agent_file(self, agent: str, name: str) -> bool:
        rows = await self._fetch(
            "DELETE FROM agent_files WHERE agent = {} AND name = {} RETURNING name", agent, name)
        return bool(rows)

    async def set_handoff(self, session_id: str, agent: str, from_agent: str,
                          reason: str) -> None:
        await self._fetch(
            "INSERT INTO session_handoffs (session_id, agent, from_agent, reason, updated_at) "
            "VALUES ({}, {}, {}, {}, {}) ON CONFLICT (session_id) DO UPDATE SET "
            "agent = excluded.agent, from_agent = excluded.from_agent, "
            "reason = excluded.reason, updated_at = excluded.updated_at",
            session_id, agent, from_agent, reason, time.time())

    async def handoff(self, session_id: str) -> SessionHandoff | None:
        rows = await self._fetch(
            "SELECT session_id, agent, from_agent, reason, updated_at FROM session_handoffs "
            "WHERE session_id = {}", session_id)
        if not rows:
            return None
        r = rows[0]
        return SessionHandoff(str(r[0]), str(r[1]), str(r[2]), str(r[3]), float(r[4]))
