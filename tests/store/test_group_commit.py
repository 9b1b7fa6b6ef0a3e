"""One writer per SQLite store (issue 38): concurrent runs' writes share a transaction, each
caller still waits for the commit that holds its rows, and no failure or cancel of one
caller costs another its rows or breaks the writer."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import pytest

from thinkloop import Agent, ScriptedModel, tool
from thinkloop.core.events import RunStarted, ToolCalled
from thinkloop.models.scripted import call, reply
from thinkloop.store import SQLiteStore, StoreError
from thinkloop.store.groupcommit import GroupCommit
from thinkloop.store.sqlite import Work


def count_commits(store: SQLiteStore) -> list[int]:
    """The number of writes in each transaction the store's writer commits."""
    sizes: list[int] = []
    commit = store._commit

    async def counted(works: Sequence[Work]) -> None:
        sizes.append(len(works))
        await commit(works)

    store._writes = GroupCommit(counted)
    return sizes


async def test_concurrent_runs_steps_share_one_commit_and_all_rows_land_in_order(
    sqlite: SQLiteStore,
) -> None:
    sizes = count_commits(sqlite)

    async def run(i: int) -> None:
        for step in range(3):
            await sqlite.add_step_records(
                f"r{i}", ("step", f"{i}:{step}".encode()),
                [RunStarted(f"r{i}", step, "a", "task")], [])
            await sqlite.add_checkpoint(f"r{i}", "result", f"{i}:{step}r".encode())

    await asyncio.gather(*(run(i) for i in range(50)))
    assert sum(sizes) == 50 * 6
    assert len(sizes) < 50  # 300 writes, in a few transactions (the first holds 50)
    for i in range(50):
        rows = await sqlite.checkpoints(f"r{i}")
        assert [d.decode() for _, d in rows] == [
            f"{i}:{s}{k}" for s in range(3) for k in ("", "r")]
        assert [e.step for e in await sqlite.run_events(f"r{i}")] == [0, 1, 2]


async def test_a_failing_write_fails_its_caller_alone(sqlite: SQLiteStore) -> None:
    await sqlite.add_checkpoint("warm", "step", b"x")
    good = [sqlite.add_checkpoint(f"r{i}", "step", b"ok") for i in range(5)]
    bad = sqlite._write_many([("INSERT INTO no_such_table VALUES ({})", [(1,)])])
    out = await asyncio.gather(*good, bad, return_exceptions=True)
    assert out[:5] == [None] * 5 and isinstance(out[5], Exception)
    assert "no_such_table" in str(out[5])
    for i in range(5):
        assert await sqlite.checkpoints(f"r{i}") == [("step", b"ok")]


async def test_a_queued_checkpoint_is_committed_before_a_later_write_returns(
    sqlite: SQLiteStore,
) -> None:
    queued = sqlite.queue_checkpoint("r", "result", b"a")
    assert not queued.done()  # nobody waited for it
    await sqlite.add_step_records("r", ("step", b"b"), [], [])
    assert queued.done() and queued.exception() is None
    assert await sqlite.checkpoints("r") == [("result", b"a"), ("step", b"b")]


def held_writer(store: SQLiteStore) -> tuple[asyncio.Event, asyncio.Event]:
    """(started, release): the store's writer stops in each commit until ``release`` is set."""
    started, release = asyncio.Event(), asyncio.Event()
    commit = store._commit

    async def slow(works: Sequence[Work]) -> None:
        started.set()
        await release.wait()
        await commit(works)

    store._writes = GroupCommit(slow)
    return started, release


async def test_a_caller_cancelled_before_the_writer_took_its_write_writes_nothing(
    sqlite: SQLiteStore,
) -> None:
    started, release = held_writer(sqlite)
    first = asyncio.ensure_future(sqlite.add_checkpoint("first", "step", b"f"))
    await started.wait()  # the writer is busy with the first: the next ones wait in the queue
    others = [asyncio.ensure_future(sqlite.add_checkpoint(f"o{i}", "step", b"o"))
              for i in range(3)]
    mine = asyncio.ensure_future(sqlite.add_checkpoint("mine", "step", b"m"))
    await asyncio.sleep(0)
    mine.cancel()
    with pytest.raises(asyncio.CancelledError):
        await mine
    release.set()
    await asyncio.gather(first, *others)
    assert await sqlite.checkpoints("mine") == []  # wholly out
    assert await sqlite.checkpoints("first") == [("step", b"f")]
    assert all([await sqlite.checkpoints(f"o{i}") == [("step", b"o")] for i in range(3)])


