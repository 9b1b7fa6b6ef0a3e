"""Every store operation is atomic under cancellation (issue 30).

A run is cancelled (abort, timeout, Ctrl-C, an event loop shutting down) at any await, its
store writes among them: a cancelled write is wholly in or wholly out, and the store stays
usable. On SQLite a cancel between ``BEGIN`` and its end used to leave the connection inside
the transaction, and every later write failed with "cannot start a transaction within a
transaction" until the process restarted.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

from thinkloop.store import PostgresStore, SQLiteStore
from thinkloop.types import Message

Op = Callable[[], Awaitable[object]]


async def test_a_write_cancelled_after_one_tick_leaves_the_store_writable(
    store: SQLiteStore | PostgresStore,
) -> None:
    await store.set_facts("u", {"warm": "up"})  # opened and migrated
    write = asyncio.ensure_future(store.set_facts("u", {"name": "Ada"}))
    await asyncio.sleep(0)
    write.cancel()
    await asyncio.gather(write, return_exceptions=True)

    await store.set_facts("u", {"city": "Paris"})
    await store.save_turn("s", [Message.user("hi"), Message.assistant("hello")], [])
    assert (await store.profile("u"))["city"] == "Paris"
    assert [m.content for m in await store.load("s")] == ["hi", "hello"]


def _ops(store: SQLiteStore | PostgresStore, n: int) -> tuple[Op, str, int]:
    """One store operation of the kinds a run does, and what it writes (session, turn)."""
    kind = n % 5
    session = f"s{n % 7}"
    if kind == 0:
        return (lambda: store.save_turn(
            session, [Message.user(f"q{n}"), Message.assistant(f"a{n}")], [])), session, n
    if kind == 1:
        return (lambda: store.set_facts(f"u{n % 3}", {f"k{n % 11}": str(n)})), "", -1
    if kind == 2:
        return (lambda: store.add_memory(f"u{n % 3}", "episode", "", f"m{n}")), "", -1
    if kind == 3:
        return (lambda: store.append(session, [Message.user(f"q{n}"),
                                               Message.assistant(f"a{n}")])), session, n
    return (lambda: store.add_graph(f"u{n % 3}", ["Ada", "Paris"],
                                    [("Ada", "lives in", "Paris")])), "", -1


async def test_chaos_random_cancels_lose_no_completed_turn_and_leave_every_op_working(
    store: SQLiteStore | PostgresStore,
) -> None:
    """Thousands of operations, each cancelled (or not) after a random number of ticks, some
    concurrently: afterwards every operation works, every turn that completed is there, and
    every turn is whole (both of its messages or neither)."""
    rng = random.Random(30)
    await store.set_facts("u0", {"warm": "up"})
    completed: dict[str, set[int]] = {}
    cancelled = 0
    # Thousands of cancels on each store, however loaded the machine: the deadline only
    # keeps a store that has stopped answering from hanging the suite.
    deadline = time.monotonic() + 120
    n = 0
    while (n < 2000 or cancelled < 1000) and time.monotonic() < deadline:
        batch = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            op, session, turn = _ops(store, n)
            n += 1
            batch.append((asyncio.ensure_future(op()), session, turn))
        for _ in range(rng.randrange(0, 12)):
            await asyncio.sleep(0)
        for task, _, _ in batch:
            if rng.random() < 0.8:
                task.cancel()
        for task, session, turn in batch:
            try:
                await task
            except asyncio.CancelledError:
                cancelled += 1
                continue
            if session:
                completed.setdefault(session, set()).add(turn)
    print(f"{n} operations, {cancelled} cancelled")
    assert n >= 2000 and cancelled >= 1000, (n, cancelled)

    # Every later operation works ...
    await store.save_turn("after", [Message.user("q"), Message.assistant("a")], [])
    await store.set_facts("after", {"k": "v"})
    await store.add_memory("after", "manual", "", "note")
    assert [m.content for m in await store.load("after")] == ["q", "a"]
    assert await store.profile("after") == {"k": "v"}
    # ... and no completed turn is lost, nor any turn half-saved.
    for session in {f"s{i}" for i in range(7)}:
        texts = [m.content for m in await store.load(session)]
        saved = {int(t[1:]) for t in texts}
        assert completed.get(session, set()) <= saved
        for turn in saved:
            assert texts.count(f"q{turn}") == 1 and texts.count(f"a{turn}") == 1
            assert texts.index(f"a{turn}") == texts.index(f"q{turn}") + 1
