"""A worker asks the store for the abort requests of the runs starting together in one
query, and each run gets its own answer (or the store's error)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from thinkloop.workers.execute import aborts_asked


class Requests:
    def __init__(self, asked: set[str], fail: bool = False) -> None:
        self.asked, self.fail = asked, fail
        self.queries: list[list[str]] = []

    async def abort_requests(self, run_ids: Sequence[str]) -> list[str]:
        self.queries.append(list(run_ids))
        await asyncio.sleep(0.01)
        if self.fail:
            raise OSError("the store is away")
        return [r for r in run_ids if r in self.asked]


def test_runs_starting_together_are_asked_about_in_one_query() -> None:
    store = Requests({"r3", "r7"})

    async def main() -> list[bool]:
        aborts = aborts_asked(store)
        return list(await asyncio.gather(*(aborts(f"r{i}") for i in range(10))))

    answers = asyncio.run(main())
    assert answers == [i in (3, 7) for i in range(10)]
    assert store.queries == [[f"r{i}" for i in range(10)]]


def test_runs_arriving_during_a_query_go_in_the_next_one() -> None:
    store = Requests({"late"})

    async def main() -> tuple[bool, bool]:
        aborts = aborts_asked(store)
        first = asyncio.ensure_future(aborts("early"))
        await asyncio.sleep(0.005)  # the first query is out
        return await first, await aborts("late")

    assert asyncio.run(main()) == (False, True)
    assert store.queries == [["early"], ["late"]]


def test_a_failed_query_fails_each_of_its_runs_and_a_cancelled_start_is_left_out_of_it() -> None:
    store = Requests(set(), fail=True)

    async def main() -> None:
        aborts = aborts_asked(store)
        gone = asyncio.ensure_future(aborts("gone"))
        waiting = asyncio.ensure_future(aborts("waiting"))
        await asyncio.sleep(0)
        gone.cancel()
        with pytest.raises(OSError, match="away"):
            await waiting

    asyncio.run(main())
    assert store.queries == [["waiting"]]
