"""remember / recall / forget driven by a scripted model, on both backends."""

from __future__ import annotations

from thinkloop import Agent, ScriptedModel
from thinkloop.memory import Memory
from thinkloop.models.scripted import call, reply
from thinkloop.store import PostgresStore, SQLiteStore

Backend = SQLiteStore | PostgresStore


async def test_remember_recall_forget(store: Backend) -> None:
    memory = Memory(store, embedder=None, jobs=(), auto_compact=False)
    model = ScriptedModel([
        reply("", call("remember", key="color", content="The user's favourite colour is teal.")),
        reply("", call("remember", key="color", content="The user's favourite colour is red.")),
        reply("", call("recall", query="favourite colour")),
        reply("", call("forget", key="color"), call("forget", key="color")),
        "done",
    ])
    agent = Agent(model, tools=memory.tools(), store=store, plugins=False, guard=False)
    result = await agent.run("remember my colour", session="s", user_id="ada")
    assert result.status == "completed"
    observations = [m.content for m in result.messages if m.role == "tool"]
    assert observations[:3] == [
        "Saved memory 'color'.",
        "Updated memory 'color'.",
        "- [color] (manual) The user's favourite colour is red.",
    ]
    # The two forgets of one step run at once (on PostgreSQL on two connections): exactly one
    # of them deletes, whichever comes first.
    assert sorted(observations[3:]) == ["Forgot 'color'.", "No memory named 'color'."]
    assert await store.memories("user:ada") == []


async def test_memories_belong_to_the_user_or_else_the_session(store: Backend) -> None:
    memory = Memory(store, embedder=None, jobs=(), auto_compact=False)
    model = ScriptedModel([
        reply("", call("remember", key="k", content="for the session")), "ok",
        reply("", call("remember", key="k", content="nowhere")), "ok",
    ])
    agent = Agent(model, tools=memory.tools(), store=store, plugins=False, guard=False)
    await agent.run("x", session="s1")
    result = await agent.run("y")  # no session, no user
    assert [m.content for m in await store.memories("session:s1")] == ["for the session"]
    assert result.messages[2].content.startswith("Memory is not available")


async def test_bm25_recall_ranks_by_relevance(store: Backend) -> None:
    from thinkloop.memory import BM25Retriever

    for text in ["The user owns a golden retriever named Rex.",
                 "The deploy runs every Friday at noon.",
                 "The user's sister lives in Lisbon."]:
        await store.add_memory("u", "manual", "", text)
    retriever = BM25Retriever(store)
    found = await retriever.search("u", "when does the deploy run?", 2)
    assert [r.content for r in found] == ["The deploy runs every Friday at noon."]
    assert await retriever.search("u", "zzz qqq", 3) == []
    await store.add_memory("u", "episode", "", "User: where is my sister? Assistant: Lisbon")
    found = await retriever.search("u", "sister", 5)  # the index saw the new row
    assert {r.kind for r in found} == {"manual", "episode"}


async def test_recall_index_follows_additions_incrementally_and_deletions_fully(
    store: Backend,
) -> None:
    from thinkloop.memory import BM25Retriever

    retriever = BM25Retriever(store)
    assert await retriever.search("u", "anything", 3) == []
    await store.add_memories("u", [("manual", "a", "alpha apples", None),
                                   ("manual", "b", "bravo bananas", None)])
    assert [r.key for r in await retriever.search("u", "apples", 3)] == ["a"]
    first = retriever._cache._by_owner["u"]
    await store.add_memory("u", "episode", "", "charlie cherries")
    await store.add_memory("u", "internal", "", "cherries not for recall")  # kind not recalled
    assert [r.content for r in await retriever.search("u", "cherries", 3)] == [
        "charlie cherries"]
    second = retriever._cache._by_owner["u"]
    assert second.records[:2] == first.records and len(second.records) == 3
    await store.delete_memory("u", "a")
    assert await retriever.search("u", "apples", 3) == []
    assert [r.key for r in retriever._cache._by_owner["u"].records] == ["b", ""]
