"""Group commits on the event loop's thread (issue 38): a free database is written without
the trip to aiosqlite's thread; one whose write lock another connection holds is waited for
on that thread, never on the loop; and the WAL is still checkpointed, off the commit."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from thinkloop.store import SQLiteStore
from thinkloop.store import sqlite as sqlite_mod


async def test_a_write_to_a_free_database_takes_no_trip_to_the_database_thread(
    sqlite: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    trips: list[object] = []
    on_thread = sqlite_mod._on_thread

    async def counted(db: object, work: sqlite_mod.Work) -> None:
        trips.append(work)
        await on_thread(db, work)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_mod, "_on_thread", counted)
    await sqlite.add_checkpoint("r1", "step", b"{}")
    assert trips == []
    assert await sqlite.checkpoints("r1") == [("step", b"{}")]


async def test_a_write_waits_on_the_thread_while_another_connection_holds_the_lock(
    sqlite: SQLiteStore, tmp_path: Path
) -> None:
    other = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's writer, mid-transaction
    write = asyncio.create_task(sqlite.add_checkpoint("r1", "step", b"{}"))
    ticks = 0
    for _ in range(20):  # the loop goes on meanwhile: the lock is not waited for on it
        await asyncio.sleep(0.01)
        ticks += 1
    assert not write.done() and ticks == 20
    other.execute("COMMIT")
    other.close()
    await write
    assert await sqlite.checkpoints("r1") == [("step", b"{}")]


async def test_the_wal_is_checkpointed_every_so_many_commits(
    sqlite: SQLiteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_mod, "CHECKPOINT_EVERY", 10)
    blob = b"x" * 16384
    for i in range(200):  # 3 MB written, one commit each
        await sqlite.add_checkpoint(f"r{i}", "step", blob)
    wal = tmp_path / "runs.db-wal"
    # Checkpointed, the WAL is reused from its start: it holds about 10 commits, not 200.
    assert wal.stat().st_size < 50 * len(blob)
    assert len(await sqlite.checkpoints("r199")) == 1
