"""200 runs in progress at once on one worker, each on a session of its own (a run lock and a
session lock each), cost the fleet a bounded number of PostgreSQL connections: the locks are
advisory locks multiplexed on one connection per process, not a connection each."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import asyncpg
import pytest
from tests.workers.conftest import PG_DSN, Fleet, started_fleet

RUNS = 200


@pytest.fixture
def wide(tmp_path: Path) -> Iterator[Fleet]:
    with started_fleet(tmp_path, {"THINKLOOP_WORKER_CONCURRENCY": str(RUNS)}, ("wide",)) as f:
        yield f


async def _connections(schema: str) -> dict[str, int]:
    """The fleet's PostgreSQL connections, by process (``thinkloop/SCHEMA/PID``)."""
    conn = await asyncpg.connect(PG_DSN)
    try:
        rows = await conn.fetch(
            "SELECT application_name, count(*) AS n FROM pg_stat_activity"
            " WHERE application_name LIKE $1 GROUP BY application_name",
            f"thinkloop/{schema}/%")
        return {r["application_name"]: int(r["n"]) for r in rows}
    finally:
        await conn.close()


def test_200_runs_in_progress_on_sessions_hold_at_most_11_connections_per_process(
        wide: Fleet) -> None:
    wide.hold(0)
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda i: wide.start(wide.g1, "one", f"task {i}",
                                                 session=f"s{i}"), range(RUNS)))
    wide.hold(RUNS, timeout=120)  # every run at the model: its run and session locks held
    during = asyncio.run(_connections(wide.schema))
    views = wide.status(wide.g1, ids[0]), wide.status(wide.g1, ids[-1])
    assert all(v["status"] == "running" for v in views)
    wide.model.resume()
    done = wide.wait_done(wide.g1, ids, timeout=120)
    assert [v["status"] for v in done] == ["completed"] * RUNS, wide.logs()
    # The gateway and the worker: a pool of at most 10 and one lock line each.
    assert len(during) == 2 and all(n <= 11 for n in during.values()), during
    assert sum(during.values()) <= 20 + 2
    # The locks went with their runs: the sessions take new runs at once.
    started = time.monotonic()
    again = [wide.start(wide.g1, "one", "again", session=f"s{i}") for i in range(3)]
    assert [v["status"] for v in wide.wait_done(wide.g1, again)] == ["completed"] * 3
    assert time.monotonic() - started < 30
