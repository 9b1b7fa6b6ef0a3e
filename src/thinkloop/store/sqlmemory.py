"""Memories, profile facts (migration 2) and the entity graph (migration 5)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from thinkloop.store.base import MemoryRecord
from thinkloop.store.sql import SQLBase

_INSERT_MEMORY = ("INSERT INTO memories (owner, kind, key, content, created_at, embedding) "
                  "VALUES ({}, {}, {}, {}, {}, {})")


class MemoryTables(SQLBase):
    async def add_memory(
        self, owner: str, kind: str, key: str, content: str, embedding: bytes | None = None
    ) -> int:
        rows = await self._fetch(_INSERT_MEMORY + " RETURNING id",
                                 owner, kind, key, content, time.time(), embedding)
        return int(rows[0][0])

    async def add_memories(
        self, owner: str, rows: Sequence[tuple[str, str, str, bytes | None]]
    ) -> None:
        """Bulk insert of ``(kind, key, content, embedding)`` rows in one transaction."""
        now = time.time()
        await self._write_all(_INSERT_MEMORY, [(owner, k, key, c, now, e) for k, key, c, e in rows])

    async def memories(
        self, owner: str, kind: str | None = None, limit: int | None = None, after_id: int = 0
    ) -> list[MemoryRecord]:
        sql = ("SELECT id, owner, kind, key, content, created_at, embedding FROM memories "
               "WHERE owner = {0} AND id > {1}")
        args: list[Any] = [owner, after_id]
        # Written only when asked for, so the (owner, kind, id) index serves a kind.
        if kind is not None:
            sql += f" AND kind = {{{len(args)}}}"
            args.append(kind)
        sql += " ORDER BY id DESC"
        if limit:  # None or 0: all of them
            sql += f" LIMIT {{{len(args)}}}"
            args.append(limit)
        rows = await self._fetch(sql, *args)
        return [MemoryRecord(*r) for r in reversed(rows)]

    async def memory_stamp(self, owner: str) -> tuple[int, int, int]:
        """Changes whenever the owner's memories do: (count, max id, sum of ids)."""
        rows = await self._fetch(
            "SELECT COUNT(*), COALESCE(MAX(id), 0), COALESCE(SUM(id), 0) FROM memories "
            "WHERE owner = {0}", owner)
        return int(rows[0][0]), int(rows[0][1]), int(rows[0][2])

    async def delete_memory(self, owner: str, key_or_id: str) -> int:
        ident = int(key_or_id) if key_or_id.isdigit() else -1
        gone = await self._fetch(
            "DELETE FROM memories WHERE owner = {0} AND (key = {1} OR id = {2}) RETURNING id",
            owner, key_or_id, ident)
        return len(gone)

    async def set_facts(self, owner: str, facts: dict[str, str]) -> None:
        if not facts:
            return
        now = time.time()
        await self._write_all(
            "INSERT INTO profile (owner, key, value, updated_at) VALUES ({0}, {1}, {2}, {3}) "
            "ON CONFLICT (owner, key) DO UPDATE SET value = excluded.value, "
            "updated_at = excluded.updated_at", [(owner, k, v, now) for k, v in facts.items()])

    async def profile(self, owner: str) -> dict[str, str]:
        rows = await self._fetch(
            "SELECT key, value FROM profile WHERE owner = {0} ORDER BY key", owner)
        return {str(r[0]): str(r[1]) for r in rows}

    # --- entity graph -----------------------------------------------------------------------

    async def add_graph(
        self, owner: str, nodes: Sequence[str], edges: Sequence[tuple[str, str, str]]
    ) -> None:
        now = time.time()
        async with self._tx() as tx:
            await tx.executemany(
                "INSERT INTO graph_nodes (owner, name, label, mentions, updated_at) "
                "VALUES ({0}, {1}, {2}, 1, {3}) ON CONFLICT (owner, name) DO UPDATE SET "
                "mentions = graph_nodes.mentions + 1, updated_at = excluded.updated_at",
                [(owner, n.lower(), n, now) for n in dict.fromkeys(nodes)])
            await tx.executemany(
                "INSERT INTO graph_edges (owner, src, dst, relation, weight) "
                "VALUES ({0}, {1}, {2}, {3}, 1) ON CONFLICT (owner, src, dst, relation) DO UPDATE "
                "SET weight = graph_edges.weight + 1",
                [(owner, s.lower(), d.lower(), r) for s, r, d in dict.fromkeys(edges)])

    async def graph_nodes(self, owner: str, limit: int = 500) -> list[tuple[str, int]]:
        rows = await self._fetch(
            "SELECT label, mentions FROM graph_nodes WHERE owner = {0} "
            "ORDER BY mentions DESC, name LIMIT {1}", owner, limit)
        return [(str(r[0]), int(r[1])) for r in rows]

    async def graph_edges(
        self, owner: str, names: Sequence[str], limit: int = 20
    ) -> list[tuple[str, str, str, int]]:
        keys = [n.lower() for n in names]
        if not keys:
            return []
        named = self.dialect.in_texts.format("{1}")
        rows = await self._fetch(
            "SELECT s.label, e.relation, d.label, e.weight FROM graph_edges e "
            "JOIN graph_nodes s ON s.owner = e.owner AND s.name = e.src "
            "JOIN graph_nodes d ON d.owner = e.owner AND d.name = e.dst "
            f"WHERE e.owner = {{0}} AND (e.src {named} OR e.dst {named}) "
            "ORDER BY e.weight DESC, e.src, e.dst LIMIT {2}", owner, self.dialect.texts(keys),
            limit)
        return [(str(a), str(b), str(c), int(w)) for a, b, c, w in rows]