async def test_a_caller_cancelled_during_its_commit_waits_for_it_and_others_are_kept(
    sqlite: SQLiteStore,
) -> None:
    started, release = held_writer(sqlite)
    mine = asyncio.ensure_future(sqlite.add_checkpoint("mine", "step", b"m"))
    other = asyncio.ensure_future(sqlite.add_checkpoint("other", "step", b"o"))
    await started.wait()
    mine.cancel()
    await asyncio.sleep(0.01)
    assert not mine.done()  # its commit is in flight: it waits for it to settle
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await mine
    await other
    # Wholly in (the commit held it), and the writer goes on.
    assert await sqlite.checkpoints("mine") == [("step", b"m")]
    assert await sqlite.checkpoints("other") == [("step", b"o")]
    await sqlite.add_checkpoint("after", "step", b"a")
    assert await sqlite.checkpoints("after") == [("step", b"a")]


async def test_chaos_random_cancels_of_run_writes_keep_every_acknowledged_row(
    sqlite: SQLiteStore,
) -> None:
    """Runs writing steps, each write cancelled (or not) after a random number of ticks:
    every write that returned is stored once, each run's rows stay in its order, and the
    store takes writes afterwards."""
    rng = random.Random(38)
    acked: dict[str, list[bytes]] = {}
    cancelled = 0
    deadline = time.monotonic() + 10
    n = 0
    while n < 3000 and time.monotonic() < deadline:
        batch = []
        for _ in range(rng.randrange(1, 20)):
            run, data = f"r{n % 13}", str(n).encode()
            write = (sqlite.add_checkpoint(run, "step", data) if n % 2 else
                     sqlite.add_step_records(run, ("step", data), [RunStarted(run, n, "a", "")],
                                             []))
            batch.append((asyncio.ensure_future(write), run, data))
            n += 1
        for _ in range(rng.randrange(0, 6)):
            await asyncio.sleep(0)
        for task, _, _ in batch:
            if rng.random() < 0.5:
                task.cancel()
        for task, run, data in batch:
            try:
                await task
            except asyncio.CancelledError:
                cancelled += 1
                continue
            acked.setdefault(run, []).append(data)
    assert n >= 500 and cancelled >= 100, (n, cancelled)
    for run, datas in acked.items():
        stored = [d for _, d in await sqlite.checkpoints(run)]
        assert len(stored) == len(set(stored))  # nothing written twice
        assert set(datas) <= set(stored)
        assert stored == sorted(stored, key=int)  # in the order they were queued
    await sqlite.add_checkpoint("after", "step", b"a")
    assert await sqlite.checkpoints("after") == [("step", b"a")]


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b  # async and not suspending: the step goes on to its next row at once


async def test_a_steps_calls_and_result_rows_commit_with_its_next_step_row(
    sqlite: SQLiteStore,
) -> None:
    """The rows a step writes around its tool calls are queued, not waited for one by one:
    they commit together with the step row before the next model call, in their order."""
    sizes = count_commits(sqlite)
    model = ScriptedModel([reply("", call("add", a=2, b=3)), reply("", call("add", a=1, b=1)),
                           reply("5 and 2")])
    agent = Agent(model, tools=[add], store=sqlite, guard=False)
    result = await agent.run("add")
    assert result.status == "completed"
    kinds = [k for k, _ in await sqlite.checkpoints(result.run_id)]
    assert kinds == ["step", "calls", "result", "step", "calls", "result", "step"]
    # Each step's calls row, its result and the next step row: one commit each, not three.
    assert sizes.count(3) == 2, sizes


