"""``save_runs`` writes several runs' records as ``save_run`` writes each (a gateway's
queued runs), on SQLite and PostgreSQL."""

from __future__ import annotations

from thinkloop.api import RunRecord
from thinkloop.store.postgres import PostgresStore
from thinkloop.store.sqlite import SQLiteStore
from thinkloop.types import Message


def queued(i: int, session: str | None = None) -> RunRecord:
    return RunRecord(f"r{i}", "bench", "", "", "queued", 1000.0 + i, session, "u", f"task {i}")


async def test_save_runs_writes_each_run_as_save_run_does(
        store: SQLiteStore | PostgresStore) -> None:
    await store.append("u:s", [Message.user("hi")])
    runs = [queued(0), queued(1, "u:s"), queued(2)]
    await store.save_runs(runs)
    for run in runs:
        assert await store.get_run(run.id) == run
    assert {r.id for r in await store.list_runs(session="u:s")} == {"r1"}
