"""Post-turn jobs owed (migration 7): one row per finished turn until its jobs have run."""

from __future__ import annotations

import time

from thinkloop.store.base import OwedJobs
from thinkloop.store.sql import SQLBase, upsert

_COLS = "run_id, session_id, user_id, turn, created_at"
_OWE = upsert("owed_jobs", f"{_COLS}, held_until", "run_id")


class JobTables(SQLBase):
    async def owe_jobs(self, owed: OwedJobs, hold_s: float) -> None:
        async with self._tx() as tx:
            await tx.execute(_OWE, owed.run_id, owed.session_id, owed.user_id, owed.turn,
                             owed.created_at, time.time() + hold_s)

    async def take_owed_jobs(self, limit: int, hold_s: float) -> list[OwedJobs]:
        now = time.time()
        rows = await self._fetch(
            f"SELECT {_COLS} FROM owed_jobs WHERE held_until < {{0}} "
            "ORDER BY created_at LIMIT {1}", now, limit)
        taken = []
        for row in rows:
            owed = OwedJobs(*tuple(row))
            async with self._tx() as tx:  # another process may take it first: one wins
                won = await tx.fetch(
                    "UPDATE owed_jobs SET held_until = {0} WHERE run_id = {1} "
                    "AND held_until < {2} RETURNING run_id", now + hold_s, owed.run_id, now)
            if won:
                taken.append(owed)
        return taken

    async def release_jobs(self, run_id: str) -> None:
        async with self._tx() as tx:
            await tx.execute("UPDATE owed_jobs SET held_until = 0 WHERE run_id = {0}", run_id)

    async def drop_jobs(self, run_id: str) -> None:
        async with self._tx() as tx:
            await tx.execute("DELETE FROM owed_jobs WHERE run_id = {0}", run_id)
