"""Private learning, as a store contract on SQLite and PostgreSQL: no query the recall,
skills, lessons, entities or preferences paths make returns another owner's rows."""

from __future__ import annotations

import orjson

from thinkloop.memory.layers import owner_of
from thinkloop.memory.recall import BM25Retriever
from thinkloop.store import PostgresStore, SQLiteStore

ALICE, BOB = owner_of("alice", None), owner_of("bob", None)
# What learning stores (lessons, skills, observations) and what recall searches (manual,
# episode, summary).
KINDS = ("reflection", "adversarial", "skill", "observation", "manual", "episode", "summary")


async def _alice_learns(store: SQLiteStore | PostgresStore) -> None:
    assert ALICE is not None
    skill = {"name": "learned-lab-results", "description": "How to: e-mail lab results",
             "body": "1. read_file(path=<value>)\n2. send_email(to=<value>)"}
    for kind in KINDS:
        content = orjson.dumps(skill).decode() if kind == "skill" else \
            "Alice Dupont's diabetes lab results" if kind == "manual" else \
            f"a {kind} about the weekly train timetable"
        await store.add_memory(ALICE, kind, f"{kind}-1", content)
    await store.add_graph(ALICE, ["Alice Dupont", "Dr Martin"],
                          [("Alice Dupont", "mentioned_with", "Dr Martin")])
    await store.set_facts(ALICE, {"preference_tone": "short answers", "doctor": "Dr Martin"})


async def test_no_learning_query_returns_another_users_rows(
        store: SQLiteStore | PostgresStore) -> None:
    await _alice_learns(store)
    assert BOB is not None and ALICE != BOB
    for kind in (*KINDS, None):
        assert await store.memories(BOB, kind) == []
        assert await store.memories(BOB, kind, limit=5) == []
        assert await store.memories(BOB, kind, after_id=0) == []
    assert await store.graph_nodes(BOB) == []
    assert await store.graph_edges(BOB, ["Alice Dupont", "Dr Martin"]) == []
    assert await store.profile(BOB) == {}
    assert await BM25Retriever(store).search(BOB, "diabetes lab results Alice", 5) == []
    assert await store.delete_memory(BOB, "skill-1") == 0  # nor can Bob remove Alice's rows
    # Alice's own queries still find them: the contract is about owners, not lost rows.
    assert len(await store.memories(ALICE, "skill")) == 1
    assert [n for n, _ in await store.graph_nodes(ALICE)] == ["Alice Dupont", "Dr Martin"]
    assert (await store.profile(ALICE))["doctor"] == "Dr Martin"
    assert await BM25Retriever(store).search(ALICE, "diabetes lab results", 5)


async def test_session_owners_are_private_too(store: SQLiteStore | PostgresStore) -> None:
    one, two = owner_of(None, "s-1"), owner_of(None, "s-2")
    assert one is not None and two is not None
    await store.add_memory(one, "reflection", "r", "the first session's lesson")
    assert await store.memories(two) == []
    assert await BM25Retriever(store).search(two, "first session lesson", 3) == []
