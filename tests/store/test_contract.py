"""The store contract, run on SQLite and PostgreSQL alike (see conftest.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from thinkloop.store import PostgresStore, SessionInfo, SQLiteStore, open_store
from thinkloop.store.base import StoreError
from thinkloop.types import ContentPart, Message, PendingApproval, ToolCall

Backend = SQLiteStore | PostgresStore

TURN = [
    Message.user("add 2 and 3"),
    Message.assistant("", (ToolCall("c1", "add", {"a": 2, "b": 3}),), thought="use add"),
    Message.tool("c1", "add", "5"),
    Message.assistant("It is 5."),
]


async def test_new_session_is_empty(store: Backend) -> None:
    assert await store.load("nobody") == []
    assert await store.session_info("nobody") is None


async def test_append_then_load_round_trips_every_field(store: Backend) -> None:
    image = Message.user("look", parts=(ContentPart("image", "image/png", b"\x89PNG\x00\xff"),))
    await store.append("s1", [*TURN, image])
    loaded = await store.load("s1")
    assert loaded == [*TURN, image]
    assert loaded[1].tool_calls[0].arguments == {"a": 2, "b": 3}
    assert loaded[1].thought == "use add"
    assert loaded[4].parts[0].data == b"\x89PNG\x00\xff"


async def test_appends_accumulate_in_order_and_sessions_are_separate(store: Backend) -> None:
    await store.append("a", [Message.user("one")])
    await store.append("b", [Message.user("other")])
    await store.append("a", [Message.assistant("two"), Message.user("three")])
    assert [m.content for m in await store.load("a")] == ["one", "two", "three"]
    assert [m.content for m in await store.load("b")] == ["other"]


async def test_list_show_delete(store: Backend) -> None:
    await store.append("s1", TURN)
    await store.append("s2", TURN[:1])
    infos = await store.list_sessions()
    assert {i.id: i.messages for i in infos} == {"s1": 4, "s2": 1}
    assert infos[0].id == "s2"  # most recently updated first
    info = await store.session_info("s1")
    assert isinstance(info, SessionInfo)
    assert (info.messages, info.summary, info.compactions) == (4, "", 0)
    assert await store.delete_session("s1") is True
    assert await store.delete_session("s1") is False
    assert await store.load("s1") == []
    assert [i.id for i in await store.list_sessions()] == ["s2"]


async def test_compact_keeps_the_tail_and_saves_the_summary(store: Backend) -> None:
    await store.append("s", [Message.user(f"m{i}") for i in range(10)])
    await store.compact("s", "they counted to nine", drop_first=6)
    assert [m.content for m in await store.load("s")] == ["m6", "m7", "m8", "m9"]
    info = await store.session_info("s")
    assert info is not None
    assert (info.summary, info.compactions, info.messages) == ("they counted to nine", 1, 4)
    # Messages appended after compaction continue after the kept tail.
    await store.append("s", [Message.user("m10")])
    assert [m.content for m in await store.load("s")][-2:] == ["m9", "m10"]


async def test_data_survives_reopening(store_url: str) -> None:
    first = open_store(store_url)
    await first.append("s", TURN)
    await first.add_memory("u", "manual", "color", "teal")
    await first.set_facts("u", {"name": "Ada"})
    await first.aclose()
    second = open_store(store_url)
    try:
        assert await second.load("s") == TURN
        assert [m.content for m in await second.memories("u")] == ["teal"]
        assert await second.profile("u") == {"name": "Ada"}
    finally:
        await second.aclose()


async def test_memories_add_list_delete(store: Backend) -> None:
    a = await store.add_memory("u", "manual", "color", "favourite colour is teal")
    b = await store.add_memory("u", "episode", "", "asked about the weather", b"\x00\x01")
    await store.add_memory("other", "manual", "color", "red")
    got = await store.memories("u")
    assert [(m.id, m.kind, m.key, m.content) for m in got] == [
        (a, "manual", "color", "favourite colour is teal"),
        (b, "episode", "", "asked about the weather"),
    ]
    assert got[1].embedding == b"\x00\x01"
    assert [m.id for m in await store.memories("u", "episode")] == [b]
    assert [m.id for m in await store.memories("u", limit=1)] == [b]  # the newest
    assert await store.delete_memory("u", "color") == 1
    assert await store.delete_memory("u", str(b)) == 1
    assert await store.memories("u") == []
    assert [m.content for m in await store.memories("other")] == ["red"]


async def test_a_kind_filters_even_when_empty_and_a_limit_of_0_keeps_all(store: Backend) -> None:
    # As the in-process store does (SQLite used to ignore "", PostgreSQL to return nothing).
    a = await store.add_memory("u", "manual", "", "a")
    await store.add_memory("u", "episode", "", "b")
    c = await store.add_memory("u", "manual", "", "c")
    assert await store.memories("u", "") == []
    assert [m.content for m in await store.memories("u", limit=0)] == ["a", "b", "c"]
    assert [m.id for m in await store.memories("u", "manual", 1)] == [c]
    assert [m.id for m in await store.memories("u", "manual", 5, after_id=a)] == [c]


async def test_bulk_memories_and_the_stamp_that_tracks_changes(store: Backend) -> None:
    assert await store.memory_stamp("u") == (0, 0, 0)
    await store.add_memories("u", [("manual", f"k{i}", f"text {i}", None) for i in range(100)])
    got = await store.memories("u")
    assert [m.content for m in got] == [f"text {i}" for i in range(100)]
    stamp = await store.memory_stamp("u")
    assert stamp[0] == 100
    await store.delete_memory("u", "k5")
    after_delete = await store.memory_stamp("u")
    await store.add_memory("u", "manual", "k5", "again")
    assert len({stamp, after_delete, await store.memory_stamp("u")}) == 3


async def test_profile_facts_are_updated_not_duplicated(store: Backend) -> None:
    await store.set_facts("u", {"name": "Ada", "city": "Paris"})
    await store.set_facts("u", {"city": "Lyon"})
    assert await store.profile("u") == {"city": "Lyon", "name": "Ada"}
    assert await store.profile("nobody") == {}


async def test_concurrent_appends_never_interleave_or_lose_rows(store: Backend) -> None:
    turns = [[Message.user(f"q{i}"), Message.assistant(f"a{i}")] for i in range(20)]
    await asyncio.gather(*(store.append("s", t) for t in turns))
    contents = [m.content for m in await store.load("s")]
    assert len(contents) == 40
    pairs = list(zip(contents[::2], contents[1::2], strict=True))
    assert sorted(pairs) == sorted((f"q{i}", f"a{i}") for i in range(20))


async def test_session_lock_is_exclusive_and_fifo(store: Backend) -> None:
    order: list[str] = []

    async def hold(name: str) -> None:
        async with store.lock("s"):
            order.append(f"{name}+")
            await asyncio.sleep(0.01)
            order.append(f"{name}-")

    tasks = []
    for n in "abcd":
        tasks.append(asyncio.create_task(hold(n)))
        await asyncio.sleep(0)  # let each task queue before the next one starts
    await asyncio.gather(*tasks)
    assert order == ["a+", "a-", "b+", "b-", "c+", "c-", "d+", "d-"]


async def test_lock_on_other_session_does_not_block(store: Backend) -> None:
    async with store.lock("s1"):
        await asyncio.wait_for(_enter(store, "s2"), 5)


async def _enter(store: Backend, session: str) -> None:
    async with store.lock(session):
        pass


async def test_waiting_for_a_lock_can_be_cancelled(store: Backend) -> None:
    async with store.lock("s"):
        waiter = asyncio.create_task(_enter(store, "s"))
        await asyncio.sleep(0.05)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    await asyncio.wait_for(_enter(store, "s"), 5)  # the lock is free again


async def test_an_old_database_upgrades_in_place(store_url: str) -> None:
    from thinkloop.store import schema

    old = open_store(store_url)
    old._migrate_upto = 1  # a database written by the first release
    await old.append("s", TURN)
    assert await old.schema_versions() == [1]
    await old.aclose()

    new = open_store(store_url)
    try:
        assert await new.schema_versions() == [v for v, _ in schema.MIGRATIONS]
        assert await new.load("s") == TURN
        info = await new.session_info("s")
        assert info is not None and (info.summary, info.compactions) == ("", 0)
        await new.add_memory("u", "manual", "k", "v")
        assert [m.content for m in await new.memories("u")] == ["v"]
    finally:
        await new.aclose()
    again = open_store(store_url)  # opening an up-to-date database applies nothing
    try:
        assert await again.schema_versions() == [v for v, _ in schema.MIGRATIONS]
    finally:
        await again.aclose()


def test_open_store_picks_the_backend_from_url_path_or_environment(tmp_path: Path) -> None:
    from thinkloop.settings import load_settings
    from thinkloop.store import StoreError, default_location

    def where(env: dict[str, str]) -> str:
        return default_location(load_settings(env=env, cwd=tmp_path))

    assert where({"THINKLOOP_DATABASE_URL": "postgresql://h/db"}) == "postgresql://h/db"
    assert where({"THINKLOOP_HOME": "/srv/tl"}) == "/srv/tl/thinkloop.db"
    assert where({}) == str(Path.home() / ".thinkloop" / "thinkloop.db")
    pg = open_store("postgresql://u@h:5432/db?schema=team_a&sslmode=disable")
    assert isinstance(pg, PostgresStore)
    assert (pg.dsn, pg.schema) == ("postgresql://u@h:5432/db?sslmode=disable", "team_a")
    assert isinstance(open_store("sqlite:///rel.db"), SQLiteStore)
    assert open_store("sqlite:///rel.db").path == "rel.db"
    assert open_store("sqlite:////abs/x.db").path == "/abs/x.db"
    assert open_store("sqlite://").path == ":memory:"
    in_home = load_settings(env={"THINKLOOP_HOME": "/srv/tl"}, cwd=tmp_path)
    assert open_store(settings=in_home).path == "/srv/tl/thinkloop.db"
    with pytest.raises(StoreError, match="unknown store URL scheme 'redis'"):
        open_store("redis://localhost")
    with pytest.raises(StoreError, match="bad PostgreSQL schema name"):
        open_store("postgresql://h/db?schema=x;drop")


async def test_try_lock_never_waits(store_url: str) -> None:
    one, two = open_store(store_url), open_store(store_url)  # as two processes would
    try:
        async with one.try_lock("compact:s") as first:
            async with two.try_lock("compact:s") as second:
                assert (first, second) == (True, False)
            async with two.try_lock("compact:other") as other:
                assert other is True
        async with two.try_lock("compact:s") as again:
            assert again is True
    finally:
        await one.aclose()
        await two.aclose()


async def test_a_message_that_cannot_be_stored_is_one_clear_error_and_writes_nothing(
    store: Backend,
) -> None:
    from thinkloop.store import StoreError

    await store.append("s", TURN[:1])
    bad = Message.assistant("", (ToolCall("c", "t", {"when": object()}),))
    with pytest.raises(StoreError, match="cannot store this assistant message"):
        await store.append("s", [Message.user("fine"), bad])
    assert await store.load("s") == TURN[:1]
    with pytest.raises(StoreError):
        await store.append("new", [bad])
    assert await store.session_info("new") is None


def _pending(call_id: str, turn: int = 2) -> PendingApproval:
    return PendingApproval("run1", "s1", call_id, "send_money", {"to": "bob", "amount": 5},
                           "send_money requires approval", 1700000000.5, "pay bob", 8, turn)


async def test_save_turn_keeps_messages_and_pending_calls_together(store: Backend) -> None:
    paused = [Message.user("pay bob"), Message.assistant("", (
        ToolCall("c1", "send_money", {"to": "bob", "amount": 5}),
        ToolCall("c2", "send_money", {"to": "bob", "amount": 5})))]
    assert await store.pending_approvals("s1") == []
    await store.save_turn("s1", paused, [_pending("c1"), _pending("c2")])
    assert await store.load("s1") == paused
    assert await store.pending_approvals("s1") == [_pending("c1"), _pending("c2")]
    assert await store.pending_approvals("other") == []
    # A resumed run that pauses again replaces them; one that ends clears them.
    more = [Message.tool("c1", "send_money", "sent"), Message.tool("c2", "send_money", "sent"),
            Message.assistant("", (ToolCall("c3", "send_money", {}),))]
    await store.save_turn("s1", more, [_pending("c3", 5)])
    assert await store.pending_approvals("s1") == [_pending("c3", 5)]
    await store.save_turn("s1", [Message.assistant("done")], [])
    assert await store.pending_approvals("s1") == []
    assert len(await store.load("s1")) == 6


async def test_save_turn_is_all_or_nothing(store: Backend) -> None:
    await store.save_turn("s1", [Message.user("pay")], [_pending("c1")])
    bad = Message.assistant("", (ToolCall("c9", "x", {"blob": object()}),))
    with pytest.raises(StoreError):
        await store.save_turn("s1", [Message.user("ok"), bad], [])
    assert await store.load("s1") == [Message.user("pay")]
    assert await store.pending_approvals("s1") == [_pending("c1")]


async def test_deleting_a_session_drops_its_pending_calls(store: Backend) -> None:
    await store.save_turn("s1", [Message.user("pay")], [_pending("c1")])
    assert await store.delete_session("s1") is True
    assert await store.pending_approvals("s1") == []


async def test_save_turn_with_no_new_messages_still_keeps_the_session(store: Backend) -> None:
    # A resumed run may add nothing; the session is touched as an append would (as SQLite and
    # the in-process store always did; PostgreSQL used to skip it).
    await store.save_turn("s1", [], [_pending("c1")])
    info = await store.session_info("s1")
    assert info is not None and info.messages == 0
    assert await store.pending_approvals("s1") == [_pending("c1")]


async def test_owed_post_turn_jobs_are_held_released_taken_once_and_dropped(
    store: Backend,
) -> None:
    import time

    from thinkloop.store.base import OwedJobs

    owed = OwedJobs("run-1", "s1", None, '{"task": "hi"}', time.time())
    await store.owe_jobs(owed, 600.0)  # its own process runs them: no one else takes them
    assert await store.take_owed_jobs(10, 600.0) == []
    await store.release_jobs("run-1")  # that process stopped first
    assert await store.take_owed_jobs(10, 600.0) == [owed]
    assert await store.take_owed_jobs(10, 600.0) == []  # held by the one that took them
    await store.drop_jobs("run-1")
    await store.release_jobs("run-1")
    assert await store.take_owed_jobs(10, 600.0) == []