async def test_queued_rows_of_one_group_share_one_future_and_a_bad_one_is_only_logged(
    sqlite: SQLiteStore, caplog: pytest.LogCaptureFixture,
) -> None:
    """Rows queued without waiting (a step's calls and results) take no future each: those
    of one group share their group's (issue 38); one that fails is logged, the rest land."""
    await sqlite.add_checkpoint("warm", "step", b"x")
    first = sqlite.queue_checkpoint("r", "calls", b"a")

    def nowhere(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO nowhere VALUES (1)")

    bad = sqlite._writes.write_later(nowhere)
    second = sqlite.queue_checkpoint("r", "result", b"b")
    assert first is bad is second
    await sqlite.add_step_records("r", ("step", b"c"), [], [])
    assert first.done() and first.exception() is None
    assert await sqlite.checkpoints("r") == [("calls", b"a"), ("result", b"b"), ("step", b"c")]
    assert "a queued store write failed" in caplog.text and "nowhere" in caplog.text


async def test_a_waited_write_makes_one_future(sqlite: SQLiteStore) -> None:
    """A write waited for takes one future, not a shielded pair (issue 38: a model call's
    step write paid a future and two callbacks more for the shield); a cancel still lands
    wholly in or out (the tests above)."""
    await sqlite.add_checkpoint("warm", "step", b"x")
    loop = asyncio.get_running_loop()
    made = 0
    create = loop.create_future

    def counted() -> asyncio.Future[None]:
        nonlocal made
        made += 1
        return create()

    loop.create_future = counted  # type: ignore[method-assign]
    try:
        await asyncio.gather(*(sqlite.add_checkpoint(f"r{i}", "step", b"ok") for i in range(20)))
    finally:
        del loop.create_future
    assert made == 20


async def test_a_step_waiting_for_its_commit_holds_one_store_coroutine(
    sqlite: SQLiteStore,
) -> None:
    """A run waiting for its step's records holds the group commit's write and nothing
    around it (four coroutines each, with 200 runs waiting, kept the collector busy: issue
    38); a write that fails still reaches it as one StoreError."""
    started, release = held_writer(sqlite)

    async def step() -> None:
        await sqlite.add_step_records("r", ("step", b"x"), [], [])

    task = asyncio.ensure_future(step())
    await started.wait()
    chain, awaited = [], task.get_coro()
    while asyncio.iscoroutine(awaited):
        chain.append(awaited.__qualname__.rpartition(".")[2])
        awaited = awaited.cr_await
    release.set()
    await task
    assert chain == ["step", "write"]
    assert await sqlite.checkpoints("r") == [("step", b"x")]
    await sqlite._writes.write(lambda conn: None)  # the held writer's group is done
    sqlite._writes = GroupCommit(sqlite._commit)
    await sqlite._fetch("DROP TABLE checkpoints")
    with pytest.raises(StoreError, match=r"SQLite store failed: .*no such table: checkpoints"):
        await sqlite.add_step_records("r", ("step", b"y"), [], [])


async def test_a_live_runs_rows_are_numbered_here_not_each_by_max_seq(
    sqlite: SQLiteStore,
) -> None:
    """While a run is counted (live here, written by this store alone) its audit-log and
    checkpoint rows are numbered by the store: one read of the logs' last numbers at its
    first write (a resumed run goes on after its rows), none per row (issue 38); rows of a
    run not counted read MAX(seq) as before. Every row lands in order either way."""
    await sqlite.add_checkpoint("r", "step", b"a")
    await sqlite.add_events("r", [RunStarted("r", 0, "t", "m", ts=1.0)])
    statements: list[str] = []
    db = await sqlite._open()
    db._conn.set_trace_callback(statements.append)
    sqlite.count_rows("r")
    called = [ToolCalled("r", 1, "c1", "add", {"a": 1}, ts=2.0),
              ToolCalled("r", 1, "c2", "add", {"a": 2}, ts=2.1)]
    await sqlite.add_step_records("r", ("step", b"b"), called, [])
    await sqlite.queue_checkpoint("r", "calls", b"c")
    await sqlite.add_events("r", called[:1])
    await sqlite.add_checkpoint("r", "result", b"d")
    sqlite.forget_rows("r")
    await sqlite.add_checkpoint("r", "step", b"e")
    db._conn.set_trace_callback(None)
    reads = [s for s in statements if "MAX(seq)" in s]
    assert len(reads) == 2  # the counted run's one read of both logs; the uncounted row
    assert reads[0].startswith("SELECT") and reads[1].startswith("INSERT INTO checkpoints")
    assert await sqlite.checkpoints("r") == [
        ("step", b"a"), ("step", b"b"), ("calls", b"c"), ("result", b"d"), ("step", b"e")]
    assert await sqlite.run_events("r") == [
        RunStarted("r", 0, "t", "m", ts=1.0), *called, called[0]]


class _Statements:
    """A connection that records which statements ran and how (execute or executemany)."""

    def __init__(self, conn: sqlite3.Connection, calls: list[tuple[str, str]]) -> None:
        self.conn, self.calls = conn, calls

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        self.calls.append(("execute", sql.split("(")[0].strip()))
        return self.conn.execute(sql, *args)

    def executemany(self, sql: str, rows: object) -> sqlite3.Cursor:
        self.calls.append(("executemany", sql.split("(")[0].strip()))
        return self.conn.executemany(sql, rows)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        return getattr(self.conn, name)


async def test_a_groups_step_records_are_one_executemany_per_table(
    sqlite: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows of the step records one group commits (every run's) go in one
    ``executemany`` per table, not a statement or two per write (issue 38: about three
    writes a model call, two hundred-odd in a group at 200 runs); each run's rows land
    numbered and in order as before."""
    from thinkloop.store import sqlite as sqlite_mod
    from thinkloop.store.serialize import new_span_row

    for i in range(10):
        sqlite.count_rows(f"r{i}")
        await sqlite.add_checkpoint(f"r{i}", "step", b"0")  # each run's numbers read
    started, release = held_writer(sqlite)
    first = asyncio.ensure_future(sqlite.add_checkpoint("r0", "result", b"first"))
    await started.wait()  # the next writes wait in the queue: one group
    writes = []
    for i in range(10):
        span = new_span_row(i + 1, None, 7, "chat m", 1.0, 2.0, "OK", {"i": i})
        writes.append(sqlite.add_step_records(
            f"r{i}", ("step", b"1"), [RunStarted(f"r{i}", 1, "a", "t", ts=1.0),
                                      RunStarted(f"r{i}", 1, "a", "u", ts=2.0)], [span]))
    tasks = [asyncio.ensure_future(w) for w in writes]
    await asyncio.sleep(0)  # queued, each run's step row before its calls row
    for i in range(10):
        sqlite.queue_checkpoint(f"r{i}", "calls", b"2")
    groups: list[list[tuple[str, str]]] = []
    here = sqlite_mod._here

    def counted(conn: sqlite3.Connection, work: Work) -> bool:
        groups.append([])
        return here(_Statements(conn, groups[-1]), work)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_mod, "_here", counted)
    release.set()
    await first
    await asyncio.gather(*tasks)
    assert len(groups) == 2  # the first write's, then the 20 queued behind it
    inserts = [c for c in groups[1] if c[1].startswith("INSERT")]
    assert sorted(inserts) == [("executemany", "INSERT INTO checkpoints"),
                               ("executemany", "INSERT INTO run_events"),
                               ("executemany", "INSERT INTO spans")]
    for i in range(10):
        assert [d for _, d in await sqlite.checkpoints(f"r{i}")] == (
            [b"0", b"first", b"1", b"2"] if i == 0 else [b"0", b"1", b"2"])
        assert [e.ts for e in await sqlite.run_events(f"r{i}")] == [1.0, 2.0]
        assert [s.span_id for s in await sqlite.spans(f"r{i}")] == [f"{i + 1:016x}"]


async def test_a_run_waiting_for_its_step_commit_holds_no_lock_exits(
    sqlite: SQLiteStore,
) -> None:
    """A recorded run waiting for its step's commit holds its two write locks, not the
    bound ``__aexit__`` each ``async with`` kept meanwhile: two objects per model call of
    every run waiting, which the collector counted (issue 38)."""
    import gc

    from thinkloop.store.sqlite import _StepRows

    started, release = asyncio.Event(), asyncio.Event()
    commit = sqlite._commit

    async def hold_steps(works: Sequence[Work]) -> None:
        if any(isinstance(w, _StepRows) and _kind(w) == "step" for w in works):
            started.set()
            await release.wait()
        await commit(works)

    def _kind(w: _StepRows) -> object:
        return getattr(w, "kind", None)

    sqlite._writes = GroupCommit(hold_steps)

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    agent = Agent(ScriptedModel([reply("", call("echo", text="a")), "done"]), tools=[echo],
                  store=sqlite, guard=False)
    run = asyncio.ensure_future(agent.run("go"))
    await started.wait()
    try:  # the run is released whatever the scan meets
        exits = [o for o in gc.get_objects()
                 if type(o).__name__ == "method" and getattr(o, "__name__", "") == "__aexit__"
                 and isinstance(o.__self__, asyncio.Lock)]
    finally:
        release.set()
    assert (await run).status == "completed"
    assert exits == []


async def test_a_run_waiting_for_its_step_commit_holds_no_hook_coroutine_around_it(
    sqlite: SQLiteStore,
) -> None:
    """The run book's ``pre_reason`` hook hands the hook runner the recorder's write itself:
    no coroutine of its own stays around it while the run waits for its step's commit (one
    object more a model call of every run waiting, issue 38); a failed write is still only
    logged (the run goes on, as before)."""
    import gc
    import types

    from thinkloop.store.sqlite import _StepRows

    started, release = asyncio.Event(), asyncio.Event()
    commit = sqlite._commit

    async def hold_steps(works: Sequence[Work]) -> None:
        if any(isinstance(w, _StepRows) and getattr(w, "kind", None) == "step" for w in works):
            started.set()
            await release.wait()
        await commit(works)

    sqlite._writes = GroupCommit(hold_steps)
    agent = Agent(ScriptedModel(["done"]), store=sqlite, guard=False)
    run = asyncio.ensure_future(agent.run("go"))
    await started.wait()
    try:
        # type(), not isinstance: an object left by another test may answer __class__ by
        # raising, and the run must be released whatever happens here.
        hooks = [o.__qualname__ for o in gc.get_objects()
                 if type(o) is types.CoroutineType and o.__qualname__ == "RunBook._step_done"]
    finally:
        release.set()
    assert (await run).status == "completed"
    assert hooks == []
